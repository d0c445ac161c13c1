"""TD3+BC (Fujimoto & Gu, 2021, "A Minimalist Approach to Offline Reinforcement Learning").

    from rlox.algorithms.td3_bc import TD3BC
    algo = TD3BC(dataset=buf, obs_dim=17, act_dim=6, alpha=2.5)
    algo.train(n_gradient_steps=100_000)

TD3 (``rlox.algorithms.td3``: twin critics, target policy smoothing, delayed actor and target
updates) with two changes: the actor loss adds a behaviour-cloning term and scales the Q term
by ``lambda = alpha / mean|Q|`` (sec. 4, eq. 3), and observations are standardised with the
dataset's statistics (``normalize_obs``, on by default). Reading order: config
(``rlox.config.TD3BCConfig``), networks (``_build``), the actor loss (``td3_bc_actor_loss``),
one gradient step (``_train_step``). Dataset, loop and persistence: ``OfflineAlgorithm``.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from rlox.algorithms.offline import Batch, OfflineAlgorithm
from rlox.algorithms.td3 import td3_target
from rlox.config import TD3BCConfig
from rlox.networks import DeterministicPolicy, TwinQNetwork
from rlox.optim import make_adam, polyak_update

__all__ = ["TD3BC", "td3_bc_actor_loss"]


def td3_bc_actor_loss(q: torch.Tensor, pi: torch.Tensor, actions: torch.Tensor,
                      alpha: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``-lambda * mean Q(s, pi(s)) + mean (pi(s) - a)^2`` with ``lambda = alpha / mean|Q|``
    (eq. 3; lambda is a constant: no gradient flows through the normaliser). ``q`` [B],
    ``pi`` and ``actions`` [B, act_dim]. Returns (loss, lambda)."""
    lmbda = alpha / q.abs().mean().detach()
    return -lmbda * q.mean() + F.mse_loss(pi, actions), lmbda


class TD3BC(OfflineAlgorithm):
    """TD3+BC. Args: see ``OfflineAlgorithm`` and ``rlox.config.TD3BCConfig`` (``alpha``,
    ``policy_delay``, ``target_noise``, ``noise_clip``, ``normalize_obs``, ...)."""

    name = "td3_bc"
    config_class = TD3BCConfig
    metric_names = ("critic_loss", "actor_loss", "bc_loss", "lambda")

    # ------------------------------------------------------------------ networks
    def _build(self) -> None:
        cfg, dev = self.config, self.device
        self.actor = DeterministicPolicy(self.obs_dim, self.act_dim, cfg.hidden, max_action=1.0).to(dev)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic = TwinQNetwork(self.obs_dim, self.act_dim, cfg.hidden, n_critics=2).to(dev)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_optimizer = make_adam(self.actor.parameters(), cfg.learning_rate)
        self.critic_optimizer = make_adam(self.critic.parameters(), cfg.learning_rate)
        self._online = list(self.critic.parameters()) + list(self.actor.parameters())
        self._targets = list(self.critic_target.parameters()) + list(self.actor_target.parameters())
        self._nan = torch.full((), float("nan"), device=dev)

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "actor_target": self.actor_target, "critic": self.critic,
                "critic_target": self.critic_target}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    def _policy_action(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        return self.actor(obs)

    def _export_head(self) -> torch.nn.Sequential:
        return torch.nn.Sequential(*self.actor.net, torch.nn.Tanh())

    # ------------------------------------------------------------------ learning
    def _train_step(self, batch: Batch) -> torch.Tensor:
        cfg = self.config
        obs, actions, rewards, next_obs, not_done = batch

        # 1. Critics: TD3's clipped double-Q target with target policy smoothing.
        target_q = td3_target(self.actor_target, self.critic_target, rewards, not_done, next_obs, gamma=cfg.gamma,
                              target_noise=cfg.target_noise, noise_clip=cfg.noise_clip, generator=self.torch_gen)
        current_q = self.critic(obs, actions)                              # [2, B]
        critic_loss = F.mse_loss(current_q, target_q.expand_as(current_q)) * current_q.shape[0]
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # 2. Delayed actor (TD3 sec. 5.2) with the BC term, then all targets.
        if (self._n_updates + 1) % cfg.policy_delay == 0:
            pi = self.actor(obs)
            q = self.critic.q1(obs, pi, detach_params=True)
            actor_loss, lmbda = td3_bc_actor_loss(q, pi, actions, cfg.alpha)
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            polyak_update(self._online, self._targets, cfg.tau)
            bc = F.mse_loss(pi.detach(), actions)
            out = torch.stack([critic_loss.detach(), actor_loss.detach(), bc, lmbda])
        else:
            out = torch.stack([critic_loss.detach(), self._nan, self._nan, self._nan])
        return out
