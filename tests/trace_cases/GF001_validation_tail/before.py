import torch
import torch.nn as nn


def evaluate(net, batches):
    totals = {"mse": 0.0, "batches": 0}
    for X, y in batches:
        totals["mse"] += nn.functional.mse_loss(net(X), y)
        totals["batches"] += 1
    return totals


torch.manual_seed(0)
net = nn.Linear(4, 1)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
train_batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(3)]
val_batches = [(torch.randn(8, 4), torch.randn(8, 1)) for _ in range(2)]
history = []
for epoch in range(3):
    for X, y in train_batches:
        loss = nn.functional.mse_loss(net(X), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    history.append(evaluate(net, val_batches))
    print(f"epoch {epoch} val {history[-1]['mse'] / history[-1]['batches']:.4f}")
