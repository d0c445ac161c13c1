"""Implicit Q-Learning (Kostrikov, Nair & Levine, 2021, "Offline Reinforcement Learning with
Implicit Q-Learning").

    from rlox.algorithms.iql import IQL
    algo = IQL(dataset=buf, obs_dim=17, act_dim=6, expectile=0.7, temperature=3.0)
    algo.train(n_gradient_steps=100_000)

IQL never evaluates Q at actions outside the dataset. A state value V(s) is fitted to an upper
expectile of the target critics' Q(s, a) over dataset actions (eq. 5), the critics regress onto
r + gamma V(s') (eq. 6), and the policy is extracted by advantage-weighted regression: maximise
exp(beta (Q - V)) log pi(a|s) on dataset actions, the weights clipped at ``max_weight`` (eq. 7;
the clip is from the authors' code). Reading order: config (``rlox.config.IQLConfig``), networks
(``_build``), the three losses (``expectile_loss``, ``iql_actor_loss``), one gradient step.
"""
from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from rlox.algorithms.offline import Batch, OfflineAlgorithm
from rlox.config import IQLConfig
from rlox.networks import GaussianPolicy, TwinQNetwork, mlp
from rlox.optim import make_adam, polyak_update

__all__ = ["IQL", "expectile_loss", "iql_actor_loss"]


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    """The asymmetric L2 loss ``mean |tau - 1(u < 0)| u^2`` of ``u = Q - V`` (eq. 5): tau > 0.5
    weights positive errors more, so V tends to an upper expectile of Q over dataset actions."""
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return (weight * diff.square()).mean()


def iql_actor_loss(log_prob: torch.Tensor, advantage: torch.Tensor, temperature: float,
                   max_weight: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantage-weighted regression (eq. 7): ``-mean min(exp(beta A), max_weight) log pi(a|s)``,
    with the advantage ``A = Q(s, a) - V(s)`` a constant. Returns (loss, mean weight)."""
    weights = torch.exp(temperature * advantage.detach()).clamp(max=max_weight)
    return -(weights * log_prob).mean(), weights.mean()


class IQL(OfflineAlgorithm):
    """IQL. Args: see ``OfflineAlgorithm`` and ``rlox.config.IQLConfig`` (``expectile``,
    ``temperature``, ``max_weight``, ``normalize_obs``, ...)."""

    name = "iql"
    config_class = IQLConfig
    metric_names = ("value_loss", "critic_loss", "actor_loss", "adv_weight")

    # ------------------------------------------------------------------ networks
    def _build(self) -> None:
        cfg, dev = self.config, self.device
        self.actor = GaussianPolicy(self.obs_dim, self.act_dim, cfg.hidden).to(dev)
        self.critic = TwinQNetwork(self.obs_dim, self.act_dim, cfg.hidden, n_critics=2).to(dev)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.value = mlp(self.obs_dim, cfg.hidden, 1).to(dev)
        self.actor_optimizer = make_adam(self.actor.parameters(), cfg.learning_rate)
        self.critic_optimizer = make_adam(self.critic.parameters(), cfg.learning_rate)
        self.value_optimizer = make_adam(self.value.parameters(), cfg.learning_rate)
        self._critic_params = list(self.critic.parameters())
        self._critic_target_params = list(self.critic_target.parameters())

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target,
                "value": self.value}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer, "value": self.value_optimizer}

    def _policy_action(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        return self.actor.deterministic(obs) if deterministic else self.actor.sample(obs)

    def _export_head(self) -> torch.nn.Sequential:
        return torch.nn.Sequential(*self.actor.net, torch.nn.Tanh())

    # ------------------------------------------------------------------ learning
    def _train_step(self, batch: Batch) -> torch.Tensor:
        cfg = self.config
        obs, actions, rewards, next_obs, not_done = batch
        with torch.no_grad():
            target_q = self.critic_target(obs, actions).min(0).values       # min of the twin targets

        # 1. Value: expectile regression of V(s) onto Q(s, a) over dataset actions (eq. 5).
        v = self.value(obs).squeeze(-1)
        advantage = target_q - v
        value_loss = expectile_loss(advantage, cfg.expectile)
        self.value_optimizer.zero_grad()
        value_loss.backward()
        self.value_optimizer.step()

        # 2. Critics: r + gamma * (1 - terminated) * V(s') with the updated V (eq. 6).
        with torch.no_grad():
            q_target = rewards + not_done * cfg.gamma * self.value(next_obs).squeeze(-1)
        current_q = self.critic(obs, actions)                               # [2, B]
        critic_loss = F.mse_loss(current_q, q_target.expand_as(current_q)) * current_q.shape[0]
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # 3. Actor: advantage-weighted log-likelihood of dataset actions (eq. 7).
        actor_loss, mean_weight = iql_actor_loss(self.actor.log_prob(obs, actions), advantage,
                                                 cfg.temperature, cfg.max_weight)
        self.actor_optimizer.zero_grad()
        actor_loss.backward()
        self.actor_optimizer.step()

        polyak_update(self._critic_params, self._critic_target_params, cfg.tau)
        return torch.stack([value_loss.detach(), critic_loss.detach(), actor_loss.detach(), mean_weight])
