# Detector training with a ModelTrainer class: the loss function returns (loss, loss_dict) and
# the epoch totals live in a defaultdict of device tensors, averaged in place at epoch end.
from collections import defaultdict

import torch
import torch.nn as nn

torch.manual_seed(0)


class TinyYOLO(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.backbone = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.SiLU())
        self.aux_head = nn.Conv2d(8, 4 + num_classes, 1)
        self.main_head = nn.Conv2d(8, 4 + num_classes, 1)

    def forward(self, images):
        feats = self.backbone(images)
        return {"AUX": self.aux_head(feats), "Main": self.main_head(feats)}


class DualLoss:
    def __init__(self, aux_rate=0.25):
        self.aux_rate = aux_rate

    def single(self, predicts, targets):
        box, cls = predicts[:, :4], predicts[:, 4:]
        iou = (box - targets[:, :4]).abs().mean()
        dfl = (box.softmax(dim=1) - targets[:, :4].softmax(dim=1)).pow(2).mean()
        bce = nn.functional.binary_cross_entropy_with_logits(cls, targets[:, 4:])
        return iou, dfl, bce

    def __call__(self, aux_predicts, main_predicts, targets):
        aux_iou, aux_dfl, aux_cls = self.single(aux_predicts, targets)
        main_iou, main_dfl, main_cls = self.single(main_predicts, targets)
        loss_dict = {
            "BoxLoss": 7.5 * (aux_iou * self.aux_rate + main_iou),
            "DFLoss": 1.5 * (aux_dfl * self.aux_rate + main_dfl),
            "BCELoss": 0.5 * (aux_cls * self.aux_rate + main_cls),
        }
        loss_sum = sum(list(loss_dict.values())) / len(loss_dict)
        return loss_sum, loss_dict


class ProgressLogger:
    def __init__(self):
        self.history = []

    def one_batch(self, loss_each):
        print("  " + " ".join(f"{k} {v.item():.4f}" for k, v in loss_each.items()))

    def finish_one_epoch(self, epoch_loss, epoch_idx):
        self.history.append(epoch_loss)
        print(f"epoch {epoch_idx}: " + " ".join(f"{k} {v:.4f}" for k, v in epoch_loss.items()))


class ModelTrainer:
    def __init__(self, model, progress, device="cpu", num_epochs=2):
        self.model = model
        self.device = device
        self.optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        self.loss_fn = DualLoss()
        self.progress = progress
        self.num_epochs = num_epochs

    def train_one_batch(self, images, targets):
        images, targets = images.to(self.device), targets.to(self.device)
        self.optimizer.zero_grad()
        predicts = self.model(images)
        loss, loss_item = self.loss_fn(predicts["AUX"], predicts["Main"], targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm=10.0)
        self.optimizer.step()
        return loss_item

    def train_one_epoch(self, dataloader):
        self.model.train()
        total_loss = defaultdict(lambda: torch.tensor(0.0, device=self.device))
        total_samples = 0
        for batch_size, images, targets in dataloader:
            loss_each = self.train_one_batch(images, targets)
            for loss_name, loss_val in loss_each.items():
                total_loss[loss_name] += loss_val * batch_size
            total_samples += batch_size
            self.progress.one_batch(loss_each)

        for loss_val in total_loss.values():
            loss_val /= total_samples
        return total_loss

    def solve(self, dataloader):
        for epoch_idx in range(self.num_epochs):
            epoch_loss = self.train_one_epoch(dataloader)
            self.progress.finish_one_epoch(epoch_loss, epoch_idx)


dataloader = [(2, torch.rand(2, 3, 8, 8), torch.rand(2, 7, 8, 8)) for _ in range(3)]
progress = ProgressLogger()
trainer = ModelTrainer(TinyYOLO(), progress)
trainer.solve(dataloader)
print(f"checksum {sum(p.sum().item() for p in trainer.model.parameters()):.4f}")
