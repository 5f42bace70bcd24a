"""A small sequence-regression training script with the autograd bugs gradfix fixes.

Run `gradfix fix --diff examples/train.py` to see the proposed fixes; run the script itself
(`python examples/train.py`) before and after `gradfix fix examples/train.py` to see the
RuntimeError go away.
"""

import torch
from torch import nn

torch.manual_seed(0)


class Forecaster(nn.Module):
    def __init__(self, features: int = 4, hidden: int = 16) -> None:
        super().__init__()
        self.rnn = nn.GRU(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x, hidden):
        out, hidden = self.rnn(x, hidden)
        return self.head(out[:, -1]), hidden


model = Forecaster()
criterion = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
batches = [(torch.randn(8, 12, 4), torch.randn(8, 1)) for _ in range(20)]

for epoch in range(3):
    hidden = torch.zeros(1, 8, 16)
    running_loss = 0.0
    predictions = []
    for x, y in batches:
        optimizer.zero_grad()
        prediction, hidden = model(x, hidden)  # GF002: the state carries last batch's graph
        loss = criterion(prediction, y)
        loss.backward()
        optimizer.step()
        running_loss += loss  # GF001: keeps every batch's graph alive
        predictions.append(prediction)  # GF002: keeps every batch's activations alive
    spread = torch.cat(predictions).std()
    print(f"epoch {epoch}: loss {running_loss / len(batches):.4f}, spread {spread:.3f}")
