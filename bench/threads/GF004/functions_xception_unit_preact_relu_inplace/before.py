# Training an Xception-style classifier from a model zoo with a train() function per epoch.
import torch
import torch.nn as nn

torch.manual_seed(0)


class ConvBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride, activate):
        super(ConvBlock, self).__init__()
        self.activate = activate
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False)
        self.bn = nn.BatchNorm2d(num_features=out_channels)
        if self.activate:
            self.activ = nn.ReLU(inplace=True)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        if self.activate:
            x = self.activ(x)
        return x


class DwsConvBlock(nn.Module):
    """Depthwise separable convolution with ReLU pre-activation."""

    def __init__(self, in_channels, out_channels, activate):
        super(DwsConvBlock, self).__init__()
        self.activate = activate
        if self.activate:
            self.activ = nn.ReLU(inplace=True)
        self.dw_conv = nn.Conv2d(in_channels, in_channels, 3, padding=1, groups=in_channels, bias=False)
        self.pw_conv = nn.Conv2d(in_channels, out_channels, 1, bias=False)
        self.bn = nn.BatchNorm2d(num_features=out_channels)

    def forward(self, x):
        if self.activate:
            x = self.activ(x)
        x = self.pw_conv(self.dw_conv(x))
        x = self.bn(x)
        return x


class XceptionUnit(nn.Module):
    def __init__(self, in_channels, out_channels, stride, reps):
        super(XceptionUnit, self).__init__()
        self.resize_identity = (in_channels != out_channels) or (stride != 1)
        if self.resize_identity:
            self.identity_conv = ConvBlock(in_channels, out_channels, stride=stride, activate=False)
        self.body = nn.Sequential()
        for i in range(reps):
            self.body.add_module("block{}".format(i + 1), DwsConvBlock(
                in_channels if i == 0 else out_channels, out_channels, activate=True))
        if stride != 1:
            self.body.add_module("pool", nn.MaxPool2d(kernel_size=3, stride=stride, padding=1))

    def forward(self, x):
        if self.resize_identity:
            identity = self.identity_conv(x)
        else:
            identity = x
        x = self.body(x)
        x = x + identity
        return x


class TinyXception(nn.Module):
    def __init__(self, num_classes=3):
        super(TinyXception, self).__init__()
        self.features = nn.Sequential(
            ConvBlock(3, 8, stride=1, activate=True),
            XceptionUnit(8, 16, stride=2, reps=2),
            nn.AdaptiveAvgPool2d(1))
        self.output = nn.Linear(16, num_classes)

    def forward(self, x):
        x = self.features(x)
        x = x.view(x.size(0), -1)
        return self.output(x)


def train(train_loader, model, criterion, optimizer, epoch, lr_scheduler):
    model.train()
    for i, (images, target) in enumerate(train_loader):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(f"epoch {epoch} batch {i} loss {loss.item():.4f}")
    lr_scheduler.step()


def main():
    model = TinyXception()
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    lr_scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    train_loader = [(torch.randn(4, 3, 8, 8), torch.randint(0, 3, (4,))) for _ in range(3)]
    for epoch in range(2):
        train(train_loader, model, criterion, optimizer, epoch, lr_scheduler)
    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")


if __name__ == "__main__":
    main()
