# BERT-style pretraining runner (functions take_training_step / take_optimizer_step / main) that
# keeps its running loss in a device-side stats object to avoid a host sync every step.
import torch
import torch.nn as nn

torch.manual_seed(0)

VOCAB = 40


class TinyBertForPreTraining(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, hidden)
        self.encoder = nn.TransformerEncoderLayer(hidden, nhead=2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.mlm_head = nn.Linear(hidden, VOCAB)
        self.nsp_head = nn.Linear(hidden, 2)

    def forward(self, input_ids, token_type_ids, attention_mask):
        h = self.encoder(self.embeddings(input_ids), src_key_padding_mask=attention_mask == 0)
        return self.mlm_head(h), self.nsp_head(h[:, 0])


class BertPretrainingCriterion(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.loss_fn = nn.CrossEntropyLoss(ignore_index=-1)
        self.vocab_size = vocab_size

    def forward(self, prediction_scores, seq_relationship_score, masked_lm_labels, next_sentence_labels):
        masked_lm_loss = self.loss_fn(prediction_scores.view(-1, self.vocab_size), masked_lm_labels.view(-1))
        next_sentence_loss = self.loss_fn(seq_relationship_score.view(-1, 2), next_sentence_labels.view(-1))
        return masked_lm_loss + next_sentence_loss


class SyncFreeStats:
    def __init__(self):
        self.host_stats = {}
        self.device_stats = {}

    def add_stat(self, name, dtype=torch.int32, device_tensor=None):
        self.host_stats[name] = torch.zeros(1, dtype=dtype)
        self.device_stats[name] = device_tensor

    def copy_from_device(self):
        for name in self.host_stats.keys():
            if self.device_stats[name] is not None:
                self.host_stats[name].copy_(self.device_stats[name], non_blocking=True)

    def host_stat(self, name):
        return self.host_stats[name]

    def host_stat_value(self, name):
        return self.host_stats[name].item()

    def device_stat(self, name):
        return self.device_stats[name]


def make_batch():
    input_ids = torch.randint(0, VOCAB, (2, 8))
    labels = torch.full((2, 8), -1)
    labels[:, 2] = input_ids[:, 2]
    labels[:, 5] = input_ids[:, 5]
    return {"input_ids": input_ids, "token_type_ids": torch.zeros(2, 8, dtype=torch.long),
            "attention_mask": torch.ones(2, 8, dtype=torch.long), "labels": labels,
            "next_sentence_labels": torch.randint(0, 2, (2,))}


def take_training_step(args, model, criterion, batch, stats):
    prediction_scores, seq_relationship_score = model(input_ids=batch['input_ids'], token_type_ids=batch['token_type_ids'], attention_mask=batch['attention_mask'])
    loss = criterion(prediction_scores, seq_relationship_score, batch['labels'], batch['next_sentence_labels'])
    stats.device_stat('average_loss').add_(loss)
    (loss / args["gradient_accumulation_steps"]).backward()


def take_optimizer_step(args, lr_scheduler, optimizer, stats):
    optimizer.step()
    lr_scheduler.step()
    # Stats copying is located here, once per optimizer step
    stats.copy_from_device()
    optimizer.zero_grad(set_to_none=True)


def main(args):
    model = TinyBertForPreTraining()
    criterion = BertPretrainingCriterion(VOCAB)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    lr_scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 2))
    train_dataloader = [make_batch() for _ in range(8)]
    model.train()

    stats = SyncFreeStats()
    stats.add_stat('model_step')
    stats.add_stat('average_loss', dtype=torch.float32, device_tensor=torch.zeros(1, dtype=torch.float32))

    for step, batch in enumerate(train_dataloader):
        stats.host_stat('model_step').add_(1)
        grad_accumulation_step = (stats.host_stat_value('model_step') % args["gradient_accumulation_steps"]) != 0

        take_training_step(args, model, criterion, batch, stats)
        if not grad_accumulation_step:
            take_optimizer_step(args, lr_scheduler, optimizer, stats)
            static_optimizer_step = stats.host_stat_value('model_step') // args["gradient_accumulation_steps"]
            if static_optimizer_step % args["log_freq"] == 0:
                print(f"step {static_optimizer_step} average_loss "
                      f"{stats.host_stat_value('average_loss') / (args['log_freq'] * args['gradient_accumulation_steps']):.4f}")
                stats.device_stat('average_loss').zero_()

    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
    return args, stats


args, stats = main({"gradient_accumulation_steps": 2, "log_freq": 1})
