import torch
from torch import nn

torch.manual_seed(0)
net_G = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 2))
net_D = nn.Sequential(nn.Linear(2, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
opt_G = torch.optim.Adam(net_G.parameters(), lr=1e-3)
opt_D = torch.optim.Adam(net_D.parameters(), lr=1e-3)
crit = nn.BCEWithLogitsLoss()
for it in range(3):
    X = torch.randn(6, 2)
    fake = net_G(torch.randn(6, 3))
    score_fake = net_D(fake)
    G_loss = crit(score_fake, torch.ones(6, 1))
    D_loss = crit(net_D(X), torch.ones(6, 1)) + crit(net_D(fake.detach()), torch.zeros(6, 1))
    opt_G.zero_grad()
    G_loss.backward()
    opt_G.step()
    opt_D.zero_grad()
    D_loss.backward()
    opt_D.step()
    print(f"it {it} G_loss {G_loss.item():.4f} D_loss {D_loss.item():.4f}")
