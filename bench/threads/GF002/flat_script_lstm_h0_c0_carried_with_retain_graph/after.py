import torch
import torch.nn as nn

torch.manual_seed(0)

EPOCH = 2
batch_size = 4
seq_len = 5
embedding_dim = 6
hidden_dim = 8
num_layers = 1

# synthetic sequences: predict the next embedding vector at every step
inputs = torch.randn(12, seq_len, embedding_dim)
targets = torch.roll(inputs, shifts=-1, dims=1)
data_loader = [(inputs[i:i + batch_size], targets[i:i + batch_size]) for i in range(0, 12, batch_size)]
batch_count = len(data_loader)


class LSTMNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(embedding_dim, hidden_dim, num_layers, batch_first=True)
        self.head = nn.Linear(hidden_dim, embedding_dim)

    def forward(self, x, h0, c0):
        out, (h, c) = self.rnn(x, (h0, c0))
        return self.head(out), (h, c)


lstm = LSTMNet()
loss_fn = nn.MSELoss()
optimizer = torch.optim.Adam(lstm.parameters(), lr=1e-2)

for epoch in range(EPOCH):
    batch_num = 0
    h0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    c0 = torch.randn((num_layers, batch_size, hidden_dim), requires_grad=False)
    for batch in data_loader:
        optimizer.zero_grad()
        output, (h0, c0) = lstm(batch[0], h0.detach(), c0.detach())
        loss = loss_fn(output.reshape(-1, embedding_dim), batch[1].reshape(-1, embedding_dim))
        loss.backward(retain_graph=True)
        optimizer.step()
        batch_num += 1
        if batch_num % min(10, batch_count // 2) == 0:
            print(f"epoch {epoch} : batch {batch_num} : {loss.item():.4f}")

print(f"checksum {sum(p.sum().item() for p in lstm.parameters()):.4f}")
