import torch
import torch.nn as nn
from torch.distributions.normal import Normal

torch.manual_seed(0)


class PointEnv:
    """Move a point on a line toward 0; reward is minus the distance after the move."""

    def reset(self):
        self.pos = torch.rand(1) * 4 - 2
        self.t = 0
        return self.pos.clone()

    def step(self, action):
        self.pos = self.pos + action.clamp(-1, 1)
        self.t += 1
        reward = -self.pos.abs().item()
        return self.pos.clone(), reward, self.t >= 5


class Policy_Network(nn.Module):
    def __init__(self, obs_space_dims: int, action_space_dims: int):
        super().__init__()
        self.shared_net = nn.Sequential(nn.Linear(obs_space_dims, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh())
        self.policy_mean_net = nn.Sequential(nn.Linear(16, action_space_dims))
        self.policy_stddev_net = nn.Sequential(nn.Linear(16, action_space_dims))

    def forward(self, x: torch.Tensor):
        shared_features = self.shared_net(x.float())
        action_means = self.policy_mean_net(shared_features)
        action_stddevs = torch.log(1 + torch.exp(self.policy_stddev_net(shared_features)))
        return action_means, action_stddevs


class REINFORCE:
    def __init__(self, obs_space_dims: int, action_space_dims: int):
        self.learning_rate = 1e-3
        self.gamma = 0.99
        self.eps = 1e-6
        self.probs = []  # log probabilities of the sampled actions, this episode
        self.rewards = []  # rewards of this episode
        self.net = Policy_Network(obs_space_dims, action_space_dims)
        self.optimizer = torch.optim.AdamW(self.net.parameters(), lr=self.learning_rate)

    def sample_action(self, state: torch.Tensor) -> torch.Tensor:
        action_means, action_stddevs = self.net(state)
        distrib = Normal(action_means[0] + self.eps, action_stddevs[0] + self.eps)
        action = distrib.sample()
        self.probs.append(distrib.log_prob(action))
        return action

    def update(self):
        running_g = 0
        gs = []
        for R in self.rewards[::-1]:
            running_g = R + self.gamma * running_g
            gs.insert(0, running_g)
        deltas = torch.tensor(gs)
        log_probs = torch.stack(self.probs)
        loss = -torch.sum(log_probs * deltas)

        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()

        # empty the episode buffers before the next episode
        self.probs = []
        self.rewards = []
        return loss.item()


env = PointEnv()
agent = REINFORCE(obs_space_dims=1, action_space_dims=1)
for episode in range(4):
    obs = env.reset()
    done = False
    while not done:
        action = agent.sample_action(obs.unsqueeze(0))
        obs, reward, done = env.step(action)
        agent.rewards.append(reward)
    episode_return = sum(agent.rewards)
    loss = agent.update()
    print(f"episode {episode} return {episode_return:.4f} loss {loss:.4f}")

print(f"checksum {sum(p.sum().item() for p in agent.net.parameters()):.4f}")
