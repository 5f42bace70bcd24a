import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)


class Opt:
    niter = 2
    Dsteps = 2
    Gsteps = 3
    lr_d = 5e-4
    lr_g = 5e-4
    beta1 = 0.5
    lambda_grad = 0.1
    alpha = 10
    noise_amp = 0.1
    nc = 3
    size = 8


def conv_block(cin, cout):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2))


class Generator(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.body = nn.Sequential(conv_block(opt.nc, 8), conv_block(8, 8))
        self.tail = nn.Sequential(nn.Conv2d(8, opt.nc, 3, padding=1), nn.Tanh())

    def forward(self, noise, prev):
        return self.tail(self.body(noise)) + prev


class Discriminator(nn.Module):
    def __init__(self, opt):
        super().__init__()
        self.body = nn.Sequential(conv_block(opt.nc, 8), nn.Conv2d(8, 1, 3, padding=1))

    def forward(self, x):
        return self.body(x)


def calc_gradient_penalty(netD, real, fake, lambda_grad):
    alpha = torch.rand(1, 1, 1, 1)
    interpolates = (alpha * real + (1 - alpha) * fake.detach()).requires_grad_(True)
    disc = netD(interpolates)
    gradients = torch.autograd.grad(disc.sum(), interpolates, create_graph=True)[0]
    return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_grad


def train_single_scale(netD, netG, real, opt):
    optimizerD = optim.Adam(netD.parameters(), lr=opt.lr_d, betas=(opt.beta1, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=opt.lr_g, betas=(opt.beta1, 0.999))
    z_opt = torch.randn(1, opt.nc, opt.size, opt.size)
    prev = torch.zeros_like(real)
    errD2plot, errG2plot = [], []

    for epoch in range(opt.niter):
        noise_ = torch.randn(1, opt.nc, opt.size, opt.size)

        ############################
        # (1) Update D network: maximize D(x) + D(G(z))
        ###########################
        for j in range(opt.Dsteps):
            netD.zero_grad()
            output = netD(real)
            errD_real = -output.mean()
            errD_real.backward(retain_graph=True)

            noise = opt.noise_amp * noise_ + prev
            fake = netG(noise.detach(), prev)
            output = netD(fake.detach())
            errD_fake = output.mean()
            errD_fake.backward(retain_graph=True)

            gradient_penalty = calc_gradient_penalty(netD, real, fake, opt.lambda_grad)
            gradient_penalty.backward()

            errD = errD_real + errD_fake + gradient_penalty
            optimizerD.step()

        errD2plot.append(errD.detach())

        ############################
        # (2) Update G network: maximize D(G(z))
        ###########################
        for j in range(opt.Gsteps):
            netG.zero_grad()
            fake = netG(noise.detach(), prev)
            output = netD(fake)
            errG = -output.mean()
            errG.backward(retain_graph=True)
            Z_opt = opt.noise_amp * z_opt + prev
            rec_loss = opt.alpha * nn.functional.mse_loss(netG(Z_opt.detach(), prev), real)
            rec_loss.backward(retain_graph=True)
            optimizerG.step()

        errG2plot.append(errG.detach() + rec_loss.detach())
        print(f"[{epoch}/{opt.niter}] errD {errD.item():.4f} errG {errG.item():.4f} rec {rec_loss.item():.4f}")

    return z_opt, netG


if __name__ == "__main__":
    opt = Opt()
    real = torch.rand(1, opt.nc, opt.size, opt.size) * 2 - 1
    netD, netG = Discriminator(opt), Generator(opt)
    z_curr, G_curr = train_single_scale(netD, netG, real, opt)
    print(f"checksum {sum(p.sum().item() for p in G_curr.parameters()):.4f}")
