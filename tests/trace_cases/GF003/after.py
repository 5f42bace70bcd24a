import torch
import torch.nn as nn

torch.manual_seed(0)
body, head_a, head_b = nn.Linear(4, 4), nn.Linear(4, 1), nn.Linear(4, 1)
params = [*body.parameters(), *head_a.parameters(), *head_b.parameters()]
optimizer = torch.optim.SGD(params, lr=0.1)
for step in range(3):
    features = torch.relu(body(torch.randn(8, 4)))
    loss_a = head_a(features).pow(2).mean()
    loss_b = head_b(features).pow(2).mean()
    optimizer.zero_grad()
    loss_a.backward(retain_graph=True)
    loss_b.backward()
    optimizer.step()
    print(f"step {step} loss {loss_a.item() + loss_b.item():.4f}")
