# A hand-written layer that bumps one row of an intermediate per step of a loop and accumulates
# a matrix product of the bumped intermediate; trained in a flat script.
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self, n=6):
        super(Net, self).__init__()
        self.n = n
        self.param = nn.Parameter(torch.randn(n, n) * 0.3)

    def forward(self, a):
        y = 0
        b = torch.mm(self.param, a)
        for i in range(self.n):
            b[i] = b[i] + 1
            y = y + torch.mm(self.param, b)
        return y


net = Net()
crit = nn.MSELoss()
opt = torch.optim.SGD(net.parameters(), lr=0.001)
X = torch.randn(6, 1)
Y = torch.randn(6, 1)

for step in range(4):
    opt.zero_grad()
    out = net(X)
    loss = crit(out, Y)
    loss.backward()
    opt.step()
    print(f"step {step} loss {loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in net.parameters()):.4f}")
