# One network, two outputs, one optimizer: each output gets its own loss and
# its own backward() before a single optimizer.step().
import torch
import torch.nn as nn

torch.manual_seed(0)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(10, 32), nn.Tanh(), nn.Linear(32, 16), nn.ReLU())
        self.out1 = nn.Linear(16, 3)
        self.out2 = nn.Linear(16, 1)

    def forward(self, x):
        h = self.body(x)
        return self.out1(h), self.out2(h)


net = Net()
criterion1 = nn.CrossEntropyLoss()
criterion2 = nn.MSELoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.05)

X = torch.randn(48, 10)
y1 = torch.randint(0, 3, (48,))
y2 = torch.randn(48, 1)

for epoch in range(2):
    for i in range(0, 48, 16):
        inputs = X[i:i + 16]
        output1, output2 = net(inputs)
        loss1 = criterion1(output1, y1[i:i + 16])
        loss2 = criterion2(output2, y2[i:i + 16])

        optimizer.zero_grad()
        loss1.backward()
        loss2.backward()
        optimizer.step()

        print(f"epoch {epoch} batch {i // 16} loss1 {loss1.item():.4f} loss2 {loss2.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in net.parameters()):.4f}")
