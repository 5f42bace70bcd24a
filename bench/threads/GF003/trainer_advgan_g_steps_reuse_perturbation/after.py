# AdvGAN attack trainer: train_batch() optimizes D for n_steps_D and then G
# for n_steps_G, but the G loop reuses the perturbation / adv_images computed
# in the D loop.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Generator(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, 32), nn.ReLU(), nn.Linear(32, n_features), nn.Tanh())

    def forward(self, x):
        return self.net(x)


class Discriminator(nn.Module):
    def __init__(self, n_features):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_features, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, x):
        logits = self.net(x)
        return logits, torch.sigmoid(logits)


class AdvGAN_Attack:
    def __init__(self, model, n_labels, n_features, lr, l_inf_bound, alpha, beta, gamma, kappa, c,
                 n_steps_D, n_steps_G):
        self.model = model
        self.n_labels = n_labels
        self.l_inf_bound = l_inf_bound
        self.alpha, self.beta, self.gamma, self.kappa, self.c = alpha, beta, gamma, kappa, c
        self.n_steps_D = n_steps_D
        self.n_steps_G = n_steps_G
        self.G = Generator(n_features)
        self.D = Discriminator(n_features)
        self.optimizer_G = torch.optim.Adam(self.G.parameters(), lr=lr)
        self.optimizer_D = torch.optim.Adam(self.D.parameters(), lr=lr)

    def train_batch(self, x, labels):
        # optimize D
        for i in range(self.n_steps_D):
            perturbation = self.G(x)
            adv_images = torch.clamp(perturbation, -self.l_inf_bound, self.l_inf_bound) + x
            adv_images = torch.clamp(adv_images, 0, 1)

            self.D.zero_grad()
            logits_real, pred_real = self.D(x)
            logits_fake, pred_fake = self.D(adv_images.detach())
            loss_D_real = F.mse_loss(pred_real, torch.ones_like(pred_real))
            loss_D_fake = F.mse_loss(pred_fake, torch.zeros_like(pred_fake))
            loss_D = loss_D_fake + loss_D_real
            loss_D.backward()
            self.optimizer_D.step()

        # optimize G
        for i in range(self.n_steps_G):
            self.G.zero_grad()

            perturbation = self.G(x)
            adv_images = torch.clamp(perturbation, -self.l_inf_bound, self.l_inf_bound) + x
            adv_images = torch.clamp(adv_images, 0, 1)

            perturbation_norm = torch.mean(torch.norm(perturbation.view(perturbation.shape[0], -1), 2, dim=1))
            loss_hinge = torch.max(torch.zeros(1), perturbation_norm - self.c)

            logits_model = self.model(adv_images)
            probs_model = F.softmax(logits_model, dim=1)
            onehot_labels = torch.eye(self.n_labels)[labels]
            real_class_prob = torch.sum(onehot_labels * probs_model, dim=1)
            target_class_prob, _ = torch.max((1 - onehot_labels) * probs_model - onehot_labels * 10000, dim=1)
            loss_adv = torch.max(real_class_prob - target_class_prob, self.kappa * torch.ones_like(target_class_prob))
            loss_adv = torch.sum(loss_adv)

            logits_fake, pred_fake = self.D(adv_images)
            loss_G_gan = F.mse_loss(pred_fake, torch.ones_like(pred_fake))

            loss_G = self.gamma * loss_adv + self.alpha * loss_G_gan + self.beta * loss_hinge
            loss_G.backward()
            self.optimizer_G.step()

        return loss_D.item(), loss_G.item(), loss_G_gan.item(), loss_hinge.item(), loss_adv.item()

    def train(self, train_dataloader, epochs):
        for epoch in range(1, epochs + 1):
            loss_D_sum, loss_G_sum = 0, 0
            for i, (images, labels) in enumerate(train_dataloader):
                loss_D_batch, loss_G_batch, _, _, _ = self.train_batch(images, labels)
                loss_D_sum += loss_D_batch
                loss_G_sum += loss_G_batch
            n = len(train_dataloader)
            print(f"Epoch {epoch}: Loss D: {loss_D_sum / n:.4f}, Loss G: {loss_G_sum / n:.4f}")


target_model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
for p in target_model.parameters():
    p.requires_grad = False
target_model.eval()

images = torch.rand(24, 12)
labels = torch.randint(0, 4, (24,))
train_dataloader = [(images[k:k + 8], labels[k:k + 8]) for k in range(0, 24, 8)]

advGAN = AdvGAN_Attack(target_model, n_labels=4, n_features=12, lr=1e-3, l_inf_bound=0.3, alpha=1.0,
                       beta=1.0, gamma=1.0, kappa=0.0, c=0.1, n_steps_D=1, n_steps_G=2)
advGAN.train(train_dataloader, epochs=2)
print(f"checksum {sum(p.sum().item() for p in advGAN.G.parameters()) + sum(p.sum().item() for p in advGAN.D.parameters()):.4f}")
