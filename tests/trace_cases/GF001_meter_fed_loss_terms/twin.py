import torch
import torch.nn as nn


class WeightedLoss(nn.Module):
    def forward(self, pred, target):
        terms = {}
        terms["l1"] = (pred - target).abs().mean()
        terms["l2"] = ((pred - target) ** 2).mean()
        terms["total"] = terms["l1"] + 0.5 * terms["l2"]
        return terms


class Meter:
    def __init__(self):
        self.sum = 0.0
        self.n = 0

    def update(self, val, n=1):
        self.sum += val * n
        self.n += n


class BaseTrainer:
    def __init__(self, net, crit):
        self.net, self.crit = net, crit
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)
        self.meters = {"l1": Meter(), "l2": Meter()}


class Trainer(BaseTrainer):
    def train_step(self, X, y):
        terms = self.crit(self.net(X), y)
        self.opt.zero_grad()
        terms["total"].backward()
        self.opt.step()
        for name, meter in self.meters.items():
            meter.update(terms[name].item(), X.shape[0])


torch.manual_seed(0)
trainer = Trainer(nn.Linear(4, 1), WeightedLoss())
for step in range(5):
    trainer.train_step(torch.randn(8, 4), torch.randn(8, 1))
    l1, l2 = (trainer.meters[k] for k in ("l1", "l2"))
    print(f"step {step} l1 {float(l1.sum / l1.n):.4f} l2 {float(l2.sum / l2.n):.4f}")
