# Variable-length sequence regression, one flat script: the sequences of a batch have different
# lengths, so each one is run and scored on its own and the per-sequence losses are summed
# into the batch loss that is backpropagated once.
import torch
import torch.nn as nn

torch.manual_seed(0)


class SeqRegressor(nn.Module):
    def __init__(self, n_in=3, hidden=8):
        super().__init__()
        self.rnn = nn.GRU(n_in, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, seq):
        _, h = self.rnn(seq.unsqueeze(0))
        return self.out(h[-1]).squeeze()


model = SeqRegressor()
criteria = nn.MSELoss()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

batches = []
for _ in range(3):
    lengths = torch.randint(3, 9, (4,)).tolist()
    batches.append([(torch.randn(L, 3), torch.randn(())) for L in lengths])

for epoch in range(2):
    for b, batch in enumerate(batches):
        optimizer.zero_grad()
        loss = 0
        for seq_i, target_i in batch:
            loss_part = criteria(model(seq_i), target_i)
            loss += loss_part
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} batch {b} loss {loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
