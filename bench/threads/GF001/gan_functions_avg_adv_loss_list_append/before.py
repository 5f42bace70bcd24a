# Vocoder GAN training function (multi-scale discriminator, STFT-style generator loss);
# per-step logging lists are averaged for the progress line.
import torch
import torch.nn as nn

torch.manual_seed(0)

SEGMENT = 32
LAMBDA_ADV = 2.5
FEAT_MATCH = 10.0
REP_DISCRIMINATOR = 1
DISCRIMINATOR_TRAIN_START_STEPS = 0


class Generator(nn.Module):
    def __init__(self, n_mel=8):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(n_mel, 24), nn.LeakyReLU(0.2), nn.Linear(24, SEGMENT), nn.Tanh())

    def forward(self, mel):
        return self.net(mel.mean(dim=2)).unsqueeze(1)


class ScaleDiscriminator(nn.Module):
    def __init__(self, length):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(length, 16), nn.Linear(16, 8)])
        self.out = nn.Linear(8, 1)

    def forward(self, audio):
        feats = []
        x = audio.squeeze(1)
        for layer in self.layers:
            x = nn.functional.leaky_relu(layer(x), 0.2)
            feats.append(x)
        return feats, self.out(x)


class MultiScaleDiscriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.discriminators = nn.ModuleList([ScaleDiscriminator(SEGMENT), ScaleDiscriminator(SEGMENT // 2)])
        self.pool = nn.AvgPool1d(2)

    def forward(self, audio):
        results = []
        for i, disc in enumerate(self.discriminators):
            if i > 0:
                audio = self.pool(audio)
            results.append(disc(audio))
        return results


def stft_loss(fake, real):
    fake_mag = torch.fft.rfft(fake).abs()
    real_mag = torch.fft.rfft(real).abs()
    sc_loss = torch.norm(real_mag - fake_mag) / torch.norm(real_mag)
    mag_loss = nn.functional.l1_loss(torch.log(fake_mag + 1e-5), torch.log(real_mag + 1e-5))
    return sc_loss, mag_loss


def train(model_g, model_d, optim_g, optim_d, trainloader, epochs):
    criterion = nn.MSELoss()
    step = 0
    model_g.train()
    model_d.train()
    for epoch in range(epochs):
        avg_g_loss = []
        avg_d_loss = []
        avg_adv_loss = []
        for (melG, audioG), (melD, audioD) in trainloader:
            # generator
            optim_g.zero_grad()
            fake_audio = model_g(melG)[:, :, :SEGMENT]
            sc_loss, mag_loss = stft_loss(fake_audio.squeeze(1), audioG.squeeze(1))
            loss_g = sc_loss + mag_loss

            adv_loss = 0.0
            if step >= DISCRIMINATOR_TRAIN_START_STEPS:
                disc_real = model_d(audioG)
                disc_fake = model_d(fake_audio)
                for feats_fake, score_fake in disc_fake:
                    adv_loss += criterion(score_fake, torch.ones_like(score_fake))
                adv_loss = adv_loss / len(disc_fake)
                for (feats_fake, score_fake), (feats_real, _) in zip(disc_fake, disc_real):
                    for feat_f, feat_r in zip(feats_fake, feats_real):
                        adv_loss += FEAT_MATCH * torch.mean(torch.abs(feat_f - feat_r))
                loss_g += LAMBDA_ADV * adv_loss

            loss_g.backward()
            optim_g.step()

            # discriminator
            loss_d_avg = 0.0
            if step >= DISCRIMINATOR_TRAIN_START_STEPS:
                fake_audio = model_g(melD)[:, :, :SEGMENT]
                fake_audio = fake_audio.detach()
                loss_d_sum = 0.0
                for _ in range(REP_DISCRIMINATOR):
                    optim_d.zero_grad()
                    disc_fake = model_d(fake_audio)
                    disc_real = model_d(audioD)
                    loss_d_real = 0.0
                    loss_d_fake = 0.0
                    for (_, score_fake), (_, score_real) in zip(disc_fake, disc_real):
                        loss_d_real += criterion(score_real, torch.ones_like(score_real))
                        loss_d_fake += criterion(score_fake, torch.zeros_like(score_fake))
                    loss_d = loss_d_real / len(disc_real) + loss_d_fake / len(disc_fake)
                    loss_d.backward()
                    optim_d.step()
                    loss_d_sum += loss_d
                loss_d_avg = loss_d_sum / REP_DISCRIMINATOR
                loss_d_avg = loss_d_avg.item()

            step += 1
            # logging
            loss_g = loss_g.item()
            avg_g_loss.append(loss_g)
            avg_d_loss.append(loss_d_avg)
            avg_adv_loss.append(adv_loss)
            print("Avg : g %.04f d %.04f ad %.04f| step %d" % (
                sum(avg_g_loss) / len(avg_g_loss),
                sum(avg_d_loss) / len(avg_d_loss),
                sum(avg_adv_loss) / len(avg_adv_loss),
                step))
    return avg_g_loss, avg_d_loss, avg_adv_loss


model_g = Generator()
model_d = MultiScaleDiscriminator()
optim_g = torch.optim.Adam(model_g.parameters(), lr=1e-3, betas=(0.5, 0.9))
optim_d = torch.optim.Adam(model_d.parameters(), lr=1e-3, betas=(0.5, 0.9))
trainloader = [
    ((torch.randn(4, 8, 6), torch.randn(4, 1, SEGMENT).tanh()), (torch.randn(4, 8, 6), torch.randn(4, 1, SEGMENT).tanh()))
    for _ in range(3)
]

logs = train(model_g, model_d, optim_g, optim_d, trainloader, epochs=2)
print("checksum G %.4f D %.4f" % (
    sum(p.sum().item() for p in model_g.parameters()),
    sum(p.sum().item() for p in model_d.parameters())))
