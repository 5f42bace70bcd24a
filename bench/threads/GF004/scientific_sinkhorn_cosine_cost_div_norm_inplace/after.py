# Optimal-transport feature matching (Sinkhorn iterations over a cosine cost) used as an
# auxiliary loss: small-object features are pushed toward detached large-object features.
import torch
import torch.nn as nn

torch.manual_seed(0)
EPS = 1e-20


class OptTrans(nn.Module):
    def __init__(self, ch, epsilon=1.0, L=5):
        super().__init__()
        self.epsilon = 1.0 / epsilon
        self.L = L
        self.G_net = nn.Sequential(nn.Conv1d(ch, ch, kernel_size=3, padding=1), nn.ReLU())
        self.critic = nn.Sequential(nn.Conv1d(ch, ch // 4, kernel_size=3, padding=1), nn.ReLU())

    def forward(self, x, y):
        x_upsample = self.G_net(x)
        loss = 2 * self._basic_compute_loss(x_upsample, y) \
            - self._basic_compute_loss(x_upsample, x_upsample) \
            - self._basic_compute_loss(y, y)
        return loss

    def _basic_compute_loss(self, x, y):
        bs = x.size(0)
        loss = []
        x = self.critic(x)
        x_all = x.view(bs, x.size(1), -1)
        y = self.critic(y)
        y_all = y.view(bs, y.size(1), -1)
        for i in range(bs):
            loss.append(self._sinkhorn_iterate(x_all[i].squeeze(dim=0), y_all[i].squeeze(dim=0)))
        return torch.stack(loss)

    def _sinkhorn_iterate(self, x, y):
        sample_num = x.size(0)
        x = x / (torch.norm(x, p=2, dim=1, keepdim=True) + EPS)
        y = y / (torch.norm(y, p=2, dim=1, keepdim=True) + EPS)
        C = 1 - torch.mm(x, y.permute(1, 0))
        K = torch.exp(-self.epsilon * C)
        b = torch.ones(sample_num, 1) * (1.0 / sample_num)
        const = torch.ones(sample_num, 1) * (1.0 / sample_num)
        for _ in range(self.L):
            a = const / (torch.mm(K, b) + EPS)
            b = const / (torch.mm(K.permute(1, 0), a) + EPS)
        K = a * K * b.permute(1, 0)
        K = K.detach()
        return torch.dot(K.view(-1), C.view(-1))


small_net = nn.Conv1d(4, 16, kernel_size=1)
ot = OptTrans(16)
params = list(small_net.parameters()) + list(ot.parameters())
optimizer = torch.optim.SGD(params, lr=0.01)

for it in range(4):
    small_feat = small_net(torch.randn(3, 4, 6))
    big_feat = torch.randn(3, 16, 6).abs()  # ground-truth features, no grad
    ot_loss = ot(small_feat, big_feat).mean()
    optimizer.zero_grad()
    ot_loss.backward()
    optimizer.step()
    print(f"iter {it} ot_loss {ot_loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in params):.4f}")
