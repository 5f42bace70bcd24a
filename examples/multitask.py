"""A two-head model trained on one shared trunk, with the autograd bugs gradfix fixes.

Run `gradfix fix --diff examples/` to see the proposed fixes; run the script itself
(`python examples/multitask.py`) before and after `gradfix fix examples/` to see the
RuntimeErrors go away.
"""

import torch
from torch import nn

torch.manual_seed(0)


class TwoHeads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(8, 32), nn.ReLU())
        self.classify = nn.Linear(32, 3)
        self.regress = nn.Linear(32, 1)

    def forward(self, x):
        features = self.trunk(x)
        confidence = torch.sigmoid(self.regress(features))
        confidence[confidence < 0.05] = 0.0  # GF004: sigmoid saved its output
        return self.classify(features), confidence


model = TwoHeads()
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
classification = nn.CrossEntropyLoss()
regression = nn.MSELoss()

for step in range(10):
    x = torch.randn(16, 8)
    labels, targets = torch.randint(0, 3, (16,)), torch.rand(16, 1)
    logits, confidence = model(x)
    optimizer.zero_grad()
    classification(logits, labels).backward()  # GF003: frees the shared trunk's graph
    regression(confidence, targets).backward()
    optimizer.step()
print("trained", sum(p.abs().sum().item() for p in model.parameters()))
