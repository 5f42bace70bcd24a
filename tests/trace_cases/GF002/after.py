import torch
import torch.nn as nn

torch.manual_seed(0)
rnn = nn.RNN(3, 5, batch_first=True)
head = nn.Linear(5, 1)
optimizer = torch.optim.SGD([*rnn.parameters(), *head.parameters()], lr=0.1)
hidden = torch.zeros(1, 2, 5)
for step in range(4):
    x = torch.randn(2, 6, 3)
    out, hidden = rnn(x, hidden.detach())
    loss = head(out).pow(2).mean()
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} loss {loss.item():.4f}")
