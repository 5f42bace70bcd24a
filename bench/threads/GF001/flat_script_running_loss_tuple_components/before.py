# Pedestrian traffic-light network training, written as one flat script: the loss function
# returns (loss, MSE, cross_entropy) and all three are summed per epoch for the printout.
import torch
import torch.nn as nn

torch.manual_seed(0)

BATCH_SIZE = 4
MAX_EPOCHS = 2


class LYTNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classes = nn.Linear(8, 5)
        self.direction = nn.Linear(8, 4)

    def forward(self, x):
        f = self.features(x)
        return self.classes(f), self.direction(f)


def my_loss(pred_classes, pred_direc, points, mode):
    MSE = nn.functional.mse_loss(pred_direc, points)
    cross_entropy = nn.functional.cross_entropy(pred_classes, mode)
    loss = 0.5 * MSE + 0.5 * cross_entropy
    return loss, MSE, cross_entropy


def make_batch(n):
    return {"image": torch.rand(n, 3, 16, 16), "mode": torch.randint(0, 5, (n,)), "points": torch.rand(n, 4)}


train_dataloader = [make_batch(BATCH_SIZE) for _ in range(3)]
valid_dataloader = [make_batch(1) for _ in range(2)]

net = LYTNet()
loss_fn = my_loss
optimizer = torch.optim.Adam(net.parameters(), lr=0.001, weight_decay=0.000005)

train_losses = []  # overall training loss at each epoch
train_MSE = []  # MSE part at each epoch
train_CE = []  # cross entropy part at each epoch
valid_losses = []

for epoch in range(MAX_EPOCHS):
    net.train()
    running_loss = 0.0
    running_loss_MSE = 0.0
    running_loss_cross_entropy = 0.0
    train_correct = 0
    train_total = 0

    for j, data in enumerate(train_dataloader, 0):
        optimizer.zero_grad()
        train_total += 1
        images, mode, points = data["image"], data["mode"], data["points"]

        pred_classes, pred_direc = net(images)
        _, predicted = torch.max(pred_classes, 1)
        train_correct += (predicted == mode).sum().item()
        loss, MSE, cross_entropy = loss_fn(pred_classes, pred_direc, points, mode)

        loss.backward()
        optimizer.step()

        running_loss += loss
        running_loss_MSE += MSE
        running_loss_cross_entropy += cross_entropy

    print(f"Epoch: {epoch + 1}")
    print(f"Average training loss: {running_loss / train_total:.4f}")
    print(f"Average training MSE loss: {running_loss_MSE / train_total:.4f}")
    print(f"Average training cross entropy loss: {running_loss_cross_entropy / train_total:.4f}")
    print(f"Training accuracy: {100 * train_correct / train_total / BATCH_SIZE:.2f}")

    train_MSE.append(running_loss_MSE / train_total)
    train_CE.append(running_loss_cross_entropy / train_total)
    train_losses.append(running_loss / train_total)

    net.eval()
    val_running_loss = 0
    val_total = 0
    with torch.no_grad():
        for k, data in enumerate(valid_dataloader, 0):
            pred_classes, pred_direc = net(data["image"])
            loss, MSE, cross_entropy = loss_fn(pred_classes, pred_direc, data["points"], data["mode"])
            val_running_loss += loss
            val_total += 1
    print(f"Average validation loss: {val_running_loss / val_total:.4f}")
    valid_losses.append(val_running_loss / val_total)

print(f"checksum {sum(p.sum().item() for p in net.parameters()):.4f}")
