import torch
from torch import nn


class ActorCritic:
    def __init__(self):
        self.actor = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
        self.critic = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 1))
        self.actor_opt = torch.optim.Adam(self.actor.parameters(), lr=1e-2)
        self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=1e-2)

    def critic_loss(self, obs, act, ret):
        return (self.critic(torch.cat([obs, act], 1)) - ret).pow(2).mean()

    def actor_loss(self, obs):
        return -self.critic(torch.cat([obs, self.actor(obs)], 1)).mean()

    def update(self, obs, act, ret):
        q_loss = self.critic_loss(obs, act, ret)
        pi_loss = self.actor_loss(obs)
        self.critic_opt.zero_grad()
        q_loss.backward()
        self.critic_opt.step()
        self.actor_opt.zero_grad()
        pi_loss.backward()
        self.actor_opt.step()
        return pi_loss.item()


torch.manual_seed(0)
agent = ActorCritic()
for it in range(3):
    obs, act, ret = torch.randn(6, 3), torch.randn(6, 2), torch.randn(6, 1)
    print(f"iteration {it} actor loss {agent.update(obs, act, ret):.4f}")
