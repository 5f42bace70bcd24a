import torch

torch.manual_seed(0)


class AbstractDenseNet(torch.nn.Module):
    def __init__(self, in_features: int, depth: int, width: int):
        super(AbstractDenseNet, self).__init__()
        self._depth = depth
        self._width = width
        self._in_features = in_features
        self._out_features = in_features + width * depth
        self.layers = torch.nn.ModuleList(
            self.get_layer(in_features=in_features + i * width, out_features=width)
            for i in range(depth)
        )

    def get_layer(self, in_features: int, out_features: int) -> torch.nn.Module:
        raise NotImplementedError

    def forward(self, tensor: torch.Tensor) -> torch.Tensor:
        cat_dim = len(tensor.size()) - 1
        for i in range(self._depth):
            cur_out = self.layers[i](tensor)
            tensor = torch.cat([tensor, cur_out], dim=cat_dim)
        return tensor


class DenseMLP(AbstractDenseNet):
    def get_layer(self, in_features: int, out_features: int) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(in_features, out_features), torch.nn.ReLU())


def train(model, head, batches, epochs=2):
    optimizer = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=1e-2)
    for epoch in range(epochs):
        for step, (x, y) in enumerate(batches):
            features = model(x)
            loss = torch.nn.functional.mse_loss(head(features), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            print(f"epoch {epoch} step {step} loss {loss.item():.4f}")


if __name__ == "__main__":
    model = DenseMLP(in_features=8, depth=4, width=6)
    head = torch.nn.Linear(model._out_features, 1)
    batches = [(torch.randn(16, 8), torch.randn(16, 1)) for _ in range(3)]
    train(model, head, batches)
    print(f"checksum {sum(p.sum().item() for p in model.parameters()):.4f}")
