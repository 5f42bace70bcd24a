#!/usr/bin/env python
# coding: utf-8

# In[1]:


import torch
from torch import nn

torch.manual_seed(0)


# In[2]:


text = ['hey how are you', 'good i am fine', 'have a nice day']

chars = set(''.join(text))
int2char = dict(enumerate(sorted(chars)))
char2int = {char: ind for ind, char in int2char.items()}

maxlen = len(max(text, key=len))
text = [sentence.ljust(maxlen) for sentence in text]

input_seq = [[char2int[c] for c in sentence[:-1]] for sentence in text]
target_seq = [[char2int[c] for c in sentence[1:]] for sentence in text]

dict_size = len(char2int)
seq_len = maxlen - 1
batch_size = len(text)


# In[3]:


def one_hot_encode(sequence, dict_size, seq_len, batch_size):
    features = torch.zeros((batch_size, seq_len, dict_size))
    for i in range(batch_size):
        for u in range(seq_len):
            features[i, u, sequence[i][u]] = 1
    return features


input_seq = one_hot_encode(input_seq, dict_size, seq_len, batch_size)
target_seq = torch.tensor(target_seq)


# In[4]:


class Model(nn.Module):
    def __init__(self, input_size, output_size, hidden_dim, n_layers):
        super(Model, self).__init__()
        self.hidden_dim = hidden_dim
        self.n_layers = n_layers
        self.rnn = nn.RNN(input_size, hidden_dim, n_layers, batch_first=True)
        self.fc = nn.Linear(hidden_dim, output_size)
        # keep the hidden state on the model instead of zeros on every call
        self.hidden = torch.zeros(self.n_layers, batch_size, self.hidden_dim)

    def forward(self, x):
        out, self.hidden = self.rnn(x, self.hidden)
        out = out.contiguous().view(-1, self.hidden_dim)
        out = self.fc(out)
        return out, self.hidden


# In[5]:


model = Model(input_size=dict_size, output_size=dict_size, hidden_dim=12, n_layers=1)

n_epochs = 30
lr = 0.01

criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.Adam(model.parameters(), lr=lr)


# In[6]:


for epoch in range(1, n_epochs + 1):
    optimizer.zero_grad()
    output, hidden = model(input_seq)
    loss = criterion(output, target_seq.view(-1).long())
    loss.backward()
    optimizer.step()

    if epoch % 10 == 0:
        print('Epoch: {}/{}.............'.format(epoch, n_epochs), end=' ')
        print("Loss: {:.4f}".format(loss.item()))


# In[7]:


print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
