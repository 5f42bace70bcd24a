# Vanilla GAN tutorial (MLP generator and discriminator, BCE loss, two Adam optimizers).
import torch
import torch.nn as nn
from torch.optim import Adam

torch.manual_seed(0)


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()
        self.main = nn.Sequential(
            nn.Linear(in_features=8, out_features=32),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(in_features=32, out_features=4 * 4),
            nn.Tanh())

    def forward(self, inputs):
        return self.main(inputs).view(-1, 1, 4, 4)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.main = nn.Sequential(
            nn.Linear(in_features=4 * 4, out_features=32),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Dropout(inplace=True),
            nn.Linear(in_features=32, out_features=16),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Dropout(inplace=True),
            nn.Linear(in_features=16, out_features=1),
            nn.Sigmoid())

    def forward(self, inputs):
        inputs = inputs.view(-1, 4 * 4)
        return self.main(inputs)


G = Generator()
D = Discriminator()
criterion = nn.BCELoss()
G_optimizer = Adam(G.parameters(), lr=0.0002, betas=(0.5, 0.999))
D_optimizer = Adam(D.parameters(), lr=0.0002, betas=(0.5, 0.999))

dataloader = [(torch.rand(6, 1, 4, 4) * 2 - 1, torch.zeros(6)) for _ in range(3)]

for epoch in range(2):
    D_losses = []
    G_losses = []
    for real_data, _ in dataloader:
        batch_size = real_data.size(0)
        target_real = torch.ones(batch_size, 1)
        target_fake = torch.zeros(batch_size, 1)

        D_result_from_real = D(real_data)
        D_loss_real = criterion(D_result_from_real, target_real)
        z = torch.randn((batch_size, 8))
        fake_data = G(z)
        D_result_from_fake = D(fake_data)
        D_loss_fake = criterion(D_result_from_fake, target_fake)
        D_loss = D_loss_real + D_loss_fake
        D.zero_grad()
        D_loss.backward()
        D_optimizer.step()
        D_losses.append(D_loss.item())

        z = torch.randn((batch_size, 8))
        fake_data = G(z)
        D_result_from_fake = D(fake_data)
        G_loss = criterion(D_result_from_fake, target_real)
        G.zero_grad()
        G_loss.backward()
        G_optimizer.step()
        G_losses.append(G_loss.item())

    print(f"Epoch: {epoch} D Loss: {sum(D_losses) / len(D_losses):.4f} G Loss: {sum(G_losses) / len(G_losses):.4f}")

print(f"checksum G {sum(p.sum().item() for p in G.parameters()):.4f} D {sum(p.sum().item() for p in D.parameters()):.4f}")
