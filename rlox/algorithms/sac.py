"""Soft Actor-Critic (Haarnoja et al., 2018, "Soft Actor-Critic Algorithms and Applications").

    from rlox.algorithms import SAC
    sac = SAC(env_id="Pendulum-v1", learning_rate=1e-3, seed=0)
    sac.train(total_timesteps=20_000)
    action = sac.predict(obs, deterministic=True)        # scaled to the env's bounds

Reading order: config (``rlox.config.SACConfig``), networks (``_build``), acting (``_act``),
one gradient step (``_train_step``: temperature, critics, actor, targets), persistence.
Collection, the replay buffer and the training schedule are ``OffPolicyAlgorithm``'s.
Image observations get a CNN encoder in front of the MLPs (``OffPolicyAlgorithm._build_encoders``:
by default owned by the critics, its features detached for the actor, as in SAC-AE and DrQ).
The update follows SB3's SAC step for step (same hyperparameters, same run), with three
changes that only make it faster: the twin critics run as one batched network, the actor
loss does not compute gradients for the critic's weights, and the targets are updated with
one foreach call.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from rlox.algorithms.off_policy import OffPolicyAlgorithm
from rlox.optim import make_adam, polyak_update
from rlox.config import SACConfig
from rlox.networks import SquashedGaussianPolicy, TwinQNetwork

__all__ = ["SAC", "soft_td_target"]


@torch.no_grad()
def soft_td_target(actor: SquashedGaussianPolicy, critic_target: torch.nn.Module, rewards: torch.Tensor,
                   not_done: torch.Tensor, next_obs: torch.Tensor, alpha: torch.Tensor, *, gamma: float,
                   generator: torch.Generator, next_critic_obs: torch.Tensor | None = None) -> torch.Tensor:
    """SAC's soft target [B] (shared with CQL): ``r + gamma * not_done * (min_i Q'_i(s', a') -
    alpha * log pi(a'|s'))`` with ``a' ~ pi(.|s')``. ``next_critic_obs``: the target critics' input
    where it differs from the actor's ``next_obs`` (image encoders: each network's own features)."""
    next_actions, next_log_prob = actor.sample(next_obs, generator)
    critic_in = next_obs if next_critic_obs is None else next_critic_obs
    next_q = critic_target(critic_in, next_actions).min(0).values - alpha * next_log_prob
    return rewards + not_done * gamma * next_q


def actor_temperature_step(actor_loss: torch.Tensor, log_prob: torch.Tensor, log_alpha: torch.Tensor,
                           target_entropy: float, actor_optimizer: torch.optim.Optimizer,
                           alpha_optimizer: torch.optim.Optimizer | None) -> torch.Tensor:
    """SAC's actor step and, with ``alpha_optimizer``, its temperature step (shared with CQL):
    ``J(alpha) = E[-alpha (log pi(a|s) + target_entropy)]`` (Haarnoja et al., 2018b, eq. 18). The
    two graphs are disjoint (log pi detached here, alpha detached in ``actor_loss``), so one
    backward pass serves both. Returns the temperature loss (0 without ``alpha_optimizer``)."""
    actor_optimizer.zero_grad()
    if alpha_optimizer is not None:
        alpha_loss = -(log_alpha * (log_prob.detach() + target_entropy)).mean()
        alpha_optimizer.zero_grad()
        (actor_loss + alpha_loss).backward()
        alpha_optimizer.step()
    else:
        alpha_loss = torch.zeros((), device=actor_loss.device)
        actor_loss.backward()
    actor_optimizer.step()
    return alpha_loss


class SAC(OffPolicyAlgorithm):
    """Soft Actor-Critic with twin critics, target critics and automatic entropy tuning.

    Args: see ``OffPolicyAlgorithm`` and ``rlox.config.SACConfig`` (``buffer_size``,
    ``learning_rate``, ``tau``, ``gamma``, ``auto_entropy``, ``use_sde``, ...).
    """

    name = "sac"
    config_class = SACConfig
    other_family = "SAC and TD3 are for continuous actions: use DQN (or PPO/A2C) for discrete ones"
    metric_names = ("critic_loss", "actor_loss", "ent_coef", "ent_coef_loss")
    supports_images = True      # uint8 images: a CNN encoder (rlox.cnn), uint8 replay

    # ------------------------------------------------------------------ networks
    def _build(self) -> None:
        cfg, dev = self.config, self.device
        in_dim = self._build_encoders()          # obs_dim, or the CNN's feature size for images
        self.actor = SquashedGaussianPolicy(in_dim, self.act_dim, cfg.hidden, use_sde=cfg.use_sde,
                                            log_std_init=cfg.log_std_init).to(dev)
        self.critic = TwinQNetwork(in_dim, self.act_dim, cfg.hidden, n_critics=2).to(dev)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        # An image encoder is trained by the optimiser of the network that owns it.
        self.actor_optimizer = make_adam(self._params("actor", "actor_encoder"), cfg.learning_rate)
        self.critic_optimizer = make_adam(self._params("critic", "encoder"), cfg.learning_rate)
        # Temperature alpha, learned in log space so it stays positive (Haarnoja et al., 2018, sec. 5);
        # target entropy -dim(A), their heuristic.
        self.target_entropy = float(-self.act_dim if cfg.target_entropy is None else cfg.target_entropy)
        self.log_alpha = torch.tensor(math.log(cfg.ent_coef), dtype=torch.float32, device=dev,
                                      requires_grad=cfg.auto_entropy)
        self.alpha_optimizer = make_adam([self.log_alpha], cfg.learning_rate) if cfg.auto_entropy else None
        self._critic_params = self._params("critic", "encoder")
        self._critic_target_params = self._params("critic_target", "encoder_target")
        self._sde_steps = 0

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "critic": self.critic, "critic_target": self.critic_target,
                **self._encoder_modules()}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        opts = {"actor": self.actor_optimizer, "critic": self.critic_optimizer}
        if self.alpha_optimizer is not None:
            opts["alpha"] = self.alpha_optimizer
        return opts

    # ------------------------------------------------------------------ acting
    def _before_collect(self) -> None:
        # gSDE: a new exploration matrix per env at the start of each collection phase (SB3).
        if self.config.use_sde:
            self.actor.reset_noise(self.n_envs, self.torch_gen)
            self._sde_steps = 0

    def _act(self, obs: torch.Tensor) -> torch.Tensor:
        freq = self.config.sde_sample_freq
        if self.config.use_sde and freq > 0:
            if self._sde_steps > 0 and self._sde_steps % freq == 0:
                self.actor.reset_noise(self.n_envs, self.torch_gen)
            self._sde_steps += 1
        return self.actor.sample_action(self._actor_features(obs), self.torch_gen)

    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        obs = self._actor_features(obs.reshape(obs.shape[0], -1))
        if deterministic:
            actions = self.actor.deterministic(obs)
        elif self.config.use_sde:
            # A fresh exploration matrix from torch's global generator; the training one is kept.
            saved = self.actor.exploration_mat
            self.actor.reset_noise(1, None)
            actions = self.actor.sample(obs)[0]
            self.actor.exploration_mat = saved
        else:
            # Stochastic predictions draw from torch's global generator, never the training stream.
            actions = self.actor.sample(obs)[0]
        return self.scale_actions(actions.cpu().numpy())

    # ------------------------------------------------------------------ learning
    def _train_step(self) -> torch.Tensor:
        cfg = self.config
        obs, actions, rewards, next_obs, not_done = self._sample_transitions()

        # Image observations: the critics' encoder features (with gradients: the critic loss
        # trains the encoder); the actor reads them detached (or its own encoder's features).
        features = self._critic_features(obs)
        if cfg.use_sde:
            self.actor.reset_noise(1, self.torch_gen)   # SB3: a new matrix every gradient step
        # Actions of the current policy on the batch (reparameterised: a = tanh(mu + sigma * eps)).
        actions_pi, log_prob = self.actor.sample(self._actor_features(obs, features), self.torch_gen)

        # The temperature used in this step is the one before its own update (as SB3).
        alpha = self.log_alpha.detach().exp()

        # 1. Critics: soft Bellman target with the smaller target critic (clipped double Q,
        #    Fujimoto et al., 2018) minus the entropy term (eq. 3, 5).
        target_q = self.td_target(rewards, not_done, next_obs, alpha)
        current_q = self.critic(features, actions)                            # [2, B]
        # 0.5 * (MSE_1 + MSE_2) == the mean over both critics (SB3's critic loss).
        critic_loss = F.mse_loss(current_q, target_q.expand_as(current_q))
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # 2. Actor: minimise E[alpha log pi(a|s) - min_i Q_i(s, a)] (eq. 7), through the updated
        #    critics' input only (their weights get no gradient; an image encoder's features are
        #    the ones computed before the critic step, detached: the actor loss never trains it).
        q_pi = self.critic.min_q(features.detach(), actions_pi)
        actor_loss = (alpha * log_prob - q_pi).mean()
        # 3. Temperature: J(alpha) = E[-alpha (log pi(a|s) + target_entropy)] (eq. 18), in the
        #    same backward pass as the actor's.
        alpha_loss = actor_temperature_step(actor_loss, log_prob, self.log_alpha, self.target_entropy,
                                            self.actor_optimizer, self.alpha_optimizer)

        # 4. Target critics: Polyak averaging every target_update_interval gradient steps.
        if self._n_updates % cfg.target_update_interval == 0:
            polyak_update(self._critic_params, self._critic_target_params, cfg.tau)
        return torch.stack([critic_loss.detach(), actor_loss.detach(), alpha, alpha_loss.detach()])

    @torch.no_grad()
    def td_target(self, rewards: torch.Tensor, not_done: torch.Tensor, next_obs: torch.Tensor,
                  alpha: torch.Tensor) -> torch.Tensor:
        """The soft TD target [B]: ``r + gamma * (1 - terminated) * (min_i Q'_i(s', a') - alpha *
        log pi(a'|s'))`` with ``a' ~ pi(.|s')`` (``not_done`` = 1 - terminated: a truncated step
        still bootstraps, from its true final observation ``s'``)."""
        # Images: the actor reads the online encoder's features of s' (as DrQ), the target critics
        # their target encoder's.
        critic_in = self._target_features(next_obs)[1]
        return soft_td_target(self.actor, self.critic_target, rewards, not_done, self._actor_features(next_obs),
                              alpha, gamma=self.config.gamma, generator=self.torch_gen, next_critic_obs=critic_in)

    def _schedule_metrics(self) -> dict[str, float]:
        return {"train/ent_coef": float(self.log_alpha.detach().exp())}

    # ------------------------------------------------------------------ persistence
    def _extra_state(self) -> dict[str, Any]:
        state: dict[str, Any] = {"log_alpha": self.log_alpha.detach().clone(), "sde_steps": self._sde_steps}
        if self.config.use_sde:
            state["exploration_mat"] = self.actor.exploration_mat.detach().clone()
        return state

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        self._sde_steps = int(state.get("sde_steps", 0))
        if self.config.use_sde and "exploration_mat" in state:
            self.actor.exploration_mat = state["exploration_mat"].to(self.device)

    def export_policy(self) -> dict[str, Any] | None:
        if self.config.use_sde:
            return None  # the artifact format has no state-dependent noise
        # The actor's input layers (a CNN encoder, or a Flatten for multi-dimensional vectors), then its MLP.
        trunk = torch.nn.Sequential(*self._actor_export_input(), *self.actor.trunk)
        return {"distribution": "squashed_gaussian",
                "networks": {"trunk": trunk, "mu": torch.nn.Sequential(self.actor.mu),
                             "log_std": torch.nn.Sequential(self.actor.log_std)},
                "outputs": {"mean": ["trunk", "mu"], "log_std": ["trunk", "log_std"]}}
