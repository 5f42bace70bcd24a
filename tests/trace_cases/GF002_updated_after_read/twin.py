import torch
from torch import nn


def train(G, D, epochs, g_steps):
    opt_G = torch.optim.SGD(G.parameters(), lr=0.05)
    z = torch.randn(4, 2)
    for epoch in range(epochs):
        for _ in range(g_steps):
            opt_G.zero_grad()
            X = G(z)
            G_loss = -D(X).mean()
            G_loss.backward()
            opt_G.step()
        print(f"epoch {epoch} G_loss {G_loss.item():.4f}")


torch.manual_seed(0)
net_G = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 3))
net_D = nn.Sequential(nn.Linear(3, 1))
train(net_G, net_D, epochs=2, g_steps=3)
