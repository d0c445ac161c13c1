"""Conservative Q-Learning (Kumar, Zhou, Tucker & Levine, 2020, "Conservative Q-Learning for
Offline Reinforcement Learning").

    from rlox.algorithms.cql import CQL
    algo = CQL(dataset=buf, obs_dim=17, act_dim=6, cql_alpha=5.0)
    algo.train(n_gradient_steps=100_000)

CQL(H) on SAC (``rlox.algorithms.sac``: squashed Gaussian actor, twin critics, soft target,
automatic temperature): each critic's loss adds ``cql_alpha * (logsumexp_a Q(s, a) - Q(s, a_data))``
(eq. 4), pushing Q down on actions the policy might pick and up on the dataset's. The
log-sum-exp over the continuous action space is estimated by importance sampling (appendix F):
``n_action_samples`` uniform actions (density 0.5^act_dim) and as many actions of the current
policy at s and at s' (their log densities subtracted, no gradient to the actor). With
``target_action_gap`` the weight is tuned by dual gradient descent so the penalty stays near
the gap (Lagrangian CQL, eq. 5). The critics bootstrap as SAC does (a sampled action at s' and the
entropy term), or with ``backup="mean"`` from the target critics at the actor's mean action
without entropy (d3rlpy's default; CQL's own code drops the entropy term too). Discrete actions (an ``action_space=Discrete(n)`` or a
Discrete env): a double-DQN Q-network whose penalty is the exact ``logsumexp_a Q(s, a) - Q(s, a_data)``.

Reading order: config (``rlox.config.CQLConfig``), networks (``_build``), the penalty
(``cql_penalty``, ``discrete_cql_penalty``), one gradient step (``_train_step``).
"""
from __future__ import annotations

import copy
import math
from typing import Any, Mapping

import torch
import torch.nn.functional as F

from rlox.algorithms.offline import Batch, OfflineAlgorithm
from rlox.algorithms.sac import actor_temperature_step, soft_td_target
from rlox.config import CQLConfig
from rlox.networks import SimpleQNetwork, SquashedGaussianPolicy, TwinQNetwork
from rlox.optim import make_adam, polyak_update

__all__ = ["CQL", "cql_penalty", "discrete_cql_penalty", "mean_action_td_target"]


def cql_penalty(q_data: torch.Tensor, q_samples: torch.Tensor, log_density: torch.Tensor,
                temperature: float = 1.0) -> torch.Tensor:
    """The CQL(H) regulariser per critic [n]: ``mean_B (T * logsumexp_k ((Q(s, a_k) - log mu(a_k|s)) / T)
    - Q(s, a_data))`` (eq. 4 with the importance-sampled log-sum-exp of appendix F).

    ``q_data`` [n, B]: Q at the dataset actions; ``q_samples`` [n, B, K]: Q at K sampled actions;
    ``log_density`` [B, K]: each sample's log density under its proposal."""
    scores = (q_samples - log_density) / temperature
    return (temperature * torch.logsumexp(scores, dim=-1) - q_data).mean(-1)


@torch.no_grad()
def mean_action_td_target(actor: SquashedGaussianPolicy, critic_target: torch.nn.Module, rewards: torch.Tensor,
                          not_done: torch.Tensor, next_obs: torch.Tensor, *, gamma: float) -> torch.Tensor:
    """``backup="mean"``'s target [B]: ``r + gamma * not_done * min_i Q'_i(s', tanh(mu(s')))``, the
    target critics at the actor's mean action without the entropy term (d3rlpy's CQL default)."""
    next_q = critic_target(next_obs, actor.deterministic(next_obs)).min(0).values
    return rewards + not_done * gamma * next_q


