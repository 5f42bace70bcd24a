# ViT-VQGAN-style stage-1 model with two ViT decoders reading the same quantised tokens,
# trained by a small trainer class hierarchy.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class PreNormMLP(nn.Module):
    def __init__(self, dim, mlp_dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.net = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

    def forward(self, x):
        return x + self.net(self.norm(x))


class ViTDecoder(nn.Module):
    def __init__(self, num_patches, dim, mlp_dim, patch_dim):
        super().__init__()
        self.transformer = PreNormMLP(dim, mlp_dim)
        self.de_pos_embedding = nn.Parameter(torch.randn(1, num_patches, dim) * 0.02, requires_grad=False)
        self.norm = nn.LayerNorm(dim)
        self.to_pixel = nn.Linear(dim, patch_dim)

    def forward(self, token):
        token = token + self.de_pos_embedding
        x = self.transformer(token)
        x = self.norm(x)
        return self.to_pixel(x)


class TwoDecoderVQ(nn.Module):
    def __init__(self, num_patches=4, patch_dim=12, dim=8, n_codes=16):
        super().__init__()
        self.encoder = nn.Linear(patch_dim, dim)
        self.codebook = nn.Embedding(n_codes, dim)
        self.decoder_a = ViTDecoder(num_patches, dim, 16, patch_dim)
        self.decoder_b = ViTDecoder(num_patches, dim, 16, patch_dim)

    def quantize(self, z):
        dist = (z.unsqueeze(-2) - self.codebook.weight).pow(2).sum(-1)
        z_q = self.codebook(dist.argmin(-1))
        commit = F.mse_loss(z_q, z.detach()) + 0.25 * F.mse_loss(z, z_q.detach())
        quant = z + (z_q - z).detach()
        return quant, commit

    def forward(self, patches):
        quant, commit = self.quantize(self.encoder(patches))
        rec_a = self.decoder_a(quant)
        rec_b = self.decoder_b(quant)
        return rec_a, rec_b, commit


class BaseTrainer:
    def __init__(self, model, lr):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=lr)

    def fit(self, loader, epochs):
        for epoch in range(epochs):
            for batch in loader:
                loss = self.training_step(batch)
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


class VQTrainer(BaseTrainer):
    def training_step(self, batch):
        patches, edges = batch
        rec_a, rec_b, commit = self.model(patches)
        return F.mse_loss(rec_a, patches) + F.mse_loss(rec_b, edges) + commit


loader = [(torch.randn(2, 4, 12), torch.randn(2, 4, 12)) for _ in range(3)]
trainer = VQTrainer(TwoDecoderVQ(), lr=1e-3)
trainer.fit(loader, epochs=2)
print(f"checksum {sum(p.sum().item() for p in trainer.model.parameters()):.4f}")
