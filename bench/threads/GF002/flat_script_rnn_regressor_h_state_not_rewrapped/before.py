import math

import torch
from torch import nn

torch.manual_seed(0)

# Hyper Parameters
TIME_STEP = 10      # rnn time step
INPUT_SIZE = 1      # rnn input size
LR = 0.02           # learning rate


class RNN(nn.Module):
    def __init__(self):
        super(RNN, self).__init__()
        self.rnn = nn.RNN(input_size=INPUT_SIZE, hidden_size=16, num_layers=1, batch_first=True)
        self.out = nn.Linear(16, 1)

    def forward(self, x, h_state):
        # x (batch, time_step, input_size), h_state (n_layers, batch, hidden_size)
        r_out, h_state = self.rnn(x, h_state)
        outs = []
        for time_step in range(r_out.size(1)):    # a linear head on every time step
            outs.append(self.out(r_out[:, time_step, :]))
        return torch.stack(outs, dim=1), h_state


rnn = RNN()
optimizer = torch.optim.Adam(rnn.parameters(), lr=LR)
loss_func = nn.MSELoss()

h_state = None      # initial hidden state

for step in range(6):
    start, end = step * math.pi, (step + 1) * math.pi   # one period chunk after another
    steps = torch.linspace(start, end, TIME_STEP)
    x = torch.sin(steps)[None, :, None]    # shape (batch, time_step, input_size)
    y = torch.cos(steps)[None, :, None]

    prediction, h_state = rnn(x, h_state)   # rnn output and the state for the next chunk

    loss = loss_func(prediction, y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in rnn.parameters()):.4f}")
