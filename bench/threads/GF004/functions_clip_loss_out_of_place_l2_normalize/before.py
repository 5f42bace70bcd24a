# CLIP-style image/text contrastive training split into small functions: encode, loss, step.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class DualEncoder(nn.Module):
    def __init__(self, img_dim=12, vocab=30, dim=8):
        super().__init__()
        self.vision = nn.Sequential(nn.Linear(img_dim, 16), nn.GELU(), nn.Linear(16, dim))
        self.token_embed = nn.Embedding(vocab, 16)
        self.text_proj = nn.Linear(16, dim)
        self.logit_scale = nn.Parameter(torch.tensor(2.0))


def encode(model, pixel_values, input_ids):
    image_embeds = model.vision(pixel_values)
    text_embeds = model.text_proj(model.token_embed(input_ids).mean(dim=1))
    image_embeds = image_embeds / image_embeds.norm(p=2, dim=-1, keepdim=True)
    text_embeds = text_embeds / (torch.linalg.norm(text_embeds, dim=-1, keepdim=True) + 1e-6)
    return image_embeds, text_embeds


def clip_loss(image_embeds, text_embeds, logit_scale):
    logits_per_image = logit_scale.exp() * image_embeds @ text_embeds.t()
    logits_per_text = logits_per_image.t()
    labels = torch.arange(image_embeds.size(0))
    return (F.cross_entropy(logits_per_image, labels) + F.cross_entropy(logits_per_text, labels)) / 2


def train_step(model, optimizer, batch):
    image_embeds, text_embeds = encode(model, batch["pixel_values"], batch["input_ids"])
    loss = clip_loss(image_embeds, text_embeds, model.logit_scale)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.item()


def main():
    model = DualEncoder()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = [{"pixel_values": torch.randn(4, 12), "input_ids": torch.randint(0, 30, (4, 5))}
               for _ in range(3)]
    for epoch in range(2):
        for batch in batches:
            train_loss = train_step(model, optimizer, batch)
        print(f"epoch {epoch} train_loss {train_loss:.4f}")
    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")


if __name__ == "__main__":
    main()
