# CTGAN-style synthesizer class: in each critic step the gradient penalty
# (built with autograd.grad(create_graph=True)) and the Wasserstein loss both
# reach the generator output `fake_cat`; the penalty is backpropagated with
# retain_graph=True, then loss_d, then optimizerD steps.
import torch
import torch.nn as nn

torch.manual_seed(0)


class Discriminator(nn.Module):
    def __init__(self, input_dim, dis_dim):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(input_dim, dis_dim), nn.LeakyReLU(0.2),
                                 nn.Linear(dis_dim, dis_dim), nn.LeakyReLU(0.2),
                                 nn.Linear(dis_dim, 1))

    def calc_gradient_penalty(self, real_data, fake_data, lambda_=10):
        alpha = torch.rand(real_data.size(0), 1)
        interpolates = alpha * real_data + ((1 - alpha) * fake_data)
        disc_interpolates = self(interpolates)
        gradients = torch.autograd.grad(
            outputs=disc_interpolates, inputs=interpolates,
            grad_outputs=torch.ones(disc_interpolates.size()),
            create_graph=True, retain_graph=True, only_inputs=True)[0]
        return ((gradients.norm(2, dim=1) - 1) ** 2).mean() * lambda_

    def forward(self, x):
        return self.seq(x)


class Generator(nn.Module):
    def __init__(self, embedding_dim, gen_dim, data_dim):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(embedding_dim, gen_dim), nn.ReLU(), nn.Linear(gen_dim, data_dim))

    def forward(self, x):
        return self.seq(x)


class CTGANSynthesizer:
    def __init__(self, embedding_dim=8, gen_dim=32, dis_dim=32, batch_size=16):
        self.embedding_dim = embedding_dim
        self.gen_dim = gen_dim
        self.dis_dim = dis_dim
        self.batch_size = batch_size
        self.trained_epoches = 0

    def _apply_activate(self, data):
        return torch.tanh(data)

    def fit(self, train_data, epochs=2, n_discriminator=2):
        data_dim = train_data.size(1)
        self.generator = Generator(self.embedding_dim, self.gen_dim, data_dim)
        self.discriminator = Discriminator(data_dim, self.dis_dim)
        self.optimizerG = torch.optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
        self.optimizerD = torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.9))

        mean = torch.zeros(self.batch_size, self.embedding_dim)
        std = mean + 1
        steps_per_epoch = max(len(train_data) // self.batch_size, 1)
        for i in range(epochs):
            self.trained_epoches += 1
            for id_ in range(steps_per_epoch):
                for n in range(n_discriminator):
                    fakez = torch.normal(mean=mean, std=std)
                    idx = torch.randint(0, len(train_data), (self.batch_size,))
                    real = train_data[idx]

                    fake = self.generator(fakez)
                    fakeact = self._apply_activate(fake)
                    real_cat = real
                    fake_cat = fakeact

                    y_fake = self.discriminator(fake_cat)
                    y_real = self.discriminator(real_cat)

                    pen = self.discriminator.calc_gradient_penalty(real_cat, fake_cat)
                    loss_d = -(torch.mean(y_real) - torch.mean(y_fake))

                    self.optimizerD.zero_grad()
                    pen.backward(retain_graph=True)
                    loss_d.backward()
                    self.optimizerD.step()

                fakez = torch.normal(mean=mean, std=std)
                fake = self.generator(fakez)
                fakeact = self._apply_activate(fake)
                y_fake = self.discriminator(fakeact)
                loss_g = -torch.mean(y_fake)

                self.optimizerG.zero_grad()
                loss_g.backward()
                self.optimizerG.step()

            print(f"Epoch {self.trained_epoches}, Loss G: {loss_g.item():.4f}, Loss D: {loss_d.item():.4f}")


train_data = torch.tanh(torch.randn(64, 6))
synth = CTGANSynthesizer()
synth.fit(train_data, epochs=2)
print(f"checksum {sum(p.sum().item() for p in synth.generator.parameters()) + sum(p.sum().item() for p in synth.discriminator.parameters()):.4f}")
