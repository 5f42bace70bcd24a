import torch
from torch import nn

torch.manual_seed(0)


class BaseModel(nn.Module):
    """Shared training logic; subclasses implement forward() and may add to the log."""

    def __init__(self, learning_rate=1e-2):
        super().__init__()
        self.learning_rate = learning_rate
        self.loss = nn.MSELoss()
        self.training_step_outputs = []

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)

    def create_log(self, x, y, out, batch_idx):
        return {}

    def step(self, x, y, batch_idx):
        out = self(x)
        loss = self.loss(out["prediction"], y)
        log = {"loss": loss, "n_samples": x["encoder_cont"].size(0)}
        return log, out

    def training_step(self, batch, batch_idx):
        x, y = batch
        log, out = self.step(x, y, batch_idx)
        log.update(self.create_log(x, y, out, batch_idx))
        self.training_step_outputs.append(log)
        return log

    def on_train_epoch_end(self):
        outputs = self.training_step_outputs
        mean_loss = torch.stack([o["loss"] for o in outputs]).mean().item()
        print(f"epoch end: {len(outputs)} batches, mean loss {mean_loss:.4f}")
        self.training_step_outputs.clear()


class TinyAttentionForecaster(BaseModel):
    def __init__(self, n_features=3, hidden=16, horizon=2, **kwargs):
        super().__init__(**kwargs)
        self.encoder = nn.Linear(n_features, hidden)
        self.query = nn.Parameter(torch.randn(hidden) * 0.1)
        self.head = nn.Linear(hidden, horizon)

    def forward(self, x):
        h = torch.tanh(self.encoder(x["encoder_cont"]))  # (batch, time, hidden)
        attention = torch.softmax(h @ self.query, dim=-1)  # (batch, time)
        context = (attention.unsqueeze(-1) * h).sum(1)
        return {"prediction": self.head(context), "attention": attention}

    def create_log(self, x, y, out, batch_idx):
        log = super().create_log(x, y, out, batch_idx)
        # kept for the interpretation plots made at the end of the epoch
        log["attention"] = out["attention"]
        log["prediction"] = out["prediction"]
        return log


class Trainer:
    def __init__(self, max_epochs=2, max_steps=-1):
        self.max_epochs = max_epochs
        self.max_steps = max_steps
        self.global_step = 0

    def fit(self, model, train_dataloader):
        optimizer = model.configure_optimizers()
        for epoch in range(self.max_epochs):
            model.train()
            for batch_idx, batch in enumerate(train_dataloader):
                log = model.training_step(batch, batch_idx)
                optimizer.zero_grad()
                log["loss"].backward()
                optimizer.step()
                self.global_step += 1
                print(f"epoch {epoch} step {self.global_step} loss {log['loss'].item():.4f}")
                if self.global_step == self.max_steps:
                    return
            model.on_train_epoch_end()


def make_batch(batch_size=8, time=6, n_features=3, horizon=2):
    x = {"encoder_cont": torch.randn(batch_size, time, n_features)}
    y = x["encoder_cont"][:, -horizon:, 0] * 0.5
    return x, y


train_dataloader = [make_batch() for _ in range(4)]
model = TinyAttentionForecaster()
trainer = Trainer(max_epochs=2, max_steps=6)
trainer.fit(model, train_dataloader)
print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
