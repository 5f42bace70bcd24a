# GRU encoder-decoder trained with teacher forcing; the decoder's word distribution comes from
# an adaptive softmax (head cluster plus one tail cluster) through get_log_prob().
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class AdaptiveSoftmax(nn.Module):
    def __init__(self, vocab_size, input_dim, cutoff, dropout):
        super().__init__()
        if vocab_size > cutoff[-1]:
            cutoff = cutoff + [vocab_size]
        output_dim = cutoff[0] + len(cutoff) - 1
        self.vocab_size = vocab_size
        self.cutoff = cutoff
        self.lsm = nn.LogSoftmax(dim=1)
        self.head = nn.Linear(input_dim, output_dim, bias=False)
        self.tail = nn.ModuleList()
        for i in range(len(cutoff) - 1):
            self.tail.append(nn.Sequential(
                nn.Linear(input_dim, input_dim // 4 ** i, bias=False),
                nn.Dropout(dropout),
                nn.Linear(input_dim // 4 ** i, cutoff[i + 1] - cutoff[i], bias=False)))

    def get_log_prob(self, input):
        bsz, length, dim = input.size()
        input = input.contiguous().view(-1, dim)
        head_y = self.head(input)
        log_probs = head_y.new_zeros(input.size(0), self.vocab_size)
        head_sz = self.cutoff[0] + len(self.tail)
        log_probs[:, :head_sz] = self.lsm(head_y)
        tail_priors = log_probs[:, self.cutoff[0] - 1: head_sz - 1].clone()
        for i in range(len(self.tail)):
            start = self.cutoff[i]
            end = self.cutoff[i + 1]
            tail_out = log_probs[:, start:end]
            tail_out.copy_(self.tail[i](input))
            log_probs[:, start:end] = self.lsm(tail_out).add_(tail_priors[:, i, None])
        return log_probs.view(bsz, length, -1)


class Seq2Seq(nn.Module):
    def __init__(self, vocab_size=30, emb=8, hidden=16):
        super().__init__()
        self.src_embed = nn.Embedding(vocab_size, emb)
        self.tgt_embed = nn.Embedding(vocab_size, emb)
        self.encoder = nn.GRU(emb, hidden, batch_first=True)
        self.decoder = nn.GRU(emb, hidden, batch_first=True)
        self.adaptive_softmax = AdaptiveSoftmax(vocab_size, hidden, cutoff=[10], dropout=0.1)

    def forward(self, src, prev_output_tokens):
        _, h = self.encoder(self.src_embed(src))
        dec_out, _ = self.decoder(self.tgt_embed(prev_output_tokens), h)
        return self.adaptive_softmax.get_log_prob(dec_out)


model = Seq2Seq()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
pairs = [(torch.randint(0, 30, (4, 6)), torch.randint(0, 30, (4, 5))) for _ in range(4)]

for step, (src, tgt) in enumerate(pairs):
    bos = torch.zeros(tgt.size(0), 1, dtype=torch.long)
    prev_output_tokens = torch.cat([bos, tgt[:, :-1]], dim=1)
    lprobs = model(src, prev_output_tokens)
    loss = F.nll_loss(lprobs.view(-1, lprobs.size(-1)), tgt.view(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    print(f"step {step} nll {loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
