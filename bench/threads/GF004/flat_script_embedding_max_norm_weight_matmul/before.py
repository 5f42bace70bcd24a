# Knowledge-graph-style scoring: every entity embedding is scored against a relation matrix W,
# and the looked-up batch entities are scored too; nn.Embedding uses max_norm.
import torch
import torch.nn as nn

torch.manual_seed(0)

n, d, m = 6, 5, 7
embedding = nn.Embedding(n, d, max_norm=True)
W = torch.randn((m, d), requires_grad=True)
optimizer = torch.optim.Adam(list(embedding.parameters()) + [W], lr=1e-2)

batches = [torch.randint(0, n, (3,)) for _ in range(4)]
for step, idx in enumerate(batches):
    optimizer.zero_grad()
    a = embedding.weight @ W.t()
    b = embedding(idx) @ W.t()
    out = a.unsqueeze(0) + b.unsqueeze(1)
    loss = out.sigmoid().mean()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

print(f"checksum {embedding.weight.sum().item() + W.sum().item():.4f}")
