import torch
from torch import nn

torch.manual_seed(0)
net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.05)
crit = nn.MSELoss()
X, Y = torch.randn(16, 4), torch.randn(16, 1)
history = []
for _ in range(6):
    opt.zero_grad()
    D_loss = crit(net(X), Y)
    D_loss.backward()
    opt.step()
    history.append(D_loss)
print(f"mean {sum(float(h) for h in history) / len(history):.4f}")
