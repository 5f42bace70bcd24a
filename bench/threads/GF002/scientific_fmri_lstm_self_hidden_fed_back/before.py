import torch
import torch.nn as nn
import torch.optim as optim

torch.manual_seed(0)

device = torch.device("cpu")
N_ROI = 22          # regions of interest per fMRI frame
WINDOW = 16         # time points sampled per subject window
BATCH = 4


class fMRI_LSTM(nn.Module):
    def __init__(self, hidden_dim, input_dim):
        super(fMRI_LSTM, self).__init__()
        self.hidden_dim = hidden_dim
        self.lstm = nn.LSTM(input_dim, hidden_dim, num_layers=1, batch_first=True)
        self.linear = nn.Linear(hidden_dim, 1)
        self.hidden = self.init_hidden()
        self.dropout = nn.Dropout(p=0.2)
        self.activate = nn.Sigmoid()

    def init_hidden(self):
        return (torch.randn(1, BATCH, self.hidden_dim).to(device),
                torch.randn(1, BATCH, self.hidden_dim).to(device))

    def forward(self, x):
        lstm_out, self.hidden = self.lstm(x, self.hidden)
        lstm_out = lstm_out[:, -1, :]
        out = self.dropout(lstm_out)
        linear_output = self.linear(out)
        return self.activate(linear_output)


def load_subjects(n_subjects=12):
    """Synthetic ROI time series: class 1 subjects have a slow oscillation in ROI 0."""
    t = torch.arange(64, dtype=torch.float32)
    data, labels = [], []
    for s in range(n_subjects):
        label = s % 2
        series = torch.randn(64, N_ROI) * 0.5
        series[:, 0] += label * torch.sin(t / 4)
        data.append(series)
        labels.append(float(label))
    return data, torch.tensor(labels)


def sample_windows(data, labels):
    idx = torch.randperm(len(data))[:BATCH]
    starts = torch.randint(0, 64 - WINDOW, (BATCH,))
    x = torch.stack([data[i][s:s + WINDOW] for i, s in zip(idx.tolist(), starts.tolist())])
    return x.to(device), labels[idx].unsqueeze(1).to(device)


def train(model, data, labels, n_epochs=2, iters_per_epoch=3):
    loss_function = nn.BCELoss()
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    for epoch in range(n_epochs):
        model.train()
        epoch_loss = 0.0
        for it in range(iters_per_epoch):
            x, y = sample_windows(data, labels)
            model.zero_grad()
            predicted_prob = model(x)
            loss = loss_function(predicted_prob, y)
            epoch_loss += loss.item()
            loss.backward()
            optimizer.step()
        print("Epoch: {}, loss: {:.4f}".format(epoch, epoch_loss / iters_per_epoch))


if __name__ == "__main__":
    data, labels = load_subjects()
    model = fMRI_LSTM(hidden_dim=16, input_dim=N_ROI).to(device)
    train(model, data, labels)
    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
