# MoCo-style self-supervised module with a Lightning-like interface (training_step /
# configure_optimizers) driven by a small fit loop; the negative-key queue is a buffer that
# forward() refreshes in place.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MoCoModule(nn.Module):
    def __init__(self, dim=8, K=16, m=0.999, T=0.2):
        super().__init__()
        self.K, self.m, self.T = K, m, T
        self.encoder_q = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, dim))
        self.encoder_k = nn.Sequential(nn.Linear(10, 16), nn.ReLU(), nn.Linear(16, dim))
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.copy_(param_q.data)
            param_k.requires_grad = False
        self.register_buffer("queue", F.normalize(torch.randn(dim, K), dim=0))
        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self):
        for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
            param_k.data.mul_(self.m).add_(param_q.data, alpha=1.0 - self.m)

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys):
        batch_size = keys.shape[0]
        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0
        self.queue[:, ptr:ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K
        self.queue_ptr[0] = ptr

    def forward(self, im_q, im_k):
        q = F.normalize(self.encoder_q(im_q), dim=1)
        with torch.no_grad():
            self._momentum_update_key_encoder()
            k = F.normalize(self.encoder_k(im_k), dim=1)
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])
        logits = torch.cat([l_pos, l_neg], dim=1) / self.T
        labels = torch.zeros(logits.shape[0], dtype=torch.long)
        self._dequeue_and_enqueue(k)
        return logits, labels

    def training_step(self, batch):
        im_q, im_k = batch
        logits, labels = self(im_q, im_k)
        return F.cross_entropy(logits, labels)

    def configure_optimizers(self):
        return torch.optim.SGD(self.encoder_q.parameters(), lr=0.03, momentum=0.9)


class Fitter:
    def __init__(self, max_epochs):
        self.max_epochs = max_epochs

    def fit(self, module, loader):
        optimizer = module.configure_optimizers()
        for epoch in range(self.max_epochs):
            for batch in loader:
                loss = module.training_step(batch)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
            print(f"epoch {epoch} loss {loss.item():.4f}")


base = torch.randn(3, 4, 10)
loader = [(x + 0.1 * torch.randn_like(x), x + 0.1 * torch.randn_like(x)) for x in base]
module = MoCoModule()
Fitter(max_epochs=2).fit(module, loader)
print(f"checksum {sum(p.sum().item() for p in module.encoder_q.parameters()):.4f}")
