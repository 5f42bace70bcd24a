# Metric-learning benchmark runner: a trunk, an MLP embedder and an MLP classifier trained by a
# trainer hierarchy (BaseTrainer -> MetricLossOnly -> TrainWithClassifier) with a metric loss
# plus a classification loss.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self, layer_sizes, final_relu=False):
        super().__init__()
        layer_list = []
        num_layers = len(layer_sizes) - 1
        final_relu_layer = num_layers if final_relu else num_layers - 1
        for i in range(len(layer_sizes) - 1):
            input_size = layer_sizes[i]
            curr_size = layer_sizes[i + 1]
            if i < final_relu_layer:
                layer_list.append(nn.ReLU())
            layer_list.append(nn.Linear(input_size, curr_size))
        self.net = nn.Sequential(*layer_list)

    def forward(self, x):
        return self.net(x)


class ContrastiveLoss(nn.Module):
    def __init__(self, pos_margin=0.0, neg_margin=1.0):
        super().__init__()
        self.pos_margin, self.neg_margin = pos_margin, neg_margin

    def forward(self, embeddings, labels):
        emb = F.normalize(embeddings, p=2, dim=1)
        dist = torch.cdist(emb, emb)
        same = labels.unsqueeze(0) == labels.unsqueeze(1)
        eye = torch.eye(len(labels), dtype=torch.bool)
        pos = F.relu(dist[same & ~eye] - self.pos_margin)
        neg = F.relu(self.neg_margin - dist[~same])
        return pos.mean() + neg.mean()


class BaseTrainer:
    def __init__(self, models, optimizers, loss_funcs, loss_weights, dataloader):
        self.models = models
        self.optimizers = optimizers
        self.loss_funcs = loss_funcs
        self.loss_weights = loss_weights
        self.dataloader = dataloader
        self.losses = {}

    def train(self, num_epochs):
        for epoch in range(num_epochs):
            for curr_batch in self.dataloader:
                self.forward_and_backward(curr_batch)
                for opt in self.optimizers.values():
                    opt.step()
            print(f"epoch {epoch} " + " ".join(f"{k} {v.item():.4f}" for k, v in self.losses.items()))

    def forward_and_backward(self, curr_batch):
        self.losses = {}
        for opt in self.optimizers.values():
            opt.zero_grad()
        self.calculate_loss(curr_batch)
        total_loss = sum(self.loss_weights[k] * v for k, v in self.losses.items())
        total_loss.backward()

    def compute_embeddings(self, data):
        trunk_output = self.models["trunk"](data)
        return self.models["embedder"](trunk_output)


class MetricLossOnly(BaseTrainer):
    def calculate_loss(self, curr_batch):
        data, labels = curr_batch
        embeddings = self.compute_embeddings(data)
        self.losses["metric_loss"] = self.loss_funcs["metric_loss"](embeddings, labels)


class TrainWithClassifier(MetricLossOnly):
    def calculate_loss(self, curr_batch):
        data, labels = curr_batch
        embeddings = self.compute_embeddings(data)
        self.losses["metric_loss"] = self.loss_funcs["metric_loss"](embeddings, labels)
        logits = self.models["classifier"](embeddings)
        self.losses["classifier_loss"] = self.loss_funcs["classifier_loss"](logits, labels)


models = {
    "trunk": nn.Sequential(nn.Linear(12, 16), nn.ReLU()),
    "embedder": MLP([16, 16, 8]),
    "classifier": MLP([8, 8, 4]),
}
optimizers = {name: torch.optim.Adam(m.parameters(), lr=1e-3) for name, m in models.items()}
loss_funcs = {"metric_loss": ContrastiveLoss(), "classifier_loss": nn.CrossEntropyLoss()}
dataloader = [(torch.randn(8, 12), torch.arange(8) % 4) for _ in range(3)]

trainer = TrainWithClassifier(models, optimizers, loss_funcs,
                              {"metric_loss": 1.0, "classifier_loss": 0.5}, dataloader)
trainer.train(num_epochs=2)
print(f"checksum {sum(p.sum().item() for m in models.values() for p in m.parameters()):.4f}")
