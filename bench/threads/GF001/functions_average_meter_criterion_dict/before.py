# Learned image compression training script: train_one_epoch / test_epoch functions, a
# rate-distortion criterion that returns a dict, and AverageMeter objects for the log line.
import math

import torch
import torch.nn as nn

torch.manual_seed(0)


class RateDistortionLoss(nn.Module):
    def __init__(self, lmbda=0.01):
        super().__init__()
        self.mse = nn.MSELoss()
        self.lmbda = lmbda

    def forward(self, output, target):
        N, _, H, W = target.size()
        num_pixels = N * H * W
        out = {}
        out["y_bpp"] = torch.log(output["likelihoods"]["y"]).sum() / (-math.log(2) * num_pixels)
        out["z_bpp"] = torch.log(output["likelihoods"]["z"]).sum() / (-math.log(2) * num_pixels)
        out["bpp_loss"] = out["y_bpp"] + out["z_bpp"]
        out["mse_loss"] = self.mse(output["x_hat"], target)
        out["psnr"] = 10 * torch.log10(1 / out["mse_loss"])
        out["loss"] = self.lmbda * 255 ** 2 * out["mse_loss"] + out["bpp_loss"]
        return out


class TinyHyperprior(nn.Module):
    def __init__(self):
        super().__init__()
        self.g_a = nn.Conv2d(3, 6, 3, stride=2, padding=1)
        self.h_a = nn.Conv2d(6, 4, 3, stride=2, padding=1)
        self.g_s = nn.ConvTranspose2d(6, 3, 4, stride=2, padding=1)

    def forward(self, x):
        y = self.g_a(x)
        z = self.h_a(y)
        y_hat = y + (torch.rand_like(y) - 0.5)
        return {
            "x_hat": torch.sigmoid(self.g_s(y_hat)),
            "likelihoods": {"y": torch.sigmoid(-y_hat.abs()) + 1e-3, "z": torch.sigmoid(-z.abs()) + 1e-3},
        }


class AverageMeter:
    """Compute running average."""

    def __init__(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count


def train_one_epoch(model, criterion, train_dataloader, optimizer, epoch, global_step, clip_max_norm):
    model.train()
    loss = AverageMeter()
    bpp_loss = AverageMeter()
    mse_loss = AverageMeter()
    psnr = AverageMeter()

    for i, d in enumerate(train_dataloader):
        global_step += 1
        optimizer.zero_grad()
        out_net = model(d)

        out_criterion = criterion(out_net, d)
        out_criterion["loss"].backward()
        if clip_max_norm > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip_max_norm)
        optimizer.step()

        bpp_loss.update(out_criterion["bpp_loss"])
        loss.update(out_criterion["loss"])
        mse_loss.update(out_criterion["mse_loss"])
        psnr.update(out_criterion["psnr"])

        print(
            f"Train epoch {epoch}: [{i}/{len(train_dataloader)}]"
            f"\tLoss: {loss.avg:.4f} |"
            f"\tMSE loss: {mse_loss.avg:.4f} |"
            f"\tPSNR: {psnr.avg:.3f} |"
            f"\tBpp loss: {bpp_loss.avg:.4f}"
        )
    return global_step, loss


def test_epoch(epoch, test_dataloader, model, criterion):
    model.eval()
    loss = AverageMeter()
    psnr = AverageMeter()
    with torch.no_grad():
        for d in test_dataloader:
            out_criterion = criterion(model(d), d)
            loss.update(out_criterion["loss"])
            psnr.update(out_criterion["psnr"])
    print(f"Test epoch {epoch}: Average losses:\tLoss: {loss.avg:.4f} |\tPSNR: {psnr.avg:.3f}")
    return loss.avg


model = TinyHyperprior()
criterion = RateDistortionLoss(lmbda=0.01)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
train_dataloader = [torch.rand(2, 3, 8, 8) for _ in range(3)]
test_dataloader = [torch.rand(2, 3, 8, 8) for _ in range(2)]

global_step = 0
train_meters = []
for epoch in range(2):
    global_step, train_loss = train_one_epoch(model, criterion, train_dataloader, optimizer, epoch, global_step, 1.0)
    train_meters.append(train_loss)
    test_epoch(epoch, test_dataloader, model, criterion)
print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
