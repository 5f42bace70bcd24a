# FactorVAE-style Solver: the VAE loss includes a total-correlation term from
# the discriminator's output D_z; the VAE is updated (retain_graph=True, then
# optim_VAE.step()) and afterwards the discriminator loss reuses D_z.
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def original_vae_loss(x, x_recon, mu, logvar):
    batch_size = x.size(0)
    recon_loss = F.binary_cross_entropy_with_logits(x_recon, x, reduction="sum").div(batch_size)
    kl_divergence = -0.5 * (1 + logvar - mu ** 2 - logvar.exp()).sum(1).mean()
    return recon_loss, kl_divergence


def permute_dims(z):
    B, d = z.size()
    perm_z = []
    for z_j in z.split(1, 1):
        perm = torch.randperm(B)
        perm_z.append(z_j[perm])
    return torch.cat(perm_z, 1)


class FactorVAE(nn.Module):
    def __init__(self, z_dim=3, x_dim=16):
        super().__init__()
        self.z_dim = z_dim
        self.encode = nn.Sequential(nn.Linear(x_dim, 32), nn.ReLU(), nn.Linear(32, 2 * z_dim))
        self.decode = nn.Sequential(nn.Linear(z_dim, 32), nn.ReLU(), nn.Linear(32, x_dim))

    def reparametrize(self, mu, logvar):
        std = logvar.mul(0.5).exp()
        eps = torch.randn_like(std)
        return eps * std + mu

    def forward(self, x, no_dec=False):
        stats = self.encode(x)
        mu = stats[:, :self.z_dim]
        logvar = stats[:, self.z_dim:]
        z = self.reparametrize(mu, logvar)
        if no_dec:
            return z
        x_recon = self.decode(z)
        return x_recon, mu, logvar, z


class Discriminator(nn.Module):
    def __init__(self, z_dim=3):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(z_dim, 32), nn.LeakyReLU(0.2), nn.Linear(32, 2))

    def forward(self, z):
        return self.net(z)


class Solver(object):
    def __init__(self, args):
        self.max_iter = args.max_iter
        self.global_iter = 0
        self.gamma = args.gamma
        self.VAE = FactorVAE(args.z_dim)
        self.optim_VAE = torch.optim.Adam(self.VAE.parameters(), lr=args.lr_VAE, betas=(0.9, 0.999))
        self.D = Discriminator(args.z_dim)
        self.optim_D = torch.optim.Adam(self.D.parameters(), lr=args.lr_D, betas=(0.5, 0.9))
        self.nets = [self.VAE, self.D]
        self.batch_size = args.batch_size
        data = torch.rand(64, 16).round()
        self.data_loader = [(data[k:k + 8], data[k + 8:k + 16]) for k in range(0, 64, 16)]

    def net_mode(self, train):
        for net in self.nets:
            net.train(train)

    def train(self):
        self.net_mode(train=True)
        ones = torch.ones(self.batch_size, dtype=torch.long)
        zeros = torch.zeros(self.batch_size, dtype=torch.long)

        out = False
        while not out:
            for x_true1, x_true2 in self.data_loader:
                self.global_iter += 1

                x_recon, mu, logvar, z = self.VAE(x_true1)
                vae_recon_loss, vae_kld = original_vae_loss(x_true1, x_recon, mu, logvar)

                D_z = self.D(z)
                vae_tc_loss = (D_z[:, :1] - D_z[:, 1:]).mean()

                vae_loss = vae_recon_loss + vae_kld + self.gamma * vae_tc_loss

                self.optim_VAE.zero_grad()
                vae_loss.backward(retain_graph=True)

                z_prime = self.VAE(x_true2, no_dec=True)
                z_pperm = permute_dims(z_prime).detach()
                D_z_pperm = self.D(z_pperm)
                D_tc_loss = 0.5 * (F.cross_entropy(D_z, zeros) + F.cross_entropy(D_z_pperm, ones))

                self.optim_D.zero_grad()
                D_tc_loss.backward()
                self.optim_VAE.step()
                self.optim_D.step()

                print(f"[{self.global_iter}] vae_recon_loss:{vae_recon_loss.item():.4f} "
                      f"vae_kld:{vae_kld.item():.4f} vae_tc_loss:{vae_tc_loss.item():.4f} "
                      f"D_tc_loss:{D_tc_loss.item():.4f}")

                if self.global_iter >= self.max_iter:
                    out = True
                    break


args = SimpleNamespace(max_iter=6, gamma=6.4, z_dim=3, lr_VAE=1e-3, lr_D=1e-3, batch_size=8)
solver = Solver(args)
solver.train()
print(f"checksum {sum(p.sum().item() for net in solver.nets for p in net.parameters()):.4f}")
