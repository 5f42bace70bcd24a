import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)

VOCAB = 11
EMB = 8
HIDDEN = 16


class DecoderState(object):
    """What a decoder carries from one truncated-BPTT chunk to the next."""

    def detach(self):
        """Cut the state from the graph of the chunk that produced it."""
        for h in self._all:
            if h is not None:
                h = h.detach()


class RNNDecoderState(DecoderState):
    def __init__(self, hidden_size, rnnstate):
        self.hidden = rnnstate if isinstance(rnnstate, tuple) else (rnnstate,)
        batch_size = self.hidden[0].size(1)
        self.input_feed = torch.zeros(batch_size, hidden_size)
        self.coverage = None

    @property
    def _all(self):
        return self.hidden + (self.input_feed,)

    def update_state(self, rnnstate, input_feed, coverage):
        self.hidden = rnnstate if isinstance(rnnstate, tuple) else (rnnstate,)
        self.input_feed = input_feed
        self.coverage = coverage


class RNNEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.LSTM(EMB, HIDDEN)

    def forward(self, src):
        memory_bank, encoder_final = self.rnn(self.embeddings(src))
        return encoder_final, memory_bank


class InputFeedRNNDecoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embeddings = nn.Embedding(VOCAB, EMB)
        self.rnn = nn.LSTMCell(EMB + HIDDEN, HIDDEN)
        self.linear_out = nn.Linear(2 * HIDDEN, HIDDEN)

    def init_decoder_state(self, encoder_final):
        return RNNDecoderState(HIDDEN, encoder_final)

    def forward(self, tgt, memory_bank, state):
        input_feed = state.input_feed
        hidden = (state.hidden[0][0], state.hidden[1][0])
        outputs = []
        for emb_t in self.embeddings(tgt).split(1):
            h, c = self.rnn(torch.cat([emb_t.squeeze(0), input_feed], 1), hidden)
            align = F.softmax(torch.einsum("sbh,bh->bs", memory_bank, h), dim=-1)
            context = torch.einsum("bs,sbh->bh", align, memory_bank)
            input_feed = torch.tanh(self.linear_out(torch.cat([context, h], 1)))
            hidden = (h, c)
            outputs.append(input_feed)
        state.update_state((h.unsqueeze(0), c.unsqueeze(0)), input_feed, None)
        return torch.stack(outputs), state


class NMTModel(nn.Module):
    def __init__(self, encoder, decoder):
        super().__init__()
        self.encoder = encoder
        self.decoder = decoder

    def forward(self, src, tgt, dec_state=None):
        enc_final, memory_bank = self.encoder(src)
        enc_state = self.decoder.init_decoder_state(enc_final)
        decoder_outputs, dec_state = self.decoder(
            tgt, memory_bank, enc_state if dec_state is None else dec_state
        )
        return decoder_outputs, dec_state


class Trainer(object):
    def __init__(self, model, generator, criterion, optim, trunc_size=0):
        self.model = model
        self.generator = generator
        self.criterion = criterion
        self.optim = optim
        self.trunc_size = trunc_size

    def train(self, train_iter, epoch):
        for i, batch in enumerate(train_iter):
            loss = self._gradient_accumulation(batch)
            print(f"epoch {epoch} batch {i} loss {loss:.4f}")

    def _gradient_accumulation(self, batch):
        src, tgt = batch
        target_size = tgt.size(0)
        trunc_size = self.trunc_size if self.trunc_size else target_size
        dec_state = None
        total = 0.0
        for j in range(0, target_size - 1, trunc_size):
            tgt_in = tgt[j: j + trunc_size]
            tgt_out = tgt[j + 1: j + trunc_size + 1]
            self.model.zero_grad()
            outputs, dec_state = self.model(src, tgt_in[: tgt_out.size(0)], dec_state)
            scores = self.generator(outputs)
            loss = self.criterion(scores.view(-1, VOCAB), tgt_out.reshape(-1))
            loss.backward()
            self.optim.step()
            total += loss.item()
            # truncated BPTT: keep the decoder state, drop its history
            if dec_state is not None:
                dec_state.detach()
        return total


model = NMTModel(RNNEncoder(), InputFeedRNNDecoder())
generator = nn.Sequential(nn.Linear(HIDDEN, VOCAB), nn.LogSoftmax(dim=-1))
params = list(model.parameters()) + list(generator.parameters())
trainer = Trainer(model, generator, nn.NLLLoss(), torch.optim.SGD(params, lr=0.1), trunc_size=4)

train_iter = [(torch.randint(0, VOCAB, (6, 3)), torch.randint(0, VOCAB, (9, 3))) for _ in range(2)]
for epoch in range(2):
    trainer.train(train_iter, epoch)
print(f"checksum {sum(p.sum().item() for p in params):.4f}")
