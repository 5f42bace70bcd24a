# Notebook-style cells (exported as one script): train a deep linear network on a toy
# regression with full-batch gradient descent and collect the loss of every epoch to plot it.
import torch
import torch.nn as nn

torch.manual_seed(0)

# --- data -----------------------------------------------------------------------------------
X = torch.randn(32, 4)
W_true = torch.randn(4, 2)
Y = X @ W_true + 0.1 * torch.randn(32, 2)

# --- model: depth-3 linear network without nonlinearities -----------------------------------
dln = nn.Sequential(nn.Linear(4, 6, bias=False), nn.Linear(6, 6, bias=False), nn.Linear(6, 2, bias=False))
loss_fn = nn.MSELoss()
optimizer = torch.optim.SGD(dln.parameters(), lr=0.05)

# --- training -------------------------------------------------------------------------------
num_epochs = 6
losses = []
for epoch in range(num_epochs):
    optimizer.zero_grad()
    l = loss_fn(dln(X), Y)
    l.backward()
    optimizer.step()
    losses.append(l)

# --- plot (the notebook calls plt.plot(range(num_epochs), losses) here) ---------------------
for epoch, value in zip(range(num_epochs), losses):
    print(f"epoch {epoch} loss {value.item():.4f}")
print(f"checksum {sum(p.sum().item() for p in dln.parameters()):.4f}")
