import torch
from torch import nn


class DecoderState:
    """What the decoder carries from one chunk of a long sequence to the next."""

    def __init__(self, hidden):
        self.hidden = hidden


class Decoder(nn.Module):
    def __init__(self, size):
        super().__init__()
        self.cell = nn.GRUCell(size, size)
        self.out = nn.Linear(size, 1)

    def forward(self, chunk, state):
        h = state.hidden.squeeze(0)
        outputs = []
        for x in chunk:
            h = self.cell(x, h)
            outputs.append(self.out(h))
        state.hidden = h.unsqueeze(0).detach()
        return torch.stack(outputs)


torch.manual_seed(0)
decoder = Decoder(4)
optimizer = torch.optim.Adam(decoder.parameters(), lr=0.01)
sequence, targets = torch.randn(12, 2, 4), torch.randn(12, 2, 1)
state = DecoderState(torch.zeros(1, 2, 4))
for start in range(0, 12, 4):
    prediction = decoder(sequence[start : start + 4], state)
    loss = nn.functional.mse_loss(prediction, targets[start : start + 4])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"chunk {start // 4} loss {loss.item():.4f}")
