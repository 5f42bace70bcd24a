# BicycleGAN-style model class on top of a BaseModel: backward_EG() backprops
# the joint encoder/generator loss, then backward_G_alone() backprops the
# latent-regression loss through the same fake_B_random; both optimizers step
# after the two backward calls.
from types import SimpleNamespace

import torch
import torch.nn as nn

torch.manual_seed(0)


class BaseModel:
    def initialize(self, opt):
        self.opt = opt

    def set_input(self, data):
        self.real_A = data["A"]
        self.real_B = data["B"]

    def get_z_random(self, batch_size, nz):
        return torch.randn(batch_size, nz)

    def set_requires_grad(self, nets, requires_grad=False):
        if not isinstance(nets, list):
            nets = [nets]
        for net in nets:
            if net is not None:
                for param in net.parameters():
                    param.requires_grad = requires_grad


class Generator(nn.Module):
    def __init__(self, dim, nz):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(dim + nz, 32), nn.ReLU(), nn.Linear(32, dim), nn.Tanh())

    def forward(self, a, z):
        return self.net(torch.cat([a, z], 1))


class Encoder(nn.Module):
    def __init__(self, dim, nz):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(dim, 32), nn.LeakyReLU(0.2))
        self.fc_mu = nn.Linear(32, nz)
        self.fc_logvar = nn.Linear(32, nz)

    def forward(self, b):
        h = self.body(b)
        return self.fc_mu(h), self.fc_logvar(h)


class BiCycleGANModel(BaseModel):
    def initialize(self, opt):
        BaseModel.initialize(self, opt)
        self.netG = Generator(opt.dim, opt.nz)
        self.netE = Encoder(opt.dim, opt.nz)
        self.netD = nn.Sequential(nn.Linear(opt.dim, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
        self.netD2 = nn.Sequential(nn.Linear(opt.dim, 16), nn.LeakyReLU(0.2), nn.Linear(16, 1))
        self.criterionGAN = nn.MSELoss()
        self.criterionL1 = nn.L1Loss()
        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=opt.lr, betas=(0.5, 0.999))
        self.optimizer_E = torch.optim.Adam(self.netE.parameters(), lr=opt.lr, betas=(0.5, 0.999))
        self.optimizer_D = torch.optim.Adam(self.netD.parameters(), lr=opt.lr, betas=(0.5, 0.999))
        self.optimizer_D2 = torch.optim.Adam(self.netD2.parameters(), lr=opt.lr, betas=(0.5, 0.999))

    def forward(self):
        half_size = self.opt.batch_size // 2
        self.real_A_encoded = self.real_A[0:half_size]
        self.real_B_encoded = self.real_B[0:half_size]
        self.real_B_random = self.real_B[half_size:]
        self.mu, self.logvar = self.netE(self.real_B_encoded)
        std = self.logvar.mul(0.5).exp()
        eps = self.get_z_random(std.size(0), std.size(1))
        self.z_encoded = eps * std + self.mu
        self.z_random = self.get_z_random(self.real_A_encoded.size(0), self.opt.nz)
        self.fake_B_encoded = self.netG(self.real_A_encoded, self.z_encoded)
        self.fake_B_random = self.netG(self.real_A_encoded, self.z_random)
        if self.opt.lambda_z > 0.0:
            self.mu2, logvar2 = self.netE(self.fake_B_random)

    def gan_loss(self, pred, target_is_real):
        target = torch.ones_like(pred) if target_is_real else torch.zeros_like(pred)
        return self.criterionGAN(pred, target)

    def backward_D(self, netD, real, fake):
        pred_fake = netD(fake.detach())
        pred_real = netD(real)
        loss_D = self.gan_loss(pred_fake, False) + self.gan_loss(pred_real, True)
        loss_D.backward()
        return loss_D

    def backward_G_GAN(self, fake, netD=None, ll=0.0):
        if ll > 0.0:
            return self.gan_loss(netD(fake), True) * ll
        return 0.0

    def backward_EG(self):
        self.loss_G_GAN = self.backward_G_GAN(self.fake_B_encoded, self.netD, self.opt.lambda_GAN)
        self.loss_G_GAN2 = self.backward_G_GAN(self.fake_B_random, self.netD2, self.opt.lambda_GAN2)
        kl_element = 1 + self.logvar - self.mu.pow(2) - self.logvar.exp()
        self.loss_kl = torch.sum(kl_element) * (-0.5) * self.opt.lambda_kl
        self.loss_G_L1 = self.criterionL1(self.fake_B_encoded, self.real_B_encoded) * self.opt.lambda_L1
        self.loss_G = self.loss_G_GAN + self.loss_G_GAN2 + self.loss_G_L1 + self.loss_kl
        self.loss_G.backward()

    def backward_G_alone(self):
        if self.opt.lambda_z > 0.0:
            self.loss_z_L1 = torch.mean(torch.abs(self.mu2 - self.z_random)) * self.opt.lambda_z
            self.loss_z_L1.backward()
        else:
            self.loss_z_L1 = 0.0

    def update_D(self, data):
        self.set_requires_grad([self.netD, self.netD2], True)
        self.set_input(data)
        self.forward()
        self.optimizer_D.zero_grad()
        self.loss_D = self.backward_D(self.netD, self.real_B_encoded, self.fake_B_encoded)
        self.optimizer_D.step()
        self.optimizer_D2.zero_grad()
        self.loss_D2 = self.backward_D(self.netD2, self.real_B_random, self.fake_B_random)
        self.optimizer_D2.step()

    def update_G_and_E(self):
        self.set_requires_grad([self.netD, self.netD2], False)
        self.optimizer_E.zero_grad()
        self.optimizer_G.zero_grad()
        self.backward_EG()
        if self.opt.lambda_z > 0.0:
            self.set_requires_grad([self.netE], False)
            self.backward_G_alone()
            self.set_requires_grad([self.netE], True)
        self.optimizer_E.step()
        self.optimizer_G.step()

    def optimize_parameters(self, data):
        self.update_D(data)
        self.update_G_and_E()

    def get_current_errors(self):
        return {"G_total": self.loss_G.item(), "z_L1": self.loss_z_L1.item(),
                "D": self.loss_D.item(), "D2": self.loss_D2.item()}


opt = SimpleNamespace(dim=10, nz=4, batch_size=8, lr=2e-3, lambda_GAN=1.0, lambda_GAN2=1.0,
                      lambda_kl=0.01, lambda_L1=10.0, lambda_z=0.5)
model = BiCycleGANModel()
model.initialize(opt)

A = torch.randn(32, opt.dim)
B = torch.tanh(A @ torch.randn(opt.dim, opt.dim) * 0.3)

for epoch in range(2):
    for i in range(0, 32, opt.batch_size):
        model.optimize_parameters({"A": A[i:i + opt.batch_size], "B": B[i:i + opt.batch_size]})
        errors = model.get_current_errors()
        print(f"epoch {epoch} iter {i // opt.batch_size} " + " ".join(f"{k} {v:.4f}" for k, v in errors.items()))

print(f"checksum {sum(p.sum().item() for net in (model.netG, model.netE, model.netD, model.netD2) for p in net.parameters()):.4f}")
