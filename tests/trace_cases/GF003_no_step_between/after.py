import torch
from torch import nn

torch.manual_seed(0)
enc = nn.Linear(4, 2)
dec = nn.Linear(2, 4)
critic = nn.Linear(4, 1)
opt_critic = torch.optim.SGD(critic.parameters(), lr=0.1)
opt_model = torch.optim.SGD([*enc.parameters(), *dec.parameters()], lr=0.1)
for step in range(3):
    x = torch.randn(8, 4)
    mu = enc(x)
    recon = dec(mu)
    opt_critic.zero_grad()
    critic_loss = critic(recon.detach()).mean()
    critic_loss.backward()
    opt_critic.step()
    opt_model.zero_grad()
    recon_loss = (recon - x).pow(2).mean()
    recon_loss.backward(retain_graph=True)
    latent_loss = mu.pow(2).mean()
    latent_loss.backward()
    opt_model.step()
    print(f"step {step} recon {recon_loss.item():.4f} latent {latent_loss.item():.4f}")
