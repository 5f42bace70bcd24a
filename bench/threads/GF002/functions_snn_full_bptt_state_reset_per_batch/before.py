from typing import NamedTuple, Optional

import torch

torch.manual_seed(0)


class LIFState(NamedTuple):
    z: torch.Tensor  # spikes
    v: torch.Tensor  # membrane voltage
    i: torch.Tensor  # synaptic current


def superspike(x, alpha=10.0):
    return torch.sigmoid(alpha * x)


class LIFCell(torch.nn.Module):
    def __init__(self, input_size, hidden_size, tau_syn_inv=0.2, tau_mem_inv=0.1, v_th=0.5):
        super().__init__()
        self.hidden_size = hidden_size
        self.input_weights = torch.nn.Parameter(torch.randn(hidden_size, input_size) * 0.5)
        self.recurrent_weights = torch.nn.Parameter(torch.randn(hidden_size, hidden_size) * 0.1)
        self.tau_syn_inv = tau_syn_inv
        self.tau_mem_inv = tau_mem_inv
        self.v_th = v_th

    def forward(self, input_tensor: torch.Tensor, state: Optional[LIFState] = None):
        if state is None:
            zeros = torch.zeros(input_tensor.shape[0], self.hidden_size)
            state = LIFState(z=zeros, v=zeros, i=zeros)
        v_decayed = state.v + self.tau_mem_inv * (state.i - state.v)
        i_decayed = state.i - self.tau_syn_inv * state.i
        z_new = superspike(v_decayed - self.v_th)
        v_new = (1 - z_new) * v_decayed
        i_new = i_decayed + input_tensor @ self.input_weights.t() + state.z @ self.recurrent_weights.t()
        return z_new, LIFState(z=z_new, v=v_new, i=i_new)


def make_batches(n_batches, timesteps, batch_size, features):
    return [(torch.rand(timesteps, batch_size, features), torch.rand(batch_size, 1)) for _ in range(n_batches)]


def run_sequence(model, data):
    s = None
    for ts in range(data.shape[0]):
        out, s = model(data[ts], s)
    return out


def train(model, readout, optimizer, batches, epochs=2):
    for epoch in range(epochs):
        for step, (data, target) in enumerate(batches):
            out = run_sequence(model, data)  # backprop through all time steps of this batch
            loss = torch.nn.functional.mse_loss(readout(out), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    model = LIFCell(12, 16)
    readout = torch.nn.Linear(16, 1)
    optimizer = torch.optim.SGD(list(model.parameters()) + list(readout.parameters()), lr=0.05)
    train(model, readout, optimizer, make_batches(3, 10, 8, 12))
    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
