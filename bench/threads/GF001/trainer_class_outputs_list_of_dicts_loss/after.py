# Self-supervised depth training with a Lightning-like module driven by a trainer class whose
# base class owns the progress meter; each step's output dict is kept for the epoch end.
import torch
import torch.nn as nn

torch.manual_seed(0)


class AvgMeter:
    def __init__(self, n_max=50):
        self.n_max = n_max
        self.values = []

    def __call__(self, value):
        self.values.append(value)
        if len(self.values) > self.n_max:
            self.values.pop(0)
        return sum(self.values) / len(self.values)


class BaseTrainer:
    def __init__(self, max_epochs=1):
        self.max_epochs = max_epochs
        self.avg_loss = AvgMeter(50)
        self.is_rank_0 = True

    def train_progress_bar(self, dataloader):
        return enumerate(dataloader)


class TinyDepthModule(nn.Module):
    def __init__(self):
        super().__init__()
        self.depth_net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 1, 3, padding=1))
        self.current_epoch = 0
        self.optimizer = torch.optim.Adam(self.parameters(), lr=1e-3)

    def training_step(self, batch, batch_idx):
        inv_depth = torch.sigmoid(self.depth_net(batch["rgb"]))
        photometric = (inv_depth * batch["rgb"].mean(1, keepdim=True) - batch["target"]).abs().mean()
        smoothness = (inv_depth[..., 1:] - inv_depth[..., :-1]).abs().mean()
        loss = photometric + 0.1 * smoothness
        return {"loss": loss, "metrics": {"photometric_loss": photometric.item()}}

    def training_epoch_end(self, output_batch):
        avg_loss = torch.stack([output["loss"] for output in output_batch]).mean()
        avg_photo = sum(o["metrics"]["photometric_loss"] for o in output_batch) / len(output_batch)
        return {"avg_train-loss": avg_loss, "avg_train-photometric_loss": avg_photo}


class HorovodTrainer(BaseTrainer):
    def fit(self, module, train_dataloader):
        module.trainer = self
        history = []
        for epoch in range(module.current_epoch, self.max_epochs):
            history.append(self.train(train_dataloader, module, module.optimizer))
            module.current_epoch += 1
        return history

    def train(self, dataloader, module, optimizer):
        module.train()
        progress_bar = self.train_progress_bar(dataloader)
        outputs = []
        for i, batch in progress_bar:
            optimizer.zero_grad()
            output = module.training_step(batch, i)
            output["loss"].backward()
            optimizer.step()
            output["loss"] = output["loss"].detach()
            outputs.append(output)
            if self.is_rank_0:
                print("Epoch {} | Avg.Loss {:.4f}".format(module.current_epoch, self.avg_loss(output["loss"].item())))
        return module.training_epoch_end(outputs)


train_dataloader = [{"rgb": torch.rand(2, 3, 8, 8), "target": torch.rand(2, 1, 8, 8)} for _ in range(4)]
module = TinyDepthModule()
trainer = HorovodTrainer(max_epochs=2)
history = trainer.fit(module, train_dataloader)
for epoch, result in enumerate(history):
    print(f"epoch {epoch} avg_train-loss {result['avg_train-loss'].item():.4f} photometric {result['avg_train-photometric_loss']:.4f}")
print(f"checksum {sum(p.sum().item() for p in module.parameters()):.4f}")
