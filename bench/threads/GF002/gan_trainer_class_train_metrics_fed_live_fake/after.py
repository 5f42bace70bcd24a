import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Metric(nn.Module):
    """Running metric: update() adds to the states, compute() reduces them."""

    def __init__(self):
        super().__init__()
        self.reset()

    def forward(self, preds, target):
        batch_value = self.score(preds, target)
        self.total_value = self.total_value + batch_value
        self.count += 1
        return batch_value

    def compute(self):
        return self.total_value / max(self.count, 1)

    def reset(self):
        self.total_value = torch.tensor(0.0)
        self.count = 0


class PeakSignalNoiseRatio(Metric):
    def score(self, preds, target):
        mse = F.mse_loss(preds, target)
        return 10 * torch.log10(4.0 / mse)  # images live in [-1, 1]


class MeanAbsoluteError(Metric):
    def score(self, preds, target):
        return (preds - target).abs().mean()


class MetricCollection(nn.ModuleDict):
    def __init__(self, metrics, prefix=""):
        super().__init__({prefix + k: v for k, v in metrics.items()})

    def forward(self, preds, target):
        return {k: m(preds, target) for k, m in self.items()}

    def compute(self):
        return {k: m.compute() for k, m in self.items()}

    def reset(self):
        for m in self.values():
            m.reset()


def generator():
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 3, padding=1), nn.Tanh())


def discriminator():
    return nn.Sequential(nn.Conv2d(3, 8, 4, stride=2, padding=1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3, padding=1))


class CycleGAN(nn.Module):
    def __init__(self, lambda_cycle=10.0):
        super().__init__()
        self.gen_AB, self.gen_BA = generator(), generator()
        self.disc_B = discriminator()
        self.lambda_cycle = lambda_cycle
        self.train_metrics = MetricCollection({"PSNR": PeakSignalNoiseRatio(), "MAE": MeanAbsoluteError()})
        self.opt_G = torch.optim.Adam(list(self.gen_AB.parameters()) + list(self.gen_BA.parameters()), lr=2e-4, betas=(0.5, 0.999))
        self.opt_D = torch.optim.Adam(self.disc_B.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def training_step(self, batch, batch_idx):
        real_A, real_B = batch
        fake_B = self.gen_AB(real_A)
        rec_A = self.gen_BA(fake_B)

        # generator update
        pred_fake = self.disc_B(fake_B)
        loss_gan = F.mse_loss(pred_fake, torch.ones_like(pred_fake))
        loss_cycle = F.l1_loss(rec_A, real_A)
        loss_G = loss_gan + self.lambda_cycle * loss_cycle
        self.opt_G.zero_grad()
        loss_G.backward()
        self.opt_G.step()

        # discriminator update on the detached fake
        pred_real = self.disc_B(real_B)
        pred_fake = self.disc_B(fake_B.detach())
        loss_D = 0.5 * (F.mse_loss(pred_real, torch.ones_like(pred_real)) + F.mse_loss(pred_fake, torch.zeros_like(pred_fake)))
        self.opt_D.zero_grad()
        loss_D.backward()
        self.opt_D.step()

        # reconstruction quality, accumulated over the epoch
        train_metrics = self.train_metrics(rec_A.detach(), real_A)
        return {"loss_G": loss_G.item(), "loss_D": loss_D.item(), "psnr": train_metrics["PSNR"].item()}

    def on_train_epoch_end(self, epoch):
        epoch_metrics = self.train_metrics.compute()
        print(f"epoch {epoch} " + " ".join(f"{k} {v.item():.4f}" for k, v in epoch_metrics.items()))


def fit(model, loader, max_epochs=2):
    for epoch in range(max_epochs):
        for batch_idx, batch in enumerate(loader):
            logs = model.training_step(batch, batch_idx)
            print(f"epoch {epoch} batch {batch_idx} loss_G {logs['loss_G']:.4f} loss_D {logs['loss_D']:.4f} psnr {logs['psnr']:.4f}")
        model.on_train_epoch_end(epoch)


loader = [(torch.rand(2, 3, 8, 8) * 2 - 1, torch.rand(2, 3, 8, 8) * 2 - 1) for _ in range(3)]
model = CycleGAN()
fit(model, loader)
print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
