# Super-resolution training split into train_epoch / validate functions; validation runs the
# whole loop under torch.no_grad() and keeps its running MSE as a tensor for the PSNR.
from math import log10

import torch
import torch.nn as nn

torch.manual_seed(0)

UPSCALE_FACTOR = 2


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(), nn.Conv2d(8, 3 * UPSCALE_FACTOR ** 2, 3, padding=1))
        self.shuffle = nn.PixelShuffle(UPSCALE_FACTOR)

    def forward(self, x):
        return (torch.tanh(self.shuffle(self.body(x))) + 1) / 2


def train_epoch(netG, optimizerG, train_loader):
    netG.train()
    running_results = {'batch_sizes': 0, 'g_loss': 0}
    for data, target in train_loader:
        batch_size = data.size(0)
        running_results['batch_sizes'] += batch_size
        optimizerG.zero_grad()
        g_loss = ((netG(data) - target) ** 2).mean()
        g_loss.backward()
        optimizerG.step()
        running_results['g_loss'] += g_loss.item() * batch_size
    return running_results['g_loss'] / running_results['batch_sizes']


def validate(netG, val_loader):
    netG.eval()
    with torch.no_grad():
        valing_results = {'mse': 0, 'psnr': 0, 'batch_sizes': 0}
        for val_lr, val_hr in val_loader:
            batch_size = val_lr.size(0)
            valing_results['batch_sizes'] += batch_size
            sr = netG(val_lr)
            batch_mse = ((sr - val_hr) ** 2).mean()
            valing_results['mse'] += batch_mse * batch_size
            valing_results['psnr'] = 10 * log10(1 / (valing_results['mse'] / valing_results['batch_sizes']))
    return valing_results


netG = Generator()
optimizerG = torch.optim.Adam(netG.parameters(), lr=1e-3)
train_loader = [(torch.rand(2, 3, 8, 8), torch.rand(2, 3, 16, 16)) for _ in range(3)]
val_loader = [(torch.rand(1, 3, 8, 8), torch.rand(1, 3, 16, 16)) for _ in range(3)]

results = {'g_loss': [], 'val': []}
for epoch in range(1, 3):
    g_loss = train_epoch(netG, optimizerG, train_loader)
    valing_results = validate(netG, val_loader)
    results['g_loss'].append(g_loss)
    results['val'].append(valing_results)
    print('[%d/2] Loss_G: %.4f PSNR: %.4f dB val mse sum %.4f' % (epoch, g_loss, valing_results['psnr'], valing_results['mse']))
print('checksum G %.4f' % sum(p.sum().item() for p in netG.parameters()))
