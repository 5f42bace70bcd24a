# GAN trained generator-first: loss_g and loss_d both read the same
# discriminator output on the fake batch, and the generator steps before
# loss_d is backpropagated.
import torch
import torch.nn as nn

torch.manual_seed(0)

latent_dim = 6
data_dim = 12

generator = nn.Sequential(nn.Linear(latent_dim, 24), nn.LeakyReLU(0.2), nn.Linear(24, data_dim), nn.Tanh())
discriminator = nn.Sequential(nn.Linear(data_dim, 24), nn.LeakyReLU(0.2), nn.Linear(24, 1))

adversarial_loss = nn.BCEWithLogitsLoss()
optim_g = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.5, 0.999))
optim_d = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))

dataset = torch.tanh(torch.randn(64, data_dim) * 0.5 + 0.3)

for epoch in range(2):
    for i in range(0, 64, 32):
        real = dataset[i:i + 32]
        valid = torch.ones(real.size(0), 1)
        fake_label = torch.zeros(real.size(0), 1)

        z = torch.randn(real.size(0), latent_dim)
        fake = generator(z)
        pred_fake = discriminator(fake)
        pred_real = discriminator(real)

        # computing loss_g and loss_d...
        loss_g = adversarial_loss(pred_fake, valid)
        loss_d = (adversarial_loss(pred_real, valid) + adversarial_loss(pred_fake, fake_label)) / 2

        optim_g.zero_grad()
        loss_g.backward()
        optim_g.step()

        optim_d.zero_grad()
        loss_d.backward()
        optim_d.step()

        print(f"epoch {epoch} batch {i // 32} loss_g {loss_g.item():.4f} loss_d {loss_d.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in generator.parameters()) + sum(p.sum().item() for p in discriminator.parameters()):.4f}")
