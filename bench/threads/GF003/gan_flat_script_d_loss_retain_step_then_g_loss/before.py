# A painter GAN in one flat script: D and G share the fake paintings' graph,
# D_loss is backpropagated with retain_graph=True, opt_D steps, then G_loss
# is backpropagated through the same D forward.
import torch
import torch.nn as nn

torch.manual_seed(0)

BATCH_SIZE = 16
LR_G = 1e-3
LR_D = 1e-3
N_IDEAS = 4
ART_COMPONENTS = 8
PAINT_POINTS = torch.linspace(-1, 1, ART_COMPONENTS).repeat(BATCH_SIZE, 1)


def artist_works():
    a = torch.rand(BATCH_SIZE, 1) + 1.0
    return a * PAINT_POINTS.pow(2) + (a - 1)


G = nn.Sequential(
    nn.Linear(N_IDEAS, 32),
    nn.ReLU(),
    nn.Linear(32, ART_COMPONENTS),
)

D = nn.Sequential(
    nn.Linear(ART_COMPONENTS, 32),
    nn.ReLU(),
    nn.Linear(32, 1),
    nn.Sigmoid(),
)

opt_D = torch.optim.Adam(D.parameters(), lr=LR_D)
opt_G = torch.optim.Adam(G.parameters(), lr=LR_G)

for step in range(4):
    artist_paintings = artist_works()
    G_ideas = torch.randn(BATCH_SIZE, N_IDEAS)
    G_paintings = G(G_ideas)

    prob_artist0 = D(artist_paintings)
    prob_artist1 = D(G_paintings)

    D_loss = -torch.mean(torch.log(prob_artist0) + torch.log(1.0 - prob_artist1))
    G_loss = torch.mean(torch.log(1.0 - prob_artist1))

    opt_D.zero_grad()
    D_loss.backward(retain_graph=True)
    opt_D.step()

    opt_G.zero_grad()
    G_loss.backward()
    opt_G.step()

    print(f"step {step} D_loss {D_loss.item():.4f} G_loss {G_loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in G.parameters()) + sum(p.sum().item() for p in D.parameters()):.4f}")
