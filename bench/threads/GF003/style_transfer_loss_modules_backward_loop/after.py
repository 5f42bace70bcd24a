# Neural style transfer in the old tutorial's shape: StyleLoss / ContentLoss
# modules are spliced into one nn.Sequential, store self.loss in forward(), and
# expose a backward() method; the optimization loop calls backward() on every
# loss module after a single forward of the input image.
import torch
import torch.nn as nn

torch.manual_seed(0)


class ContentLoss(nn.Module):
    def __init__(self, target, weight):
        super().__init__()
        self.target = target.detach() * weight
        self.weight = weight
        self.criterion = nn.MSELoss()

    def forward(self, input):
        self.loss = self.criterion(input * self.weight, self.target)
        self.output = input
        return self.output

    def backward(self):
        self.loss.backward()
        return self.loss


class GramMatrix(nn.Module):
    def forward(self, input):
        a, b, c, d = input.size()
        features = input.view(a * b, c * d)
        G = torch.mm(features, features.t())
        return G.div(a * b * c * d)


class StyleLoss(nn.Module):
    def __init__(self, target, weight):
        super().__init__()
        self.target = target.detach() * weight
        self.weight = weight
        self.gram = GramMatrix()
        self.criterion = nn.MSELoss()

    def forward(self, input):
        self.output = input.clone()
        self.G = self.gram(input) * self.weight
        self.loss = self.criterion(self.G, self.target)
        return self.output

    def backward(self):
        self.loss.backward(retain_graph=True)
        return self.loss


def get_style_model_and_losses(cnn, style_img, content_img, style_weight=1000, content_weight=1,
                               content_layers=("conv_3",), style_layers=("conv_1", "conv_2")):
    content_losses = []
    style_losses = []
    model = nn.Sequential()
    gram = GramMatrix()
    i = 1
    for layer in cnn:
        if isinstance(layer, nn.Conv2d):
            name = "conv_" + str(i)
            model.add_module(name, layer)
            if name in content_layers:
                target = model(content_img).detach()
                content_loss = ContentLoss(target, content_weight)
                model.add_module("content_loss_" + str(i), content_loss)
                content_losses.append(content_loss)
            if name in style_layers:
                target_feature = model(style_img).detach()
                target_feature_gram = gram(target_feature)
                style_loss = StyleLoss(target_feature_gram, style_weight)
                model.add_module("style_loss_" + str(i), style_loss)
                style_losses.append(style_loss)
        if isinstance(layer, nn.ReLU):
            name = "relu_" + str(i)
            model.add_module(name, layer)
            i += 1
    return model, style_losses, content_losses


cnn = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                    nn.Conv2d(6, 8, 3, padding=1), nn.ReLU(),
                    nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
for p in cnn.parameters():
    p.requires_grad = False

style_img = torch.rand(1, 3, 12, 12)
content_img = torch.rand(1, 3, 12, 12)
input_img = torch.rand(1, 3, 12, 12)

model, style_losses, content_losses = get_style_model_and_losses(cnn, style_img, content_img)
input_param = nn.Parameter(input_img.data)
optimizer = torch.optim.Adam([input_param], lr=0.01)

for run in range(5):
    optimizer.zero_grad()
    model(input_param)
    style_score = 0
    content_score = 0
    for sl in style_losses:
        style_score += sl.backward()
    for cl in content_losses:
        content_score += cl.backward()
    optimizer.step()
    with torch.no_grad():
        input_param.clamp_(0, 1)
    print(f"run {run} Style Loss {style_score.item():.4f} Content Loss {content_score.item():.4f}")

print(f"checksum {input_param.sum().item():.4f}")
