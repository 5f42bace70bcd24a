import torch
import torch.nn as nn


class RunningMAE:
    """A running metric: each call adds the batch's mean absolute error to the total."""

    def __init__(self):
        self.total = torch.tensor(0.0)
        self.batches = 0

    def __call__(self, preds, target):
        self.total = self.total + (preds - target).abs().mean()
        self.batches += 1

    def compute(self):
        return self.total / max(self.batches, 1)


class BaseTrainer:
    def __init__(self, net, opt):
        self.net, self.opt = net, opt
        self.mae = RunningMAE()


class Trainer(BaseTrainer):
    def train_step(self, X, y):
        out = self.net(X)
        loss = nn.functional.mse_loss(out, y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        self.mae(out, y)
        return loss.item()


torch.manual_seed(0)
net = nn.Linear(4, 1)
trainer = Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1))
for step in range(4):
    X, y = torch.randn(8, 4), torch.randn(8, 1)
    print(f"step {step} loss {trainer.train_step(X, y):.4f}")
print(f"mae {trainer.mae.compute().item():.4f}")
