import torch
import torch.nn as nn


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.act = nn.ReLU(inplace=True)  # on the layer's output, which nothing saved

    def forward(self, x):
        return self.act(self.fc(x))


class PreActBlock(nn.Module):
    def __init__(self, preact):
        super().__init__()
        self.preact = preact
        self.skip = nn.Linear(4, 4)
        if preact:
            self.act = nn.ReLU(inplace=False)
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        shortcut = self.skip(x)
        if self.preact:
            x = self.act(x)
        return self.fc(x) + shortcut


def build():
    body = nn.Sequential()
    body.add_module("head", Head())
    for i in range(2):
        body.add_module(f"block{i}", PreActBlock(preact=i > 0))
    body.add_module("out", nn.Linear(4, 1))
    return body


torch.manual_seed(0)
net = build()
opt = torch.optim.SGD(net.parameters(), lr=0.1)
for step in range(3):
    X, y = torch.randn(8, 4), torch.randn(8, 1)
    loss = nn.functional.mse_loss(net(X), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
