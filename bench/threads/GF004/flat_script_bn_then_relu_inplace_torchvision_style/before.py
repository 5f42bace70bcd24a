# torchvision-style small CNN (conv -> batchnorm -> in-place ReLU blocks, AlexNet-like
# classifier) trained in a flat script.
import torch
import torch.nn as nn

torch.manual_seed(0)


class SmallNet(nn.Module):
    def __init__(self, num_classes=4):
        super(SmallNet, self).__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(8),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=2),
            nn.Conv2d(8, 16, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(16),
            nn.ReLU(inplace=True),
        )
        self.conv3 = nn.Conv2d(16, 16, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(16)
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(
            nn.Dropout(),
            nn.Linear(16 * 2 * 2, 32),
            nn.ReLU(inplace=True),
            nn.Dropout(),
            nn.Linear(32, num_classes),
        )

    def forward(self, x):
        x = self.features(x)
        x = self.bn3(self.conv3(x)).relu_()
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


net = SmallNet()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
data = [(torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))) for _ in range(3)]

for epoch in range(2):
    for i, (inputs, labels) in enumerate(data):
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()
        print(f"[{epoch}, {i}] loss: {loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in net.parameters()):.4f}")
