import torch
import torch.nn as nn


class CarriedState:
    """What a recurrent model carries from one chunk of a sequence to the next."""

    def __init__(self, h, c):
        self.h, self.c = h, c

    def detach(self):
        for tensor in (self.h, self.c):
            tensor = tensor.detach()


torch.manual_seed(0)
lstm = nn.LSTMCell(3, 5)
opt = torch.optim.SGD(lstm.parameters(), lr=0.1)
state = CarriedState(torch.zeros(2, 5), torch.zeros(2, 5))
for chunk in range(3):
    h, c = lstm(torch.randn(2, 3), (state.h, state.c))
    state.h, state.c = h, c
    loss = h.pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    state.detach()
    print(f"chunk {chunk} loss {loss.item():.4f}")
