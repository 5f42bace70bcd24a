# Tensor-network fitting helper in the style of tntorch's `optimize`: a generic gradient loop
# over low-rank cores that stops on the relative improvement seen in its loss history.
from functools import reduce

import torch

torch.manual_seed(0)


def optimize(tensors, loss_function, optimizer=torch.optim.Adam, tol=1e-4, max_iter=1e4, print_freq=500, verbose=True):
    """Gradient-based fit of `tensors` (updated in place) against `loss_function`, which may
    return one scalar or a tuple of terms that are added up."""
    if not isinstance(tensors, (list, tuple)):
        tensors = [tensors]
    parameters = [t for t in tensors if t.requires_grad]
    if not parameters:
        raise ValueError("nothing to optimize: no tensor has requires_grad=True")

    optimizer = optimizer(parameters)
    losses = []
    converged = False
    iter = 0
    while True:
        optimizer.zero_grad()
        terms = loss_function(*tensors)
        if not isinstance(terms, (tuple, list)):
            terms = [terms]
        losses.append(reduce(lambda x, y: x + y, terms))
        delta = losses[-1] - losses[-2] if len(losses) >= 2 else float('-inf')
        small_change = tol is not None and (losses[-1] <= tol or -delta / losses[-1] <= tol)
        if iter >= 2 and small_change and losses[-2] - losses[-1] < losses[-3] - losses[-2]:
            converged = True
            break
        if iter == max_iter:
            break
        if verbose and iter % print_freq == 0:
            parts = ' + '.join(f'{t.item():10.6f}' for t in terms)
            print(f'iter {iter:3d} | loss: {parts} = {losses[-1].item():.4f}')
        losses[-1].backward(retain_graph=True)
        optimizer.step()
        iter += 1
    if verbose:
        status = f'converged (tol={tol})' if converged else f'max_iter reached ({max_iter})'
        print(f'final loss {losses[-1].item():.6f} after {iter} iterations, {status}')
    return losses


# Fit a rank-2 factorisation (two cores) of a noisy low-rank matrix, with a small L2 penalty.
target = torch.randn(6, 2) @ torch.randn(2, 5) + 0.01 * torch.randn(6, 5)
core_a = torch.randn(6, 2, requires_grad=True)
core_b = torch.randn(2, 5, requires_grad=True)


def loss_function(a, b):
    fit = ((a @ b - target) ** 2).mean()
    reg = 1e-3 * (a.pow(2).sum() + b.pow(2).sum())
    return fit, reg


losses = optimize([core_a, core_b], loss_function, tol=1e-6, max_iter=6, print_freq=1)
