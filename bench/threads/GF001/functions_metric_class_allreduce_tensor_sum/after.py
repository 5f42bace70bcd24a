# Data-parallel ImageNet-style example (train/validate functions) with a Metric helper that
# averages a value over workers; a single-process stand-in replaces the collective.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

WORLD_SIZE = 1


def allreduce(tensor, name=None):
    # stand-in for hvd.allreduce(average=True): differentiable, averages over workers
    return tensor / WORLD_SIZE


class SummaryWriter:
    def __init__(self):
        self.scalars = []

    def add_scalar(self, tag, value, step):
        self.scalars.append((tag, value, step))


class Metric(object):
    def __init__(self, name):
        self.name = name
        self.sum = torch.tensor(0.)
        self.n = torch.tensor(0.)

    def update(self, val):
        self.sum += allreduce(val.detach().cpu(), name=self.name)
        self.n += 1

    @property
    def avg(self):
        return self.sum / self.n


def accuracy(output, target):
    pred = output.max(1, keepdim=True)[1]
    return pred.eq(target.view_as(pred)).cpu().float().mean()


model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))
optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
train_loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))) for _ in range(4)]
val_loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 5, (4,))) for _ in range(2)]
log_writer = SummaryWriter()


def train(epoch):
    model.train()
    train_loss = Metric('train_loss')
    train_accuracy = Metric('train_accuracy')
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.cross_entropy(output, target)
        loss.backward()
        optimizer.step()
        train_loss.update(loss)
        train_accuracy.update(accuracy(output, target))
        print(f"epoch {epoch} batch {batch_idx} loss {train_loss.avg.item():.4f} accuracy {100. * train_accuracy.avg.item():.2f}%")
    log_writer.add_scalar('train/loss', train_loss.avg, epoch)
    log_writer.add_scalar('train/accuracy', train_accuracy.avg, epoch)


def validate(epoch):
    model.eval()
    val_loss = Metric('val_loss')
    val_accuracy = Metric('val_accuracy')
    with torch.no_grad():
        for data, target in val_loader:
            output = model(data)
            val_loss.update(F.cross_entropy(output, target))
            val_accuracy.update(accuracy(output, target))
    print(f"epoch {epoch} val_loss {val_loss.avg.item():.4f} val_accuracy {100. * val_accuracy.avg.item():.2f}%")
    log_writer.add_scalar('val/loss', val_loss.avg, epoch)
    log_writer.add_scalar('val/accuracy', val_accuracy.avg, epoch)


for epoch in range(2):
    train(epoch)
    validate(epoch)
print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
