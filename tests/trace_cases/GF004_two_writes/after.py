import torch
import torch.nn as nn


def cosine_scores(a, b, probe):
    a = a / torch.norm(a, dim=1, keepdim=True)
    b = b / torch.norm(b, dim=1, keepdim=True)
    # a side graph no backward goes through: writing what it saved is harmless
    side = torch.exp(probe)
    side += 1.0
    return a @ b.t()


torch.manual_seed(0)
proj_a, proj_b = nn.Linear(4, 3), nn.Linear(4, 3)
opt = torch.optim.SGD([*proj_a.parameters(), *proj_b.parameters()], lr=0.1)
for step in range(3):
    X = torch.randn(5, 4)
    scores = cosine_scores(proj_a(X), proj_b(X), proj_a(X))
    loss = (scores - torch.eye(5)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")
