import torch
import torch.nn as nn
from torch.distributions import Categorical

torch.manual_seed(0)


class ToyVecEnv:
    """n_envs copies of a one-step guessing game: act 1 when the first feature is positive."""

    def __init__(self, n_envs, obs_dim):
        self.n_envs, self.obs_dim = n_envs, obs_dim
        self.obs = torch.randn(n_envs, obs_dim)

    def step(self, actions):
        rewards = (actions == (self.obs[:, 0] > 0).long()).float()
        self.obs = torch.randn(self.n_envs, self.obs_dim)
        return self.obs, rewards


class LSTMPolicy(nn.Module):
    def __init__(self, obs_dim, hidden_size, n_actions):
        super().__init__()
        self.hidden_size = hidden_size
        self.encoder = nn.Linear(obs_dim, hidden_size)
        self.lstm = nn.LSTM(hidden_size, hidden_size)
        self.actor = nn.Linear(hidden_size, n_actions)
        self.critic = nn.Linear(hidden_size, 1)

    def initial_state(self, n_envs):
        zeros = torch.zeros(1, n_envs, self.hidden_size)
        return zeros, zeros.clone()

    def forward(self, obs, lstm_state):
        # obs: (time, envs, obs_dim)
        hidden, (lstm_h, lstm_c) = self.lstm(torch.relu(self.encoder(obs)), lstm_state)
        return self.actor(hidden), self.critic(hidden).squeeze(-1), (lstm_h, lstm_c)


class Experience:
    def __init__(self, segment_length):
        self.segment_length = segment_length
        self.obs, self.actions, self.logprobs, self.values, self.rewards = [], [], [], [], []
        self.lstm_h, self.lstm_c = [], []

    def store(self, obs, actions, logprobs, values, rewards, lstm_h, lstm_c):
        self.obs.append(obs)
        self.actions.append(actions)
        self.logprobs.append(logprobs)
        self.values.append(values)
        self.rewards.append(rewards)
        self.lstm_h.append(lstm_h)
        self.lstm_c.append(lstm_c)

    def full(self):
        return len(self.obs) == self.segment_length


class PPOTrainer:
    def __init__(self, policy, env, segment_length=4, update_epochs=2, clip=0.2, gamma=0.9):
        self.policy = policy
        self.env = env
        self.segment_length = segment_length
        self.update_epochs = update_epochs
        self.clip = clip
        self.gamma = gamma
        self.optimizer = torch.optim.Adam(policy.parameters(), lr=3e-3)
        self.lstm_state = policy.initial_state(env.n_envs)
        self.experience = Experience(segment_length)

    def rollout(self):
        self.experience = Experience(self.segment_length)
        obs = self.env.obs
        while not self.experience.full():
            logits, value, next_state = self.policy(obs.unsqueeze(0), self.lstm_state)
            dist = Categorical(logits=logits.squeeze(0))
            actions = dist.sample()
            next_obs, rewards = self.env.step(actions)
            self.experience.store(
                obs, actions, dist.log_prob(actions).detach(), value.squeeze(0).detach(), rewards,
                self.lstm_state[0], self.lstm_state[1],
            )
            self.lstm_state = (next_state[0].detach(), next_state[1].detach())
            obs = next_obs
        with torch.no_grad():
            _, last_value, _ = self.policy(obs.unsqueeze(0), self.lstm_state)
        return last_value.squeeze(0)

    def returns(self, last_value):
        ret, out = last_value, []
        for r in reversed(self.experience.rewards):
            ret = r + self.gamma * ret
            out.insert(0, ret)
        return torch.stack(out)

    def train(self):
        last_value = self.rollout()
        exp = self.experience
        returns = self.returns(last_value)
        obs, actions = torch.stack(exp.obs), torch.stack(exp.actions)
        old_logprobs, old_values = torch.stack(exp.logprobs), torch.stack(exp.values)
        advantages = returns - old_values
        for _ in range(self.update_epochs):
            logits, values, _ = self.policy(obs, self.policy.initial_state(self.env.n_envs))
            new_logprobs = Categorical(logits=logits).log_prob(actions)
            ratio = torch.exp(new_logprobs - old_logprobs)
            pg_loss = -torch.min(ratio * advantages, ratio.clamp(1 - self.clip, 1 + self.clip) * advantages).mean()
            v_loss = 0.5 * (returns - values).pow(2).mean()
            loss = pg_loss + v_loss
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()
        return pg_loss.item(), v_loss.item(), torch.stack(exp.rewards).mean().item()


policy = LSTMPolicy(obs_dim=4, hidden_size=16, n_actions=2)
trainer = PPOTrainer(policy, ToyVecEnv(n_envs=6, obs_dim=4))
for update in range(3):
    pg, v, reward = trainer.train()
    print(f"update {update} pg_loss {pg:.4f} v_loss {v:.4f} mean reward {reward:.4f}")
print(f"checksum {sum(p.sum().item() for p in policy.parameters()):.4f}")
