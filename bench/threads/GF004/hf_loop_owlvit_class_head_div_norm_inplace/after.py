# OWL-ViT-style fine-tuning of a detection head in a Hugging Face-style loop (outputs.loss).
from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn as nn

torch.manual_seed(0)


@dataclass
class DetectionOutput:
    loss: Optional[torch.Tensor] = None
    logits: Optional[torch.Tensor] = None


class TinyClassHead(nn.Module):
    def __init__(self, hidden_size, embed_dim):
        super().__init__()
        self.dense0 = nn.Linear(hidden_size, embed_dim)
        self.logit_shift = nn.Linear(hidden_size, 1)
        self.logit_scale = nn.Linear(hidden_size, 1)
        self.elu = nn.ELU()

    def forward(self, image_embeds, query_embeds):
        image_class_embeds = self.dense0(image_embeds)
        # Normalize image and text features
        image_class_embeds = image_class_embeds / (torch.linalg.norm(image_class_embeds, dim=-1, keepdim=True) + 1e-6)
        query_embeds = query_embeds / (torch.linalg.norm(query_embeds, dim=-1, keepdim=True) + 1e-6)
        pred_logits = torch.einsum("...pd,...qd->...pq", image_class_embeds, query_embeds)
        logit_shift = self.logit_shift(image_embeds)
        logit_scale = self.elu(self.logit_scale(image_embeds)) + 1
        return (pred_logits + logit_shift) * logit_scale


class TinyOwlForObjectDetection(nn.Module):
    def __init__(self, vocab_size=20, hidden_size=16, embed_dim=8):
        super().__init__()
        self.patch_embed = nn.Linear(12, hidden_size)
        self.token_embed = nn.Embedding(vocab_size, hidden_size)
        self.text_projection = nn.Linear(hidden_size, embed_dim)
        self.class_head = TinyClassHead(hidden_size, embed_dim)

    def forward(self, pixel_values, input_ids, labels=None):
        image_embeds = torch.tanh(self.patch_embed(pixel_values))
        query_embeds = self.text_projection(self.token_embed(input_ids).mean(dim=2))
        logits = self.class_head(image_embeds, query_embeds)
        loss = None
        if labels is not None:
            loss = nn.functional.binary_cross_entropy_with_logits(logits, labels)
        return DetectionOutput(loss=loss, logits=logits)


model = TinyOwlForObjectDetection()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)

batches = []
for _ in range(4):
    batches.append({
        "pixel_values": torch.randn(2, 6, 12),
        "input_ids": torch.randint(0, 20, (2, 3, 4)),
        "labels": (torch.rand(2, 6, 3) > 0.7).float(),
    })

model.train()
for step, batch in enumerate(batches):
    outputs = model(**batch)
    loss = outputs.loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step} loss {loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
