# Actor-critic tutorial shape: ActorCritic wraps two separate MLPs, train()
# collects one episode, update_policy() calls policy_loss.backward() and
# value_loss.backward() before a single optimizer.step().
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.distributions as distributions

torch.manual_seed(0)


class ToyEnv:
    def __init__(self, horizon=8):
        self.horizon = horizon

    def reset(self):
        self.t = 0
        self.state = torch.randn(4)
        return self.state

    def step(self, action):
        self.t += 1
        reward = 1.0 if action == int(self.state[0] > 0) else 0.0
        self.state = torch.randn(4)
        return self.state, reward, self.t >= self.horizon


class MLP(nn.Module):
    def __init__(self, input_dim, hidden_dim, output_dim):
        super().__init__()
        self.fc_1 = nn.Linear(input_dim, hidden_dim)
        self.fc_2 = nn.Linear(hidden_dim, output_dim)

    def forward(self, x):
        return self.fc_2(F.relu(self.fc_1(x)))


class ActorCritic(nn.Module):
    def __init__(self, actor, critic):
        super().__init__()
        self.actor = actor
        self.critic = critic

    def forward(self, state):
        return self.actor(state), self.critic(state)


def calculate_returns(rewards, discount_factor, normalize=True):
    returns = []
    R = 0
    for r in reversed(rewards):
        R = r + R * discount_factor
        returns.insert(0, R)
    returns = torch.tensor(returns)
    if normalize:
        returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    return returns


def update_policy(returns, log_prob_actions, values, optimizer):
    returns = returns.detach()
    policy_loss = -((returns - values.detach()) * log_prob_actions).sum()
    value_loss = F.smooth_l1_loss(values, returns).sum()
    optimizer.zero_grad()
    policy_loss.backward()
    value_loss.backward()
    optimizer.step()
    return policy_loss.item(), value_loss.item()


def train(env, policy, optimizer, discount_factor):
    policy.train()
    log_prob_actions, values, rewards = [], [], []
    done = False
    episode_reward = 0
    state = env.reset()
    while not done:
        action_pred, value_pred = policy(state.unsqueeze(0))
        action_prob = F.softmax(action_pred, dim=-1)
        dist = distributions.Categorical(action_prob)
        action = dist.sample()
        log_prob_actions.append(dist.log_prob(action))
        values.append(value_pred)
        state, reward, done = env.step(action.item())
        rewards.append(reward)
        episode_reward += reward
    log_prob_actions = torch.cat(log_prob_actions)
    values = torch.cat(values).squeeze(-1)
    returns = calculate_returns(rewards, discount_factor)
    policy_loss, value_loss = update_policy(returns, log_prob_actions, values, optimizer)
    return policy_loss, value_loss, episode_reward


env = ToyEnv()
policy = ActorCritic(MLP(4, 16, 2), MLP(4, 16, 1))
optimizer = torch.optim.Adam(policy.parameters(), lr=0.01)
for episode in range(5):
    policy_loss, value_loss, episode_reward = train(env, policy, optimizer, discount_factor=0.99)
    print(f"episode {episode} policy_loss {policy_loss:.4f} value_loss {value_loss:.4f} reward {episode_reward:.1f}")

print(f"checksum {sum(p.sum().item() for p in policy.parameters()):.4f}")
