# Multi-task training split into functions: a shared trunk with two heads,
# compute_losses() returns a dict of per-task losses, and train_one_epoch()
# backpropagates their sum once (the "jointly backward" variant).
import torch
import torch.nn as nn

torch.manual_seed(0)


class MultiTaskNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 16), nn.ReLU())
        self.head_cls = nn.Linear(16, 4)
        self.head_reg = nn.Linear(16, 1)

    def forward(self, x):
        h = self.trunk(x)
        return {"cls": self.head_cls(h), "reg": self.head_reg(h)}


def compute_losses(outputs, targets, criteria):
    return {task: criteria[task](outputs[task], targets[task]) for task in outputs}


def train_one_epoch(model, loader, optimizer, criteria, epoch):
    history = []
    for step, (x, targets) in enumerate(loader):
        outputs = model(x)
        losses = compute_losses(outputs, targets, criteria)
        total = losses["cls"] + losses["reg"]

        optimizer.zero_grad()
        total.backward()
        optimizer.step()

        history.append({k: v.item() for k, v in losses.items()})
        print(f"epoch {epoch} step {step} cls {losses['cls'].item():.4f} reg {losses['reg'].item():.4f}")
    return history


def main():
    model = MultiTaskNet()
    criteria = {"cls": nn.CrossEntropyLoss(), "reg": nn.MSELoss()}
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    X = torch.randn(40, 8)
    targets = {"cls": torch.randint(0, 4, (40,)), "reg": X[:, :1] * 0.5}
    loader = [(X[k:k + 10], {t: v[k:k + 10] for t, v in targets.items()}) for k in range(0, 40, 10)]
    for epoch in range(2):
        train_one_epoch(model, loader, optimizer, criteria, epoch)
    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")


if __name__ == "__main__":
    main()
