import torch
from torch import nn


class Trainer:
    def __init__(self, net):
        self.net = net
        self.opt = torch.optim.SGD(net.parameters(), lr=0.1)

    def backward(self, loss):
        loss.backward()

    def compute_loss(self, tokens, target):
        loss = nn.functional.cross_entropy(self.net(tokens).mean(1), target)
        self.backward(loss)
        return loss

    def train_step(self, tokens, target):
        self.opt.zero_grad()
        loss = self.compute_loss(tokens, target)
        self.backward(loss)
        self.opt.step()
        return loss.item()


torch.manual_seed(0)
model = nn.Sequential(nn.Embedding(10, 6, padding_idx=0), nn.Linear(6, 4))
trainer = Trainer(model)
for step in range(3):
    tokens, target = torch.randint(0, 10, (5, 7)), torch.randint(0, 4, (5,))
    print(f"step {step} loss {trainer.train_step(tokens, target):.4f}")
