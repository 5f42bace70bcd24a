import torch
import torch.nn as nn


class LeakyNeuron(nn.Module):
    """Keeps its membrane potential on the module between calls."""

    def __init__(self, beta):
        super().__init__()
        self.beta = beta
        self.mem = None

    def forward(self, current):
        if self.mem is None:
            self.mem = torch.zeros_like(current)
        self.mem = self.beta * self.mem + current
        return torch.sigmoid(5 * (self.mem - 1.0))


def run_steps(net, neuron, X, num_steps):
    spikes = []
    for _ in range(num_steps):
        spikes.append(neuron(net(X)))
    return torch.stack(spikes)


def train(net, neuron, opt, batches):
    for X, y in batches:
        spikes = run_steps(net, neuron, X, 4)
        loss = nn.functional.mse_loss(spikes.mean(0), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item():.4f}")


torch.manual_seed(0)
net, neuron = nn.Linear(3, 2), LeakyNeuron(0.9)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
train(net, neuron, opt, [(torch.rand(4, 3), torch.rand(4, 2)) for _ in range(3)])
