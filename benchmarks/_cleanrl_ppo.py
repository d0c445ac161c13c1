"""A CleanRL-style single-file PPO, the bench's second peer (benchmarks/bench_ppo.py).

Written for this bench in the structure of CleanRL's ``ppo.py`` (Huang et al., 2022): the
arguments, a gymnasium ``SyncVectorEnv``, an ``Agent`` with actor and critic Tanh MLPs
(orthogonal init), the rollout loop in Python with torch, GAE in a reversed torch loop, then
epochs of shuffled minibatches with the clipped surrogate, value loss, entropy bonus, global
gradient-norm clipping and Adam (eps 1e-5); learning rate and clip range annealed linearly as
rlox's preset asks. As in CleanRL, an episode that ends by truncation is treated as done (no
value bootstrap). It is what a user would write by hand, for throughput comparison only.

    from _cleanrl_ppo import Args, train
    out = train(Args.from_rlox(get_preset("ppo", "CartPole-v1"), total_timesteps=20_000))
    out["sps"]
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.distributions.categorical import Categorical


@dataclass
class Args:
    env_id: str = "CartPole-v1"
    seed: int = 0
    total_timesteps: int = 20_000
    num_envs: int = 8
    num_steps: int = 32
    minibatch_size: int = 256
    update_epochs: int = 20
    learning_rate: float = 1e-3
    anneal_lr: bool = True
    clip_coef: float = 0.2
    anneal_clip: bool = True
    gamma: float = 0.98
    gae_lambda: float = 0.8
    ent_coef: float = 0.0
    vf_coef: float = 1.0
    clip_vloss: bool = False
    norm_adv: bool = True
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    hidden: int = 64

    @classmethod
    def from_rlox(cls, cfg: dict, **overrides) -> "Args":
        """Args from an rlox PPO config dict (``rlox.presets.get_preset``); both write the value
        loss as half the squared error, so ``vf_coef`` carries over unchanged."""
        names = {"n_envs": "num_envs", "n_steps": "num_steps", "batch_size": "minibatch_size",
                 "n_epochs": "update_epochs", "clip_eps": "clip_coef", "normalize_advantages": "norm_adv"}
        known = set(cls.__dataclass_fields__)
        kw = {names.get(k, k): v for k, v in cfg.items() if names.get(k, k) in known}
        return cls(**{**kw, **overrides})


def make_env(env_id: str):
    def thunk():
        return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))
    return thunk


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int, hidden: int = 64):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0))
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, n_actions), std=0.01))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        probs = Categorical(logits=self.actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def train(args: Args) -> dict:
    """Run PPO for ``args.total_timesteps``; returns steps/s, wall and CPU seconds of the
    training loop (env and agent construction excluded, as CleanRL's SPS) and the returns."""
    batch_size = args.num_envs * args.num_steps
    num_iterations = args.total_timesteps // batch_size
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)

    envs = gym.vector.SyncVectorEnv([make_env(args.env_id) for _ in range(args.num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "discrete actions only"
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    agent = Agent(obs_dim, int(envs.single_action_space.n), args.hidden)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

    # rollout storage
    obs = torch.zeros((args.num_steps, args.num_envs, obs_dim))
    actions = torch.zeros((args.num_steps, args.num_envs))
    logprobs = torch.zeros((args.num_steps, args.num_envs))
    rewards = torch.zeros((args.num_steps, args.num_envs))
    dones = torch.zeros((args.num_steps, args.num_envs))
    values = torch.zeros((args.num_steps, args.num_envs))

    episodic_returns: list[float] = []
    start_wall, start_cpu = time.perf_counter(), time.process_time()
    next_obs, _ = envs.reset(seed=args.seed)
    next_obs = torch.Tensor(next_obs)
    next_done = torch.zeros(args.num_envs)
    for iteration in range(1, num_iterations + 1):
        frac = 1.0 - (iteration - 1.0) / num_iterations
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = frac * args.learning_rate
        clip_coef = frac * args.clip_coef if args.anneal_clip else args.clip_coef

        for step in range(args.num_steps):
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
            next_done = torch.Tensor(np.logical_or(terminations, truncations))
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs = torch.Tensor(next_obs_np)
            final = infos.get("final_info", {})       # (same-step autoreset: the ended episodes' info)
            if "episode" in final:
                episodic_returns.extend(float(r) for r in final["episode"]["r"][final["_episode"]])

        # GAE (Schulman et al., 2016), backwards over the rollout
        with torch.no_grad():
            next_value = agent.get_value(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0
            for t in reversed(range(args.num_steps)):
                if t == args.num_steps - 1:
                    nextnonterminal = 1.0 - next_done
                    nextvalues = next_value
                else:
                    nextnonterminal = 1.0 - dones[t + 1]
                    nextvalues = values[t + 1]
                delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values

        b_obs = obs.reshape((-1, obs_dim))
        b_logprobs = logprobs.reshape(-1)
        b_actions = actions.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values.reshape(-1)

        # epochs of shuffled minibatches
        b_inds = np.arange(batch_size)
        for _epoch in range(args.update_epochs):
            np.random.shuffle(b_inds)
            for start in range(0, batch_size, args.minibatch_size):
                mb_inds = b_inds[start:start + args.minibatch_size]
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds],
                                                                              b_actions.long()[mb_inds])
                logratio = newlogprob - b_logprobs[mb_inds]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()   # k3 estimator (Schulman's blog)
                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                pg_loss1 = -mb_advantages * ratio
                pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
                pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                newvalue = newvalue.view(-1)
                if args.clip_vloss:
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(newvalue - b_values[mb_inds], -clip_coef, clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                else:
                    v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                loss = pg_loss - args.ent_coef * entropy.mean() + v_loss * args.vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and approx_kl > args.target_kl:
                break

    wall, cpu = time.perf_counter() - start_wall, time.process_time() - start_cpu
    envs.close()
    steps = num_iterations * batch_size
    return {"steps": steps, "sps": steps / wall, "wall_s": wall, "cpu_s": cpu, "episodic_returns": episodic_returns,
            "agent": agent}
