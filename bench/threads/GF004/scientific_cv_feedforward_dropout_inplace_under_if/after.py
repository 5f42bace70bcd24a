# Data-driven collective variable (Deep-TDA style): a feed-forward net built from options maps
# descriptors of two metastable states onto Gaussians at target centres.
import torch

torch.manual_seed(0)


def parse_nn_options(option, n_layers, last_layer_activation):
    if isinstance(option, list):
        return option
    values = [option] * n_layers
    if not last_layer_activation:
        values[-1] = None
    return values


class FeedForward(torch.nn.Module):
    def __init__(self, layers, activation="relu", dropout=None, last_layer_activation=False):
        super().__init__()
        n_layers = len(layers) - 1
        activation_list = parse_nn_options(activation, n_layers, last_layer_activation)
        dropout_list = parse_nn_options(dropout, n_layers, last_layer_activation)
        modules = []
        for i in range(n_layers):
            modules.append(torch.nn.Linear(layers[i], layers[i + 1]))
            activ, drop = activation_list[i], dropout_list[i]
            if activ is not None:
                modules.append(torch.nn.ReLU() if activ == "relu" else torch.nn.Tanh())
            if drop is not None:
                modules.append(torch.nn.Dropout(p=drop, inplace=False))
        self.nn = torch.nn.Sequential(*modules)

    def forward(self, x):
        return self.nn(x)


class DeepTDA(torch.nn.Module):
    def __init__(self, n_states, target_centers, target_sigmas, layers, options=None):
        super().__init__()
        options = options or {}
        self.n_states = n_states
        self.target_centers = torch.tensor(target_centers)
        self.target_sigmas = torch.tensor(target_sigmas)
        self.nn = FeedForward(layers, **options.get("nn", {}))

    def forward(self, x):
        return self.nn(x)


def tda_loss(cv, labels, target_centers, target_sigmas):
    loss = 0.0
    for state in range(len(target_centers)):
        cv_state = cv[labels == state]
        mu, sigma = cv_state.mean(), cv_state.std()
        loss = loss + (mu - target_centers[state]) ** 2 + 10 * (sigma - target_sigmas[state]) ** 2
    return loss


def fit(model, loader, optimizer, epochs):
    for epoch in range(epochs):
        for descriptors, labels in loader:
            cv = model(descriptors).squeeze(-1)
            loss = tda_loss(cv, labels, model.target_centers, model.target_sigmas)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print(f"epoch {epoch} tda_loss {loss.item():.4f}")


state_a = torch.randn(32, 6) + 1.0
state_b = torch.randn(32, 6) - 1.0
descriptors = torch.cat([state_a, state_b])
labels = torch.cat([torch.zeros(32), torch.ones(32)]).long()
loader = [(descriptors[idx], labels[idx]) for idx in torch.randperm(64).split(16)]

nn_layers = [6, 12, 8, 1]
model = DeepTDA(n_states=2, target_centers=[-3.0, 3.0], target_sigmas=[0.2, 0.2],
                layers=nn_layers, options={"nn": {"dropout": [0.1, 0.1, None]}})
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
fit(model, loader, optimizer, epochs=2)
print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
