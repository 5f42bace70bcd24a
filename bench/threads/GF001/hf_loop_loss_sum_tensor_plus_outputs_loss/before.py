# Causal-LM fine-tuning function in the style of a Ray Train + accelerate template:
# the epoch's running loss is a tensor on the device, fed from `outputs.loss`.
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

torch.manual_seed(0)


@dataclass
class CausalLMOutput:
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size=32, hidden=16):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.mixer = nn.GRU(hidden, hidden, batch_first=True)
        self.lm_head = nn.Linear(hidden, vocab_size)

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden, _ = self.mixer(self.embed(input_ids))
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            shift_logits = logits[:, :-1].reshape(-1, logits.size(-1))
            shift_labels = labels[:, 1:].reshape(-1)
            loss = nn.functional.cross_entropy(shift_logits, shift_labels)
        return CausalLMOutput(loss=loss, logits=logits)


def collate_fn(token_rows):
    input_ids = torch.stack(token_rows)
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids), "labels": input_ids.clone()}


def training_function(config):
    model = TinyCausalLM()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config["lr"])
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 - s / 20)
    rows = [torch.randint(0, 32, (10,)) for _ in range(8)]
    train_dataloader = [collate_fn(rows[i:i + 2]) for i in range(0, len(rows), 2)]

    metrics = {}
    for epoch in range(config["num_epochs"]):
        model.train()
        loss_sum = torch.tensor(0.0)

        for step, batch in enumerate(train_dataloader):
            outputs = model(**batch)
            loss = outputs.loss
            loss_sum += loss
            loss.backward()

            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()

            print(f"[epoch {epoch} step {step}] loss: {loss.item():.4f}")

        metrics = {
            "epoch": epoch,
            "iteration": step,
            "avg_train_loss_epoch": loss_sum / (step + 1),
            "learning_rate": lr_scheduler.get_last_lr()[0],
        }
        print(f"epoch {epoch} avg_train_loss_epoch {metrics['avg_train_loss_epoch'].item():.4f}")

    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
    return metrics


metrics = training_function({"lr": 5e-3, "num_epochs": 2})
