# Relaxing particle coordinates by gradient descent: two observables are
# computed from one shared intermediate `z`, and each gets its own backward()
# to accumulate forces into pos.grad before the coordinate update.
import torch

torch.manual_seed(0)

N_PARTICLES = 6
coupling = torch.randn(2, 4) * 0.5


def shared_field(pos, coupling):
    f = pos @ coupling
    z = torch.sigmoid(2 * f)
    return z


def observables(pos, coupling):
    z = shared_field(pos, coupling)
    y1 = (z ** 2).sum()
    y2 = (z ** 3).sum()
    return y1, y2


def accumulate_forces(pos, coupling):
    y1, y2 = observables(pos, coupling)
    y1.backward()
    y2.backward()
    return y1.item(), y2.item()


def relax(pos, n_steps, lr=0.1):
    history = []
    for step in range(n_steps):
        pos.grad = None
        e1, e2 = accumulate_forces(pos, coupling)
        with torch.no_grad():
            pos -= lr * pos.grad
        history.append((e1, e2))
        print(f"step {step} y1 {e1:.4f} y2 {e2:.4f}")
    return history


pos = torch.randn(N_PARTICLES, 2, requires_grad=True)
history = relax(pos, 5)
print(f"checksum {pos.sum().item():.4f}")
