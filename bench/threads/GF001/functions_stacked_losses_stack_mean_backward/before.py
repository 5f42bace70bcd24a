# Stacked-hourglass pose training: the network's calc_loss appends one heatmap loss per stack
# and stacks them; a make_train closure averages the stacked losses and backpropagates them.
import torch
from torch import nn

torch.manual_seed(0)


class HeatmapLoss(nn.Module):
    def forward(self, pred, gt):
        return ((pred - gt) ** 2).mean(dim=3).mean(dim=2).mean(dim=1)


class PoseNet(nn.Module):
    def __init__(self, nstack=3, inp_dim=8, oup_dim=4):
        super().__init__()
        self.nstack = nstack
        self.pre = nn.Conv2d(3, inp_dim, 3, padding=1)
        self.hgs = nn.ModuleList([nn.Sequential(nn.Conv2d(inp_dim, inp_dim, 3, padding=1), nn.ReLU()) for _ in range(nstack)])
        self.outs = nn.ModuleList([nn.Conv2d(inp_dim, oup_dim, 1) for _ in range(nstack)])
        self.merge = nn.ModuleList([nn.Conv2d(oup_dim, inp_dim, 1) for _ in range(nstack - 1)])
        self.heatmapLoss = HeatmapLoss()

    def forward(self, imgs):
        x = self.pre(imgs)
        combined_hm_preds = []
        for i in range(self.nstack):
            feature = self.hgs[i](x)
            preds = self.outs[i](feature)
            combined_hm_preds.append(preds)
            if i < self.nstack - 1:
                x = x + self.merge[i](preds)
        return torch.stack(combined_hm_preds, 1)

    def calc_loss(self, combined_hm_preds, heatmaps):
        combined_loss = []
        for i in range(self.nstack):
            combined_loss.append(self.heatmapLoss(combined_hm_preds[0][:, i], heatmaps))
        combined_loss = torch.stack(combined_loss, dim=1)
        return combined_loss


class Trainer(nn.Module):
    """Wrapper that returns the predictions and the loss in training mode."""

    def __init__(self, model, calc_loss):
        super().__init__()
        self.model = model
        self.calc_loss = calc_loss

    def forward(self, imgs, heatmaps):
        combined_hm_preds = [self.model(imgs)]
        loss = self.calc_loss(combined_hm_preds=combined_hm_preds, heatmaps=heatmaps)
        return list(combined_hm_preds) + [loss]


def make_network(config):
    poseNet = PoseNet()
    net = Trainer(poseNet, poseNet.calc_loss)
    optimizer = torch.optim.Adam(net.parameters(), config["learning_rate"])

    def make_train(batch_id, phase, imgs, heatmaps):
        net.train()
        result = net(imgs, heatmaps)
        losses = {name: result[-1] * weight for name, weight in config["loss"]}
        loss = 0
        toprint = f"{batch_id}:"
        for name in losses:
            loss = loss + torch.mean(losses[name])
            toprint += " {} {}".format(name, " ".join(f"{v:.4f}" for v in losses[name].mean(dim=0).tolist()))
        print(toprint)
        if phase == "train":
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return None

    return make_train, net


config = {"learning_rate": 1e-3, "loss": [("combined_hm_loss", 1)]}
train_func, net = make_network(config)
for batch_id in range(4):
    imgs = torch.rand(2, 3, 8, 8)
    heatmaps = torch.rand(2, 4, 8, 8)
    train_func(batch_id, "train", imgs, heatmaps)
print(f"checksum {sum(p.sum().item() for p in net.parameters()):.4f}")
