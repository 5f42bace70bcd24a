import torch
from torch import nn


class Trainer:
    def __init__(self, net, opt):
        self.net, self.opt = net, opt
        self.predictions = []

    def train_step(self, X, Y):
        self.opt.zero_grad()
        loss = nn.functional.mse_loss(self.net(X), Y)
        loss.backward()
        self.opt.step()
        self.predictions.append(self.net(X).detach())
        return loss.item()


torch.manual_seed(0)
net = nn.Linear(4, 1)
trainer = Trainer(net, torch.optim.SGD(net.parameters(), lr=0.1))
X, Y = torch.randn(8, 4), torch.randn(8, 1)
for epoch in range(5):
    print(f"epoch {epoch} loss {trainer.train_step(X, Y):.4f}")
