# DCGAN tutorial loop as a flat script: D gets errD_real.backward() and
# errD_fake.backward() on separate forwards (the fake is detached), D steps,
# then G backpropagates errG through a fresh netD(fake) forward.
import torch
import torch.nn as nn

torch.manual_seed(0)

nz = 8
nf = 16
real_label = 1.0
fake_label = 0.0

netG = nn.Sequential(nn.Linear(nz, 32), nn.BatchNorm1d(32), nn.ReLU(True), nn.Linear(32, nf), nn.Tanh())
netD = nn.Sequential(nn.Linear(nf, 32), nn.LeakyReLU(0.2, inplace=True), nn.Linear(32, 1), nn.Sigmoid())

criterion = nn.BCELoss()
optimizerD = torch.optim.Adam(netD.parameters(), lr=2e-3, betas=(0.5, 0.999))
optimizerG = torch.optim.Adam(netG.parameters(), lr=2e-3, betas=(0.5, 0.999))

dataset = torch.tanh(torch.randn(64, nf) * 0.7)
dataloader = [dataset[k:k + 16] for k in range(0, 64, 16)]

G_losses = []
D_losses = []
for epoch in range(2):
    for i, data in enumerate(dataloader, 0):
        # (1) Update D network: maximize log(D(x)) + log(1 - D(G(z)))
        netD.zero_grad()
        real_cpu = data
        b_size = real_cpu.size(0)
        label = torch.full((b_size,), real_label)
        output = netD(real_cpu).view(-1)
        errD_real = criterion(output, label)
        errD_real.backward()
        D_x = output.mean().item()

        noise = torch.randn(b_size, nz)
        fake = netG(noise)
        label.fill_(fake_label)
        output = netD(fake.detach()).view(-1)
        errD_fake = criterion(output, label)
        errD_fake.backward()
        D_G_z1 = output.mean().item()
        errD = errD_real + errD_fake
        optimizerD.step()

        # (2) Update G network: maximize log(D(G(z)))
        netG.zero_grad()
        label.fill_(real_label)
        output = netD(fake).view(-1)
        errG = criterion(output, label)
        errG.backward()
        D_G_z2 = output.mean().item()
        optimizerG.step()

        G_losses.append(errG.item())
        D_losses.append(errD.item())
        print(f"[{epoch}][{i}] Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
              f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}")

print(f"checksum {sum(p.sum().item() for p in netG.parameters()) + sum(p.sum().item() for p in netD.parameters()):.4f}")
