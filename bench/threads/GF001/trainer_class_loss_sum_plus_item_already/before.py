# Knowledge-graph embedding trainer (TransE-style margin loss) written as a class that moves each
# batch of (head, relation, tail) ids to self.device; the epoch loss is summed with .item().
import torch
import torch.nn as nn

torch.manual_seed(0)


class TransE(nn.Module):
    def __init__(self, num_entities=20, num_relations=4, dim=8):
        super().__init__()
        self.ent = nn.Embedding(num_entities, dim)
        self.rel = nn.Embedding(num_relations, dim)

    def forward(self, head, relation, tail):
        return (self.ent(head) + self.rel(relation) - self.ent(tail)).norm(p=1, dim=-1)


class Trainer:
    def __init__(self, model, train_triples, device="cpu", lr=0.01, margin=1.0, batch_size=4):
        self.device = device
        self.model = model.to(self.device)
        self.train_triples = train_triples
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)
        self.criterion = nn.MarginRankingLoss(margin=margin)
        self.batch_size = batch_size
        self.epoch_losses = []

    def corrupt(self, tail):
        return (tail + torch.randint(1, 20, tail.shape)) % 20

    def run_epoch(self):
        self.model.train()
        loss_sum = 0.0
        for start in range(0, len(self.train_triples), self.batch_size):
            rows = self.train_triples[start:start + self.batch_size]
            head = torch.tensor([r[0] for r in rows]).to(self.device)
            relation = torch.tensor([r[1] for r in rows]).to(self.device)
            tail = torch.tensor([r[2] for r in rows]).to(self.device)

            self.optimizer.zero_grad()
            pos = self.model(head, relation, tail)
            neg = self.model(head, relation, self.corrupt(tail))
            loss = self.criterion(pos, neg, -torch.ones_like(pos))
            loss.backward()
            self.optimizer.step()
            loss_sum += loss.item()
        self.epoch_losses.append(loss_sum)
        return loss_sum

    def train(self, epochs):
        for epoch in range(epochs):
            loss_sum = self.run_epoch()
            print(f"epoch {epoch} loss_sum {loss_sum:.4f}")


triples = [(int(h), int(r), int(t)) for h, r, t in zip(torch.randint(0, 20, (12,)), torch.randint(0, 4, (12,)), torch.randint(0, 20, (12,)))]
trainer = Trainer(TransE(), triples)
trainer.train(epochs=2)
print(f"checksum {sum(p.sum().item() for p in trainer.model.parameters()):.4f}")