def discrete_cql_penalty(q_values: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``mean_B (logsumexp_a Q(s, a) - Q(s, a_data))`` for ``q_values`` [B, n_actions], ``actions`` [B]."""
    return (torch.logsumexp(q_values, dim=-1) - q_values.gather(1, actions[:, None]).squeeze(1)).mean()


class CQL(OfflineAlgorithm):
    """CQL. Args: see ``OfflineAlgorithm`` and ``rlox.config.CQLConfig`` (``cql_alpha``,
    ``n_action_samples``, ``target_action_gap``, ...)."""

    name = "cql"
    config_class = CQLConfig
    supports_discrete = True

    @property
    def metric_names(self) -> tuple[str, ...]:   # type: ignore[override]
        if self.discrete:
            return ("critic_loss", "td_loss", "cql_penalty")
        return ("critic_loss", "cql_penalty", "actor_loss", "ent_coef", "cql_alpha")

    # ------------------------------------------------------------------ networks
    def _build(self) -> None:
        cfg, dev = self.config, self.device
        if self.discrete:
            self.q_net = SimpleQNetwork(self.obs_dim, self.act_dim, cfg.hidden).to(dev)
            self.q_target = copy.deepcopy(self.q_net).requires_grad_(False)
            self.q_optimizer = make_adam(self.q_net.parameters(), cfg.learning_rate)
            self._q_params, self._q_target_params = list(self.q_net.parameters()), list(self.q_target.parameters())
            return
        self.actor = SquashedGaussianPolicy(self.obs_dim, self.act_dim, cfg.hidden).to(dev)
        self.critic = TwinQNetwork(self.obs_dim, self.act_dim, cfg.hidden, n_critics=2).to(dev)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_optimizer = make_adam(self.actor.parameters(), cfg.actor_learning_rate)
        self.critic_optimizer = make_adam(self.critic.parameters(), cfg.learning_rate)
        # SAC's temperature, target entropy -act_dim (Haarnoja et al., 2018).
        self.target_entropy = -float(self.act_dim)
        self.log_alpha = torch.tensor(math.log(cfg.ent_coef), device=dev, requires_grad=cfg.auto_entropy)
        self.alpha_optimizer = make_adam([self.log_alpha], cfg.actor_learning_rate) if cfg.auto_entropy else None
        # Lagrangian CQL (eq. 5): log alpha' learned by dual gradient ascent on the penalty's gap.
        self.log_alpha_prime = torch.zeros((), device=dev, requires_grad=cfg.target_action_gap is not None)
        self.alpha_prime_optimizer = (make_adam([self.log_alpha_prime], cfg.learning_rate)
                                      if cfg.target_action_gap is not None else None)
        self._critic_params = list(self.critic.parameters())
        self._critic_target_params = list(self.critic_target.parameters())
        # log density of a uniform action on [-1, 1]^act_dim
        self._log_uniform = self.act_dim * math.log(0.5)

    def _modules(self) -> dict[str, torch.nn.Module]:
        if self.discrete:
            return {"q_net": self.q_net, "q_target": self.q_target}
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        if self.discrete:
            return {"q": self.q_optimizer}
        opts = {"actor": self.actor_optimizer, "critic": self.critic_optimizer}
        if self.alpha_optimizer is not None:
            opts["alpha"] = self.alpha_optimizer
        if self.alpha_prime_optimizer is not None:
            opts["alpha_prime"] = self.alpha_prime_optimizer
        return opts

    def _extra_state(self) -> dict[str, Any]:
        if self.discrete:
            return {}
        return {"log_alpha": self.log_alpha.detach().clone(), "log_alpha_prime": self.log_alpha_prime.detach().clone()}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        if not self.discrete:
            with torch.no_grad():
                self.log_alpha.copy_(state["log_alpha"])
                self.log_alpha_prime.copy_(state["log_alpha_prime"])

    def _policy_action(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        if self.discrete:
            return self.q_net(obs).argmax(-1)
        return self.actor.deterministic(obs) if deterministic else self.actor.sample(obs)[0]

    def _export_head(self) -> torch.nn.Sequential:
        if self.discrete:
            return torch.nn.Sequential(*self.q_net.net)
        return torch.nn.Sequential(*self.actor.trunk, self.actor.mu, torch.nn.Tanh())

    # ------------------------------------------------------------------ learning
    def _train_step(self, batch: Batch) -> torch.Tensor:
        return self._discrete_step(batch) if self.discrete else self._continuous_step(batch)

    def _continuous_step(self, batch: Batch) -> torch.Tensor:
        cfg = self.config
        obs, actions, rewards, next_obs, not_done = batch
        B, K, A = obs.shape[0], cfg.n_action_samples, self.act_dim
        alpha = self.log_alpha.detach().exp()

        # 1. Critics: SAC's soft Bellman error (or the mean action's, backup="mean") ...
        if cfg.backup == "soft":
            target_q = soft_td_target(self.actor, self.critic_target, rewards, not_done, next_obs, alpha,
                                      gamma=cfg.gamma, generator=self.torch_gen)
        else:
            target_q = mean_action_td_target(self.actor, self.critic_target, rewards, not_done, next_obs,
                                             gamma=cfg.gamma)
        q_data = self.critic(obs, actions)                                           # [2, B]
        bellman = F.mse_loss(q_data, target_q.expand_as(q_data)) * q_data.shape[0]
        # ... plus the conservative penalty: K uniform actions and K policy actions at s and at s',
        # all scored by Q(s, .) in one batched pass.
        with torch.no_grad():
            obs_k = obs.repeat_interleave(K, 0)                                       # [B*K, obs]
            next_k = next_obs.repeat_interleave(K, 0)
            rand = torch.rand((B * K, A), generator=self.torch_gen).to(obs.device) * 2 - 1
            pi_a, pi_logp = self.actor.sample(obs_k, self.torch_gen)
            next_a, next_logp = self.actor.sample(next_k, self.torch_gen)
            log_density = torch.cat([torch.full((B, K), self._log_uniform, device=obs.device),
                                     pi_logp.view(B, K), next_logp.view(B, K)], dim=1)   # [B, 3K]
        q_samples = self.critic(obs_k.repeat(3, 1), torch.cat([rand, pi_a, next_a]))     # [2, 3*B*K]
        q_samples = q_samples.view(2, 3, B, K).permute(0, 2, 1, 3).reshape(2, B, 3 * K)
        penalty = cql_penalty(q_data, q_samples, log_density, cfg.cql_temperature)      # [2]
        if self.alpha_prime_optimizer is not None:
            # Lagrangian: alpha' * (penalty - gap); alpha' ascends the gap (eq. 5, clamped as CQL's code).
            alpha_prime = self.log_alpha_prime.exp().clamp(0.0, 1e6)
            gap = penalty - cfg.target_action_gap
            conservative = (alpha_prime.detach() * cfg.cql_alpha * gap).sum()
            alpha_prime_loss = -(alpha_prime * cfg.cql_alpha * gap.detach()).sum() * 0.5
            self.alpha_prime_optimizer.zero_grad()
            alpha_prime_loss.backward()
            self.alpha_prime_optimizer.step()
            weight = alpha_prime.detach() * cfg.cql_alpha
        else:
            conservative = cfg.cql_alpha * penalty.sum()
            weight = torch.tensor(cfg.cql_alpha)
        critic_loss = bellman + conservative
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # 2. Actor and temperature: SAC's (eq. 7 and 18 of Haarnoja et al.).
        actions_pi, log_prob = self.actor.sample(obs, self.torch_gen)
        actor_loss = (alpha * log_prob - self.critic.min_q(obs, actions_pi)).mean()
        actor_temperature_step(actor_loss, log_prob, self.log_alpha, self.target_entropy,
                               self.actor_optimizer, self.alpha_optimizer)

        polyak_update(self._critic_params, self._critic_target_params, cfg.tau)
        return torch.stack([critic_loss.detach(), penalty.detach().mean(), actor_loss.detach(), alpha,
                            weight.to(alpha.device).float()])

    def _discrete_step(self, batch: Batch) -> torch.Tensor:
        cfg = self.config
        obs, actions, rewards, next_obs, not_done = batch
        # Double DQN target (van Hasselt et al., 2016): the online net picks a', the target scores it.
        with torch.no_grad():
            next_a = self.q_net(next_obs).argmax(-1, keepdim=True)
            next_q = self.q_target(next_obs).gather(1, next_a).squeeze(1)
            target = rewards + not_done * cfg.gamma * next_q
        q_values = self.q_net(obs)                                                    # [B, n]
        td_loss = F.smooth_l1_loss(q_values.gather(1, actions[:, None]).squeeze(1), target)
        penalty = discrete_cql_penalty(q_values, actions)
        loss = td_loss + cfg.cql_alpha * penalty
        self.q_optimizer.zero_grad()
        loss.backward()
        self.q_optimizer.step()
        polyak_update(self._q_params, self._q_target_params, cfg.tau)
        return torch.stack([loss.detach(), td_loss.detach(), penalty.detach()])
