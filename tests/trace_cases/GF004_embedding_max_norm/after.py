# An nn.Embedding with max_norm renormalises its weight in place at each lookup, after the
# matmul on line 11 saved that weight for backward.
import torch
import torch.nn as nn

torch.manual_seed(0)
embedding = nn.Embedding(6, 4, max_norm=1.0)
projection = torch.randn(3, 4, requires_grad=True)
optimizer = torch.optim.SGD([*embedding.parameters(), projection], lr=0.1)
for _ in range(2):
    scores = embedding.weight.clone() @ projection.t()
    looked_up = embedding(torch.tensor([0, 2])) @ projection.t()
    loss = scores.sigmoid().mean() + looked_up.mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
