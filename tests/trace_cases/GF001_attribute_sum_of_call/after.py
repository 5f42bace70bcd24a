import torch
import torch.nn as nn


def gather(value):
    # stands in for an all-reduce over workers: differentiable, one worker here
    return value * 1.0


class RunningMean:
    def __init__(self):
        self.total = torch.zeros(())
        self.count = 0

    def add(self, value):
        self.total += gather(value).detach()
        self.count += 1


torch.manual_seed(0)
net = nn.Linear(3, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.05)
train_loss = RunningMean()
for step in range(5):
    X, y = torch.randn(6, 3), torch.randn(6, 1)
    loss = nn.functional.mse_loss(net(X), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    train_loss.add(loss)
    print(f"step {step} mean {(train_loss.total / train_loss.count).item():.4f}")
