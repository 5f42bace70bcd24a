# Soft actor-critic agent: twin Q networks, a Gaussian policy, automatic entropy tuning, and an
# update_params() helper that does zero_grad / backward / step for one network.
import torch
import torch.nn as nn

torch.manual_seed(0)


def update_params(optim, network, loss, grad_clip=None):
    optim.zero_grad()
    loss.backward()
    if grad_clip is not None:
        torch.nn.utils.clip_grad_norm_(network.parameters(), grad_clip)
    optim.step()


class QNetwork(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim + act_dim, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, states, actions):
        return self.net(torch.cat([states, actions], dim=-1))


class TwinnedQNetwork(nn.Module):
    def __init__(self, obs_dim, act_dim):
        super().__init__()
        self.Q1 = QNetwork(obs_dim, act_dim)
        self.Q2 = QNetwork(obs_dim, act_dim)

    def forward(self, states, actions):
        return self.Q1(states, actions), self.Q2(states, actions)


class GaussianPolicy(nn.Module):
    def __init__(self, obs_dim, act_dim, hidden=32):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, 2 * act_dim))

    def sample(self, states):
        mean, log_std = self.net(states).chunk(2, dim=-1)
        normal = torch.distributions.Normal(mean, log_std.clamp(-20, 2).exp())
        xs = normal.rsample()
        actions = torch.tanh(xs)
        log_probs = normal.log_prob(xs) - torch.log(1 - actions.pow(2) + 1e-6)
        entropies = -log_probs.sum(dim=1, keepdim=True)
        return actions, entropies, torch.tanh(mean)


class SacAgent:
    def __init__(self, obs_dim=4, act_dim=2, gamma=0.99, tau=0.005, lr=3e-4):
        self.policy = GaussianPolicy(obs_dim, act_dim)
        self.critic = TwinnedQNetwork(obs_dim, act_dim)
        self.critic_target = TwinnedQNetwork(obs_dim, act_dim)
        self.critic_target.load_state_dict(self.critic.state_dict())
        self.policy_optim = torch.optim.Adam(self.policy.parameters(), lr=lr)
        self.q1_optim = torch.optim.Adam(self.critic.Q1.parameters(), lr=lr)
        self.q2_optim = torch.optim.Adam(self.critic.Q2.parameters(), lr=lr)
        self.target_entropy = -float(act_dim)
        self.log_alpha = torch.zeros(1, requires_grad=True)
        self.alpha = self.log_alpha.exp()
        self.alpha_optim = torch.optim.Adam([self.log_alpha], lr=lr)
        self.gamma, self.tau = gamma, tau
        self.grad_clip = None
        self.learning_steps = 0

    def calc_critic_loss(self, batch, weights):
        states, actions, rewards, next_states, dones = batch
        curr_q1, curr_q2 = self.critic(states, actions)
        with torch.no_grad():
            next_actions, next_entropies, _ = self.policy.sample(next_states)
            next_q1, next_q2 = self.critic_target(next_states, next_actions)
            next_q = torch.min(next_q1, next_q2) + self.alpha * next_entropies
            target_q = rewards + (1.0 - dones) * self.gamma * next_q
        errors = torch.abs(curr_q1.detach() - target_q)
        q1_loss = torch.mean((curr_q1 - target_q).pow(2) * weights)
        q2_loss = torch.mean((curr_q2 - target_q).pow(2) * weights)
        return q1_loss, q2_loss, errors, curr_q1.detach().mean().item(), curr_q2.detach().mean().item()

    def calc_policy_loss(self, batch, weights):
        states = batch[0]
        sampled_action, entropy, _ = self.policy.sample(states)
        q1, q2 = self.critic(states, sampled_action)
        q = torch.min(q1, q2)
        policy_loss = torch.mean((-q - self.alpha * entropy) * weights)
        return policy_loss, entropy

    def calc_entropy_loss(self, entropy, weights):
        return -torch.mean(self.log_alpha * (self.target_entropy - entropy).detach() * weights)

    def learn(self, batch):
        self.learning_steps += 1
        weights = 1.0
        q1_loss, q2_loss, errors, mean_q1, mean_q2 = self.calc_critic_loss(batch, weights)
        update_params(self.q1_optim, self.critic.Q1, q1_loss, self.grad_clip)
        update_params(self.q2_optim, self.critic.Q2, q2_loss, self.grad_clip)
        policy_loss, entropies = self.calc_policy_loss(batch, weights)
        update_params(self.policy_optim, self.policy, policy_loss, self.grad_clip)
        entropy_loss = self.calc_entropy_loss(entropies, weights)
        update_params(self.alpha_optim, None, entropy_loss)
        self.alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            for t, s in zip(self.critic_target.parameters(), self.critic.parameters()):
                t.mul_(1.0 - self.tau).add_(s, alpha=self.tau)
        return q1_loss.item(), policy_loss.item()


def sample_batch(batch_size=8, obs_dim=4, act_dim=2):
    return (torch.randn(batch_size, obs_dim), torch.rand(batch_size, act_dim) * 2 - 1,
            torch.randn(batch_size, 1), torch.randn(batch_size, obs_dim),
            (torch.rand(batch_size, 1) < 0.1).float())


agent = SacAgent()
for step in range(4):
    q1_loss, policy_loss = agent.learn(sample_batch())
    print(f"step {step} q1_loss {q1_loss:.4f} policy_loss {policy_loss:.4f}")

print(f"checksum {sum(p.sum().item() for p in agent.policy.parameters()) + sum(p.sum().item() for p in agent.critic.parameters()):.4f}")
