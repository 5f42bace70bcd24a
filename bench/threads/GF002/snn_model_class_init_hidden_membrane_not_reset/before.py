import torch
import torch.nn as nn

torch.manual_seed(0)


def spike_fn(mem, threshold=1.0, slope=5.0):
    # surrogate spike: a steep sigmoid stands in for the Heaviside step
    return torch.sigmoid(slope * (mem - threshold))


class Leaky(nn.Module):
    """Leaky integrate-and-fire layer that keeps its membrane potential between calls."""

    def __init__(self, beta, init_hidden=True, output=False):
        super().__init__()
        self.beta = beta
        self.init_hidden = init_hidden
        self.output = output
        self.mem = torch.zeros(0)

    def reset_mem(self):
        self.mem = torch.zeros(0)

    def forward(self, input_):
        if self.mem.shape != input_.shape:
            self.mem = torch.zeros_like(input_)
        self.mem = self.beta * self.mem + input_
        spk = spike_fn(self.mem)
        self.mem = self.mem - spk  # soft reset by subtraction
        if self.output:
            return spk, self.mem
        return spk


class utils:
    @staticmethod
    def reset(net):
        for module in net.modules():
            if isinstance(module, Leaky):
                module.reset_mem()


class Net(nn.Module):
    def __init__(self, num_inputs=16, num_hidden=32, num_outputs=4, beta=0.9, num_steps=5):
        super().__init__()
        self.num_steps = num_steps
        self.net = nn.Sequential(
            nn.Linear(num_inputs, num_hidden),
            Leaky(beta=beta, init_hidden=True),
            nn.Linear(num_hidden, num_outputs),
            Leaky(beta=beta, init_hidden=True, output=True),
        )

    def forward(self, x):
        mem_rec = []
        spk_rec = []
        for step in range(self.num_steps):
            spk_out, mem_out = self.net(x)
            spk_rec.append(spk_out)
            mem_rec.append(mem_out)
        return torch.stack(spk_rec), torch.stack(mem_rec)


def ce_rate_loss(spk_rec, targets):
    return sum(nn.functional.cross_entropy(spk_rec[t], targets) for t in range(spk_rec.size(0)))


net = Net()
optimizer = torch.optim.Adam(net.parameters(), lr=5e-3, betas=(0.9, 0.999))
train_loader = [(torch.rand(8, 16) * 2, torch.randint(0, 4, (8,))) for _ in range(3)]

for epoch in range(2):
    for i, (data, targets) in enumerate(train_loader):
        net.train()
        spk_rec, mem_rec = net(data)
        loss_val = ce_rate_loss(spk_rec, targets)
        optimizer.zero_grad()
        loss_val.backward()
        optimizer.step()
        acc = (spk_rec.sum(0).argmax(1) == targets).float().mean()
        print(f"Epoch {epoch}, Iteration {i} Train Loss: {loss_val.item():.4f} Accuracy: {acc.item() * 100:.2f}%")

print(f"checksum {sum(p.sum().item() for p in net.parameters()):.4f}")
