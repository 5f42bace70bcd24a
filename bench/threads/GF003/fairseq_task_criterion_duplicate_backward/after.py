# fairseq-style R-Drop summarization task: the criterion's forward_reg()
# already calls optimizer.backward(loss), and the task's train_step() then
# calls optimizer.backward(loss) again on the returned loss.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

PAD = 0
VOCAB = 20


def label_smoothed_nll_loss(lprobs, target, epsilon, ignore_index=None, reduce=True):
    if target.dim() == lprobs.dim() - 1:
        target = target.unsqueeze(-1)
    nll_loss = -lprobs.gather(dim=-1, index=target)
    smooth_loss = -lprobs.sum(dim=-1, keepdim=True)
    if ignore_index is not None:
        pad_mask = target.eq(ignore_index)
        nll_loss = nll_loss.masked_fill(pad_mask, 0.0)
        smooth_loss = smooth_loss.masked_fill(pad_mask, 0.0)
    if reduce:
        nll_loss = nll_loss.sum()
        smooth_loss = smooth_loss.sum()
    eps_i = epsilon / lprobs.size(-1)
    loss = (1.0 - epsilon) * nll_loss + eps_i * smooth_loss
    return loss, nll_loss


class FairseqOptimizer:
    def __init__(self, params, lr):
        self._optimizer = torch.optim.SGD(params, lr=lr)

    def backward(self, loss):
        loss.backward()

    def zero_grad(self):
        self._optimizer.zero_grad()

    def step(self):
        self._optimizer.step()


class TinySeq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, 16, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(VOCAB, 16, padding_idx=PAD)
        self.encoder = nn.Sequential(nn.Linear(16, 16), nn.ReLU(), nn.Dropout(0.3))
        self.out = nn.Linear(32, VOCAB)

    def forward(self, src_tokens, src_lengths, prev_output_tokens):
        enc = self.encoder(self.src_embed(src_tokens)).mean(dim=1, keepdim=True)
        dec = self.tgt_embed(prev_output_tokens)
        return (self.out(torch.cat([dec, enc.expand(-1, dec.size(1), -1)], dim=-1)),)

    def get_normalized_probs(self, net_output, log_probs):
        logits = net_output[0]
        return F.log_softmax(logits, dim=-1) if log_probs else F.softmax(logits, dim=-1)

    def get_targets(self, sample, net_output):
        return sample["target"]


class FairseqCriterion(nn.Module):
    def __init__(self, task):
        super().__init__()
        self.task = task
        self.padding_idx = PAD


class RegLabelSmoothedCrossEntropyCriterion(FairseqCriterion):
    def __init__(self, task, sentence_avg, label_smoothing):
        super().__init__(task)
        self.sentence_avg = sentence_avg
        self.eps = label_smoothing

    def compute_kl_loss(self, model, net_output, pad_mask=None, reduce=True):
        net_prob = model.get_normalized_probs(net_output, log_probs=True)
        net_prob_tec = model.get_normalized_probs(net_output, log_probs=False)
        p, q = torch.split(net_prob, net_prob.size(0) // 2, dim=0)
        p_tec, q_tec = torch.split(net_prob_tec, net_prob_tec.size(0) // 2, dim=0)
        p_loss = F.kl_div(p, q_tec, reduction="none")
        q_loss = F.kl_div(q, p_tec, reduction="none")
        if pad_mask is not None:
            p_loss = p_loss.masked_fill(pad_mask, 0.0)
            q_loss = q_loss.masked_fill(pad_mask, 0.0)
        if reduce:
            p_loss = p_loss.sum()
            q_loss = q_loss.sum()
        return (p_loss + q_loss) / 2

    def forward_reg(self, model, sample, optimizer, reg_alpha, ignore_grad, reduce=True):
        sample_input = sample["net_input"]
        sample_concat_input = {
            "src_tokens": torch.cat([sample_input["src_tokens"], sample_input["src_tokens"].clone()], 0),
            "src_lengths": torch.cat([sample_input["src_lengths"], sample_input["src_lengths"].clone()], 0),
            "prev_output_tokens": torch.cat([sample_input["prev_output_tokens"],
                                             sample_input["prev_output_tokens"].clone()], 0),
        }
        net_output = model(**sample_concat_input)
        lprobs = model.get_normalized_probs(net_output, log_probs=True)
        lprobs = lprobs.view(-1, lprobs.size(-1))
        target = model.get_targets(sample, net_output)
        pad_mask = target.unsqueeze(-1).eq(self.padding_idx)
        target = torch.cat([target, target.clone()], dim=0)
        loss, nll_loss = label_smoothed_nll_loss(lprobs, target.view(-1, 1), self.eps,
                                                 ignore_index=self.padding_idx, reduce=reduce)
        kl_loss = self.compute_kl_loss(model, net_output, pad_mask)
        loss = loss + reg_alpha * kl_loss
        if ignore_grad:
            loss = loss * 0
        with torch.autograd.profiler.record_function("backward"):
            optimizer.backward(loss)

        logging_output = {
            "loss": loss.item(),
            "nll_loss": nll_loss.item(),
            "ntokens": sample["ntokens"],
            "sample_size": sample["ntokens"],
        }
        return loss, sample["ntokens"], logging_output


class TranslationTask:
    def __init__(self, args):
        self.args = args

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        model.train()
        loss, sample_size, logging_output = criterion(model, sample)
        if ignore_grad:
            loss *= 0
        optimizer.backward(loss)
        return loss, sample_size, logging_output


class RDropTranslationTask(TranslationTask):
    def __init__(self, args):
        super().__init__(args)
        self.criterion_reg_alpha = getattr(args, "reg_alpha", 0)

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        model.train()
        with torch.autograd.profiler.record_function("forward"):
            loss, sample_size, logging_output = criterion.forward_reg(
                model, sample, optimizer, self.criterion_reg_alpha, ignore_grad)
        return loss, sample_size, logging_output


class Args:
    reg_alpha = 0.7


def make_sample(n, src_len=6, tgt_len=5):
    src = torch.randint(1, VOCAB, (n, src_len))
    tgt = torch.randint(1, VOCAB, (n, tgt_len))
    tgt[:, -1] = PAD
    prev = torch.cat([torch.full((n, 1), 1), tgt[:, :-1]], dim=1)
    return {"net_input": {"src_tokens": src, "src_lengths": torch.full((n,), src_len),
                          "prev_output_tokens": prev},
            "target": tgt, "ntokens": int(tgt.ne(PAD).sum())}


task = RDropTranslationTask(Args())
model = TinySeq2Seq()
criterion = RegLabelSmoothedCrossEntropyCriterion(task, sentence_avg=False, label_smoothing=0.1)
optimizer = FairseqOptimizer(model.parameters(), lr=0.01)
samples = [make_sample(4) for _ in range(3)]

update_num = 0
for epoch in range(2):
    for sample in samples:
        optimizer.zero_grad()
        loss, sample_size, logging_output = task.train_step(sample, model, criterion, optimizer, update_num)
        optimizer.step()
        update_num += 1
        print(f"epoch {epoch} update {update_num} loss {logging_output['loss'] / sample_size:.4f} "
              f"nll_loss {logging_output['nll_loss'] / sample_size:.4f}")

print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
