import torch
import torch.nn as nn

torch.manual_seed(0)
layer = nn.Linear(4, 4)
optimizer = torch.optim.SGD(layer.parameters(), lr=0.1)
for step in range(3):
    gate = torch.sigmoid(layer(torch.randn(8, 4)))
    gate[gate < 0.3] = 0.0
    loss = gate.sum()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
