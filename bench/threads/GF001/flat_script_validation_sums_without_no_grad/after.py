# Super-resolution GAN training script (flat, SRGAN-style) ported from the old
# `Variable(..., volatile=True)` API: the per-epoch validation pass sums MSE for the PSNR.
from math import log10

import torch
import torch.nn as nn

torch.manual_seed(0)

NUM_EPOCHS = 2
UPSCALE_FACTOR = 2


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(), nn.Conv2d(8, 3 * UPSCALE_FACTOR ** 2, 3, padding=1))
        self.shuffle = nn.PixelShuffle(UPSCALE_FACTOR)

    def forward(self, x):
        return (torch.tanh(self.shuffle(self.body(x))) + 1) / 2


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.LeakyReLU(0.2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1))

    def forward(self, x):
        return torch.sigmoid(self.net(x))


netG = Generator()
netD = Discriminator()
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3)
optimizerD = torch.optim.Adam(netD.parameters(), lr=1e-3)
mse = nn.MSELoss()

train_loader = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)) for _ in range(3)]
val_loader = [(torch.rand(1, 3, 8, 8), torch.rand(1, 3, 16, 16)) for _ in range(3)]

results = {'d_loss': [], 'g_loss': [], 'psnr': []}

for epoch in range(1, NUM_EPOCHS + 1):
    running_results = {'batch_sizes': 0, 'd_loss': 0, 'g_loss': 0}

    netG.train()
    netD.train()
    for data, target in train_loader:
        batch_size = data.size(0)
        running_results['batch_sizes'] += batch_size

        # (1) Update D network: maximize D(x) - D(G(z))
        fake_img = netG(data)
        netD.zero_grad()
        real_out = netD(target).mean()
        fake_out = netD(fake_img.detach()).mean()
        d_loss = 1 - real_out + fake_out
        d_loss.backward()
        optimizerD.step()

        # (2) Update G network: adversarial + image loss
        netG.zero_grad()
        fake_out = netD(fake_img).mean()
        g_loss = mse(fake_img, target) + 1e-3 * (1 - fake_out)
        g_loss.backward()
        optimizerG.step()

        running_results['g_loss'] += g_loss.item() * batch_size
        running_results['d_loss'] += d_loss.item() * batch_size

    print('[%d/%d] Loss_D: %.4f Loss_G: %.4f' % (
        epoch, NUM_EPOCHS, running_results['d_loss'] / running_results['batch_sizes'],
        running_results['g_loss'] / running_results['batch_sizes']))

    netG.eval()
    valing_results = {'mse': 0, 'psnr': 0, 'batch_sizes': 0}
    with torch.no_grad():
        for val_lr, val_hr in val_loader:
            batch_size = val_lr.size(0)
            valing_results['batch_sizes'] += batch_size
            sr = netG(val_lr)

            batch_mse = ((sr - val_hr) ** 2).mean()
            valing_results['mse'] += batch_mse * batch_size
            valing_results['psnr'] = 10 * log10(1 / (valing_results['mse'] / valing_results['batch_sizes']))
    print('[converting LR images to SR images] PSNR: %.4f dB' % valing_results['psnr'])

    results['d_loss'].append(running_results['d_loss'] / running_results['batch_sizes'])
    results['g_loss'].append(running_results['g_loss'] / running_results['batch_sizes'])
    results['psnr'].append(valing_results['psnr'])

print('checksum G %.4f D %.4f' % (sum(p.sum().item() for p in netG.parameters()), sum(p.sum().item() for p in netD.parameters())))
