# GAN zoo-style trainer: a BaseGAN class owns optimizeParameters(), a DCGAN
# subclass supplies the networks. The generator's adversarial loss is
# backpropagated, then a diversity (GDPP-like) loss built on the same
# discriminator features is backpropagated by a helper.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


def GDPPLoss(phiReal, phiFake, backward=True):
    def gram(phi):
        phi = F.normalize(phi, dim=1)
        return phi.t() @ phi / phi.size(0)

    gdppLoss = F.mse_loss(gram(phiFake), gram(phiReal).detach()) * 10.0
    if backward:
        gdppLoss.backward()
    return gdppLoss.item()


class DCGANCriterion:
    def getCriterion(self, pred, status):
        target = torch.ones_like(pred) if status else torch.zeros_like(pred)
        return F.binary_cross_entropy_with_logits(pred, target)


class Config:
    pass


class BaseGAN:
    def __init__(self, dimLatentVector, baseLearningRate=2e-3, GDPP=False):
        self.config = Config()
        self.config.noiseVectorDim = dimLatentVector
        self.config.learningRate = baseLearningRate
        self.config.GDPP = GDPP
        self.lossCriterion = DCGANCriterion()
        self.netD = self.getNetD()
        self.netG = self.getNetG()
        self.avgG = self.getNetG()
        self.avgG.load_state_dict(self.netG.state_dict())
        for p in self.avgG.parameters():
            p.requires_grad = False
        self.optimizerD = self.getOptimizerD()
        self.optimizerG = self.getOptimizerG()

    def buildNoiseData(self, n_samples):
        return torch.randn(n_samples, self.config.noiseVectorDim)

    def optimizeParameters(self, input_batch):
        allLosses = {}
        self.real_input = input_batch
        n_samples = self.real_input.size(0)

        # Update the discriminator
        self.optimizerD.zero_grad()
        predRealD = self.netD(self.real_input, False)
        lossD = self.lossCriterion.getCriterion(predRealD, True)
        allLosses["lossD_real"] = lossD.item()

        inputLatent = self.buildNoiseData(n_samples)
        predFakeG = self.netG(inputLatent).detach()
        predFakeD = self.netD(predFakeG, False)
        lossDFake = self.lossCriterion.getCriterion(predFakeD, False)
        allLosses["lossD_fake"] = lossDFake.item()
        lossD += lossDFake

        lossD.backward(retain_graph=True)
        self.optimizerD.step()

        # Update the generator
        self.optimizerG.zero_grad()
        self.optimizerD.zero_grad()

        inputNoise = self.buildNoiseData(n_samples)
        predFakeG = self.netG(inputNoise)
        predFakeD, phiGFake = self.netD(predFakeG, True)

        lossGFake = self.lossCriterion.getCriterion(predFakeD, True)
        allLosses["lossG_fake"] = lossGFake.item()
        lossGFake.backward(retain_graph=True)

        if self.config.GDPP:
            _, phiDReal = self.netD(self.real_input, True)
            allLosses["lossG_GDPP"] = GDPPLoss(phiDReal, phiGFake, backward=True)

        self.optimizerG.step()

        with torch.no_grad():
            for p, avg_p in zip(self.netG.parameters(), self.avgG.parameters()):
                avg_p.mul_(0.999).add_(0.001 * p)

        return allLosses

    def getNetG(self):
        raise NotImplementedError

    def getNetD(self):
        raise NotImplementedError

    def getOptimizerD(self):
        raise NotImplementedError

    def getOptimizerG(self):
        raise NotImplementedError


class Discriminator(nn.Module):
    def __init__(self, dimInput):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(dimInput, 32), nn.LeakyReLU(0.2), nn.Linear(32, 16), nn.LeakyReLU(0.2))
        self.decisionLayer = nn.Linear(16, 1)

    def forward(self, x, getFeature=False):
        phi = self.features(x)
        out = self.decisionLayer(phi)
        if getFeature:
            return out, phi
        return out


class DCGAN(BaseGAN):
    def __init__(self, dimLatentVector=8, dimOutput=12, **kwargs):
        self.dimOutput = dimOutput
        self.dimLatent = dimLatentVector
        super().__init__(dimLatentVector, **kwargs)

    def getNetG(self):
        return nn.Sequential(nn.Linear(self.dimLatent, 32), nn.ReLU(), nn.Linear(32, self.dimOutput), nn.Tanh())

    def getNetD(self):
        return Discriminator(self.dimOutput)

    def getOptimizerD(self):
        return torch.optim.Adam(self.netD.parameters(), lr=self.config.learningRate, betas=(0.5, 0.999))

    def getOptimizerG(self):
        return torch.optim.Adam(self.netG.parameters(), lr=self.config.learningRate, betas=(0.5, 0.999))


model = DCGAN(GDPP=True)
dataset = torch.tanh(torch.randn(48, 12))

for epoch in range(2):
    for i in range(0, 48, 16):
        allLosses = model.optimizeParameters(dataset[i:i + 16])
        print(f"epoch {epoch} iter {i // 16} " + " ".join(f"{k} {v:.4f}" for k, v in allLosses.items()))

print(f"checksum {sum(p.sum().item() for p in model.netG.parameters()) + sum(p.sum().item() for p in model.netD.parameters()):.4f}")
