# ImageNet-style train() function with a two-step SAM optimizer: the second
# forward-backward pass reuses `output` from the first pass.
import argparse

import torch
import torch.nn as nn

torch.manual_seed(0)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        defaults = dict(rho=rho, **kwargs)
        super().__init__(params, defaults)
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        grad_norm = torch.norm(torch.stack([p.grad.norm(p=2) for group in self.param_groups
                                            for p in group["params"] if p.grad is not None]), p=2)
        for group in self.param_groups:
            scale = group["rho"] / (grad_norm + 1e-12)
            for p in group["params"]:
                if p.grad is None:
                    continue
                e_w = p.grad * scale
                p.add_(e_w)
                self.state[p]["e_w"] = e_w
        if zero_grad:
            self.zero_grad()

    @torch.no_grad()
    def second_step(self, zero_grad=False):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


class AverageMeter(object):
    def __init__(self, name):
        self.name = name
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def accuracy(output, target, topk=(1,)):
    with torch.no_grad():
        maxk = max(topk)
        _, pred = output.topk(maxk, 1, True, True)
        correct = pred.t().eq(target.view(1, -1).expand_as(pred.t()))
        return [correct[:k].reshape(-1).float().sum(0) * 100.0 / target.size(0) for k in topk]


def train(train_loader, model, criterion, optimizer, epoch, args):
    losses = AverageMeter("Loss")
    top1 = AverageMeter("Acc@1")
    model.train()
    for i, (images, target) in enumerate(train_loader):
        # compute output
        output = model(images)

        # first forward-backward pass
        loss = criterion(output, target)
        loss.backward()
        optimizer.first_step(zero_grad=True)

        # second forward-backward pass
        criterion(output, target).backward()
        optimizer.second_step(zero_grad=True)

        acc1, = accuracy(output, target, topk=(1,))
        losses.update(loss.item(), images.size(0))
        top1.update(acc1.item(), images.size(0))
        print(f"Epoch [{epoch}][{i}] loss {losses.avg:.4f} acc@1 {top1.avg:.4f}")
    return top1.avg, losses.avg


def main():
    args = argparse.Namespace(epochs=2, lr=0.1, momentum=0.9)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 32), nn.ReLU(), nn.Linear(32, 5))
    criterion = nn.CrossEntropyLoss()
    optimizer = SAM(model.parameters(), torch.optim.SGD, lr=args.lr, momentum=args.momentum)
    images = torch.randn(24, 3, 4, 4)
    targets = torch.randint(0, 5, (24,))
    train_loader = [(images[k:k + 8], targets[k:k + 8]) for k in range(0, 24, 8)]
    for epoch in range(args.epochs):
        acc, loss = train(train_loader, model, criterion, optimizer, epoch, args)
    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")


if __name__ == "__main__":
    main()
