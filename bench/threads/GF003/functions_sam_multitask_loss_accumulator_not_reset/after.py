# Multi-task classifier trained with SAM inside a train_epoch() function:
# the per-task losses of both passes are summed into the same `loss` name.
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class SAM(torch.optim.Optimizer):
    def __init__(self, params, base_optimizer, rho=0.05, **kwargs):
        super().__init__(params, dict(rho=rho, **kwargs))
        self.base_optimizer = base_optimizer(self.param_groups, **kwargs)
        self.param_groups = self.base_optimizer.param_groups

    @torch.no_grad()
    def first_step(self, zero_grad=False):
        norms = [p.grad.norm(p=2) for g in self.param_groups for p in g["params"] if p.grad is not None]
        grad_norm = torch.norm(torch.stack(norms), p=2)
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
                if p.grad is not None:
                    p.sub_(self.state[p]["e_w"])
        self.base_optimizer.step()
        if zero_grad:
            self.zero_grad()


class Classifier(nn.Module):
    def __init__(self, num_tasks):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU())
        self.heads = nn.ModuleList([nn.Conv2d(4, 1, 1) for _ in range(num_tasks)])

    def forward(self, x):
        feat = self.backbone(x)
        logit_map = [head(feat) for head in self.heads]
        output = [m.mean(dim=(2, 3)).squeeze(1) for m in logit_map]
        return output, logit_map


def get_loss(output, target, index, device, cfg):
    target = target[:, index].float().to(device)
    loss = F.binary_cross_entropy_with_logits(output[index], target) * cfg.loss_weight
    acc = ((torch.sigmoid(output[index]) > 0.5).float() == target).float().mean()
    return loss, acc


def train_epoch(model, dataloader, optimizer, cfg, device, epoch):
    num_tasks = cfg.num_tasks
    loss_sum = [0.0] * num_tasks
    acc_sum = [0.0] * num_tasks
    model.train()
    for step, (image, target) in enumerate(dataloader):
        image = image.to(device)
        output, logit_map = model(image)

        loss = 0
        for t in range(num_tasks):
            loss_t, acc_t = get_loss(output, target, t, device, cfg)
            loss += loss_t
            loss_sum[t] += loss_t.item()
            acc_sum[t] += acc_t.item()

        optimizer.zero_grad()
        loss.backward()
        optimizer.first_step(zero_grad=True)
        output, logit_map = model(image)

        loss = 0
        for t in range(num_tasks):
            loss_t, acc_t = get_loss(output, target, t, device, cfg)
            loss += loss_t
            loss_sum[t] += loss_t.item()
            acc_sum[t] += acc_t.item()
        loss.backward()
        optimizer.second_step(zero_grad=True)

        print(f"epoch {epoch} step {step} loss {loss.item():.4f} task0 {loss_sum[0] / (2 * (step + 1)):.4f}")
    return loss_sum, acc_sum


cfg = SimpleNamespace(num_tasks=3, loss_weight=1.0, lr=0.05)
device = torch.device("cpu")
model = Classifier(cfg.num_tasks)
optimizer = SAM(model.parameters(), torch.optim.SGD, lr=cfg.lr, momentum=0.9)
images = torch.randn(12, 1, 6, 6)
labels = torch.randint(0, 2, (12, cfg.num_tasks))
dataloader = [(images[k:k + 4], labels[k:k + 4]) for k in range(0, 12, 4)]

for epoch in range(2):
    train_epoch(model, dataloader, optimizer, cfg, device, epoch)

print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
