# Parallel advantage actor-critic (PAAC) trainer: a Master class runs n-step rollouts over
# vectorised environments; get_loss returns (loss_p, double_loss_v, loss) and the first two are
# summed between log steps for the printed averages.
import torch
import torch.nn as nn

torch.manual_seed(0)

N_E, T_MAX, N_MAX, LOG_STEP = 4, 5, 4, 2
GAMMA, BETA, EPSILON, CLIP = 0.99, 0.01, 1e-30, 40.0
STATE_DIM, NUM_ACTIONS = 6, 3


class PAACNet(nn.Module):
    def __init__(self, num_actions):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(STATE_DIM, 16), nn.ReLU())
        self.policy = nn.Linear(16, num_actions)
        self.v = nn.Linear(16, 1)

    def forward(self, x):
        h = self.body(x)
        return torch.softmax(self.policy(h), dim=1), self.v(h)

    def value(self, x):
        return self.v(self.body(x))

    @staticmethod
    def log_and_negated_entropy(x, epsilon):
        log_x = (x + epsilon).log()
        return log_x, (x * log_x).sum(1).sum(0)

    @staticmethod
    def get_loss(q_values, values, log_a):
        diff = q_values - values
        loss_p = -(diff.detach() * log_a).mean(0)
        double_loss_v = diff.pow(2).mean(0)
        loss = loss_p + 0.25 * double_loss_v
        return loss_p, double_loss_v, loss


class VecEnv:
    """Synthetic stand-in for the worker processes: N_E environments stepped together."""

    def __init__(self):
        self.gen = torch.Generator().manual_seed(1)
        self.t = 0

    def reset(self):
        return torch.randn(N_E, STATE_DIM, generator=self.gen)

    def step(self, actions):
        self.t += 1
        obs = torch.randn(N_E, STATE_DIM, generator=self.gen)
        rewards = (actions.squeeze(1) == self.t % NUM_ACTIONS).float()
        terminals = torch.full((N_E,), float(self.t % 7 == 0))
        return obs, rewards, terminals


class Master:
    def __init__(self):
        self.paac = PAACNet(NUM_ACTIONS)
        self.optim = torch.optim.RMSprop(self.paac.parameters(), 0.0007, 0.99, 0.1)
        self.env = VecEnv()
        self.history = []

    def train(self):
        rewards = torch.zeros(T_MAX, N_E)
        terminals = torch.zeros(T_MAX, N_E)
        q_values = torch.zeros(T_MAX + 1, N_E)
        # sum of loss_p & double_loss_v, printed & flushed at every log step
        loss_p_sum = double_loss_v_sum = entropy_sum = 0

        self.paac.train()
        states = self.env.reset()

        for n in range(N_MAX):
            values = torch.zeros(T_MAX, N_E)
            log_a = torch.zeros(T_MAX, N_E)
            negated_entropy_sum = 0

            for t in range(T_MAX):
                paac_p, paac_v = self.paac(states)
                values[t] = paac_v.squeeze(1)
                log_paac_p, negated_h = self.paac.log_and_negated_entropy(paac_p, EPSILON)
                negated_entropy_sum += negated_h
                actions = paac_p.detach().multinomial(1)
                log_a[t] = log_paac_p.gather(1, actions).squeeze(1)
                states, rewards[t], terminals[t] = self.env.step(actions)

            entropy = -negated_entropy_sum / N_E
            entropy_sum += entropy.item()

            # values of new states
            q_values[T_MAX] = self.paac.value(states).detach().squeeze(1)

            loss_sum = 0
            for t in reversed(range(T_MAX)):
                q_values[t] = rewards[t] + (1. - terminals[t]) * GAMMA * q_values[t + 1]
                loss_p, double_loss_v, loss = self.paac.get_loss(q_values[t], values[t], log_a[t])
                loss_sum += loss
                loss_p_sum += loss_p
                double_loss_v_sum += double_loss_v

            # entropy term
            loss_sum -= BETA * entropy

            self.optim.zero_grad()
            loss_sum.backward()
            torch.nn.utils.clip_grad_norm_(self.paac.parameters(), CLIP)
            self.optim.step()

            if n % LOG_STEP == LOG_STEP - 1:
                record = {
                    "iteration": n + 1,
                    "loss_p": loss_p_sum / LOG_STEP / T_MAX,
                    "loss_v": double_loss_v_sum / 2. / LOG_STEP / T_MAX,
                    "entropy": entropy_sum / LOG_STEP,
                }
                self.history.append(record)
                print(f"Iteration {n + 1}: average loss_p {record['loss_p']:.4f} "
                      f"average loss_v {record['loss_v']:.4f} average entropy {record['entropy']:.4f}")
                # flush
                loss_p_sum = double_loss_v_sum = entropy_sum = 0


master = Master()
master.train()
print(f"checksum {sum(p.sum().item() for p in master.paac.parameters()):.4f}")
