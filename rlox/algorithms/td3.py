"""Twin Delayed DDPG (Fujimoto, van Hoof & Meger, 2018, "Addressing Function Approximation
Error in Actor-Critic Methods").

    from rlox.algorithms import TD3
    td3 = TD3(env_id="Pendulum-v1", policy_delay=2, target_noise=0.2, noise_clip=0.5,
              exploration_noise=0.1)
    td3.train(total_timesteps=20_000)

Reading order: config (``rlox.config.TD3Config``), networks (``_build``), exploration
(``_default_exploration``: Gaussian or Ornstein-Uhlenbeck noise on the deterministic action),
one gradient step (``_train_step``: clipped double-Q critics with target policy smoothing, then
the delayed actor and target updates). The update is SB3's TD3, step for step; the twin critics
run as one batched network and the actor loss does not compute gradients for the critic weights.
Image observations get a CNN encoder in front of the MLPs (``OffPolicyAlgorithm._build_encoders``:
by default owned by the critics, its features detached for the actor, as in SAC-AE and DrQ).
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from rlox.algorithms.off_policy import OffPolicyAlgorithm
from rlox.optim import make_adam, polyak_update
from rlox.config import TD3Config
from rlox.exploration import Exploration, GaussianNoise, OrnsteinUhlenbeckNoise
from rlox.networks import DeterministicPolicy, TwinQNetwork

__all__ = ["TD3", "td3_target"]


@torch.no_grad()
def td3_target(actor_target: torch.nn.Module, critic_target: torch.nn.Module, rewards: torch.Tensor,
               not_done: torch.Tensor, next_obs: torch.Tensor, *, gamma: float, target_noise: float,
               noise_clip: float, generator: torch.Generator, next_critic_obs: torch.Tensor | None = None
               ) -> torch.Tensor:
    """TD3's target [B] (shared with TD3+BC): ``r + gamma * not_done * min_i Q'_i(s', a')``, with the
    smoothed target action ``a' = clip(pi'(s') + clip(N(0, target_noise^2), -noise_clip, noise_clip), -1, 1)``.
    ``next_critic_obs``: the target critics' input where it differs from the target actor's
    ``next_obs`` (image encoders: each network's own features)."""
    next_actions = actor_target(next_obs)
    noise = torch.randn(next_actions.shape, generator=generator).to(next_actions.device) * target_noise
    next_actions = (next_actions + noise.clamp(-noise_clip, noise_clip)).clamp(-1.0, 1.0)
    critic_in = next_obs if next_critic_obs is None else next_critic_obs
    next_q = critic_target(critic_in, next_actions).min(0).values
    return rewards + not_done * gamma * next_q


class TD3(OffPolicyAlgorithm):
    """TD3: deterministic actor, twin critics, delayed policy updates, target policy smoothing.

    Args: see ``OffPolicyAlgorithm`` and ``rlox.config.TD3Config`` (``policy_delay``,
    ``target_noise``, ``noise_clip``, ``exploration_noise``, ``noise_type``, ...).
    """

    name = "td3"
    config_class = TD3Config
    other_family = "SAC and TD3 are for continuous actions: use DQN (or PPO/A2C) for discrete ones"
    metric_names = ("critic_loss", "actor_loss")
    supports_images = True      # uint8 images: a CNN encoder (rlox.cnn), uint8 replay

    # ------------------------------------------------------------------ networks
    def _build(self) -> None:
        cfg, dev = self.config, self.device
        in_dim = self._build_encoders(actor_target=True)   # obs_dim, or the CNN's feature size for images
        # The actor acts in [-1, 1]; the collector rescales to the env's bounds.
        self.actor = DeterministicPolicy(in_dim, self.act_dim, cfg.hidden, max_action=1.0).to(dev)
        self.actor_target = copy.deepcopy(self.actor).requires_grad_(False)
        self.critic = TwinQNetwork(in_dim, self.act_dim, cfg.hidden, n_critics=2).to(dev)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        # An image encoder is trained by the optimiser of the network that owns it.
        self.actor_optimizer = make_adam(self._params("actor", "actor_encoder"), cfg.learning_rate)
        self.critic_optimizer = make_adam(self._params("critic", "encoder"), cfg.learning_rate)
        self._online = self._params("critic", "actor", "encoder", "actor_encoder")
        self._targets = self._params("critic_target", "actor_target", "encoder_target", "actor_encoder_target")

    def _modules(self) -> dict[str, torch.nn.Module]:
        return {"actor": self.actor, "actor_target": self.actor_target, "critic": self.critic,
                "critic_target": self.critic_target, **self._encoder_modules()}

    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {"actor": self.actor_optimizer, "critic": self.critic_optimizer}

    # ------------------------------------------------------------------ acting
    def _default_exploration(self) -> Exploration:
        cfg = self.config
        if cfg.noise_type == "ornstein-uhlenbeck":
            return OrnsteinUhlenbeckNoise(sigma=cfg.exploration_noise)
        return GaussianNoise(sigma=cfg.exploration_noise)

    def _act(self, obs: torch.Tensor) -> torch.Tensor:
        return self.actor(self._actor_features(obs))   # the exploration noise is added by the collector

    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        # The policy is deterministic; predict returns its action either way (as SB3's TD3).
        return self.scale_actions(self.actor(self._actor_features(obs.reshape(obs.shape[0], -1))).cpu().numpy())

    # ------------------------------------------------------------------ learning
    def _train_step(self) -> torch.Tensor:
        cfg = self.config
        obs, actions, rewards, next_obs, not_done = self._sample_transitions()

        # 1. Critics. Target policy smoothing (sec. 5.3): clipped Gaussian noise on the target
        #    action; clipped double Q (sec. 4.2): the smaller of the two target critics.
        target_q = self.td_target(rewards, not_done, next_obs)
        # Image observations: the critics' encoder features (with gradients: the critic loss
        # trains the encoder); the actor reads them detached (or its own encoder's features).
        features = self._critic_features(obs)
        current_q = self.critic(features, actions)                         # [2, B]
        # MSE_1 + MSE_2 (SB3's TD3 critic loss) == 2 * the mean over both critics.
        critic_loss = F.mse_loss(current_q, target_q.expand_as(current_q)) * current_q.shape[0]
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self.critic_optimizer.step()

        # 2. Delayed policy update (sec. 5.2): the actor and all targets every policy_delay steps;
        #    the actor ascends Q1 through the critic's input only.
        if (self._n_updates + 1) % cfg.policy_delay == 0:
            actor_loss = -self.critic.q1(features.detach(), self.actor(self._actor_features(obs, features)),
                                         detach_params=True).mean()
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self.actor_optimizer.step()
            polyak_update(self._online, self._targets, cfg.tau)
            actor_value = actor_loss.detach()
        else:
            actor_value = torch.full((), float("nan"), device=self.device)
        return torch.stack([critic_loss.detach(), actor_value])

    @torch.no_grad()
    def td_target(self, rewards: torch.Tensor, not_done: torch.Tensor, next_obs: torch.Tensor) -> torch.Tensor:
        """The TD target [B]: ``r + gamma * (1 - terminated) * min_i Q'_i(s', a')`` with the smoothed
        target action ``a' = clip(pi'(s') + clip(N(0, target_noise^2), -noise_clip, noise_clip), -1, 1)``."""
        cfg = self.config
        actor_in, critic_in = self._target_features(next_obs)    # images: the target encoders' features
        return td3_target(self.actor_target, self.critic_target, rewards, not_done, actor_in, gamma=cfg.gamma,
                          target_noise=cfg.target_noise, noise_clip=cfg.noise_clip, generator=self.torch_gen,
                          next_critic_obs=critic_in)

    def export_policy(self) -> dict[str, Any] | None:
        # The actor acts in [-1, 1]; a last diagonal Linear maps it onto the env's bounds exactly.
        space = self.action_space
        low = torch.as_tensor(np.asarray(space.low, dtype=np.float32).reshape(-1))
        high = torch.as_tensor(np.asarray(space.high, dtype=np.float32).reshape(-1))
        rescale = torch.nn.Linear(self.act_dim, self.act_dim)
        with torch.no_grad():
            rescale.weight.copy_(torch.diag((high - low) / 2))
            rescale.bias.copy_((high + low) / 2)
        # The actor's input layers (a CNN encoder, or a Flatten for multi-dimensional vectors), then its MLP.
        actor = torch.nn.Sequential(*self._actor_export_input(), *self.actor.net, torch.nn.Tanh(), rescale)
        return {"distribution": "deterministic", "networks": {"actor": actor}, "outputs": {"action": ["actor"]}}
