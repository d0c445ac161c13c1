"""``OnPolicyAlgorithm``: the collect-then-learn loop PPO, A2C, VPG and TRPO share.

One iteration: the callbacks' ``on_rollout_start``; a rollout of ``n_steps`` per env (or, with
``rollout_episodes=n``, n complete episodes per env) through ``RolloutCollector`` (GAE
included); ``on_rollout_end``; ``on_advantages(batch)``; the subclass's ``_update(batch)``
(the only part that differs between the algorithms; it calls ``on_minibatch_loss`` /
``on_epoch_end`` where it has them); ``on_update_end``; metrics. Learning-rate annealing
(``anneal_lr``) is applied here before each rollout, linearly from ``learning_rate`` to 0 over
the ``train`` call's budget.
"""
from __future__ import annotations

import abc
import time
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlox.algorithms.base import Algorithm, to_numpy_tree
from rlox.optim import adam, set_learning_rate
from rlox.collectors import RolloutBatch, RolloutCollector
from rlox.policies import make_policy

__all__ = ["OnPolicyAlgorithm"]



class OnPolicyAlgorithm(Algorithm):
    """Base of the on-policy algorithms.

    Args:
        env_id: a gymnasium id, an ``ENV_REGISTRY`` name, or a gymnasium env object.
        seed, callbacks, logger, device: see ``Algorithm``.
        wrappers: vector-env wrappers (e.g. ``rlox.wrappers.VecNormalize``).
        policy: a policy module to use instead of the default ``rlox.policies`` one (it must
            have the ``act`` / ``evaluate_actions`` / ``get_value`` interface).
        **config: fields of the algorithm's config dataclass.
    """

    def __init__(self, env_id: Any = "CartPole-v1", *, seed: int = 0, callbacks: Sequence[Any] | None = None,
                 logger: Any = None, device: str | torch.device = "cpu", wrappers: Sequence[Any] | None = None,
                 policy: torch.nn.Module | None = None, **config: Any) -> None:
        super().__init__(env_id, seed=seed, callbacks=callbacks, logger=logger, device=device, **config)
        cfg = self.config
        self.collector = RolloutCollector(
            env_id, n_envs=cfg.n_envs, seed=self.seed, gamma=cfg.gamma, gae_lambda=cfg.gae_lambda,
            normalize_rewards=cfg.normalize_rewards, normalize_obs=cfg.normalize_obs,
            clip_obs=cfg.clip_obs, clip_reward=cfg.clip_reward, wrappers=wrappers, device=self.device,
            vec_env=cfg.vec_env)
        self.custom_policy = policy is not None     # (else rlox.policies' default, built here)
        if policy is None:
            # Initialise from the seed without touching torch's global generator.
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(self.seed)
                policy = self._build_policy()
        self.policy = policy.to(self.device)
        self.stop_requested = False     # a callback's on_step asked to stop during the rollout
        self._setup_optimizers()

    # ------------------------------------------------------------------ subclass interface
    def _build_policy(self) -> torch.nn.Module:
        """The default policy (``rlox.policies``' MLP actor-critic); RecurrentPPO builds an LSTM one."""
        cfg = self.config
        return make_policy(self.observation_space, self.action_space, algorithm=type(self).__name__,
                           hidden=cfg.hidden, activation=cfg.activation, ortho_init=cfg.ortho_init,
                           log_std_init=cfg.log_std_init, use_sde=cfg.use_sde,
                           features_extractor=cfg.features_extractor)

    def _setup_optimizers(self) -> None:
        """Create ``self.optimizers`` (name -> optimizer) and ``self.base_lrs``."""
        self.optimizers = {"policy": adam(self.policy.parameters(), self.config.learning_rate, eps=1e-5)}

    @abc.abstractmethod
    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        """Learn from one rollout; return ``loss/...`` metrics."""

    # ------------------------------------------------------------------ inference (spaces: Algorithm)
    def obs_normalizer(self) -> Any:
        return self.collector.normalizer

    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        # Stochastic predictions draw from torch's global generator, never the training stream.
        actions, _, _ = self.policy.act(obs.reshape(obs.shape[0], -1), deterministic, None, with_value=False)
        actions = actions.cpu().numpy()
        if isinstance(self.action_space, gym.spaces.Box):
            actions = np.clip(actions.reshape(-1, *self.action_space.shape), self.action_space.low,
                              self.action_space.high)
        return actions

    def export_policy(self) -> dict[str, Any] | None:
        """The actor for ``rlox.artifacts`` / ``rlox.inference`` (see ``Algorithm.export_policy``);
        None for a custom policy without an ``actor`` ``nn.Sequential``."""
        actor = getattr(self.policy, "actor", None)
        if not isinstance(actor, torch.nn.Sequential):
            return None
        if getattr(self.policy, "features", None) is None and len(self.observation_space.shape or ()) > 1:
            # an MLP policy sees flattened observations (a CNN's first layer takes the images)
            actor = torch.nn.Sequential(torch.nn.Flatten(), *actor)
        if getattr(self.policy, "discrete", False):
            return {"distribution": "categorical", "networks": {"actor": actor}, "outputs": {"logits": ["actor"]}}
        log_std = getattr(self.policy, "log_std", None)
        if log_std is None:
            return None
        if log_std.dim() == 2:  # gSDE: std depends on the actor's last hidden features (the "latent")
            layers = list(actor)
            return {"distribution": "gaussian",
                    "networks": {"actor_trunk": torch.nn.Sequential(*layers[:-1]),
                                 "actor_head": torch.nn.Sequential(layers[-1])},
                    "outputs": {"mean": ["actor_trunk", "actor_head"], "sde_latent": ["actor_trunk"]},
                    "tensors": {"log_std": log_std}}
        return {"distribution": "gaussian", "networks": {"actor": actor}, "outputs": {"mean": ["actor"]},
                "tensors": {"log_std": log_std}}

    # ------------------------------------------------------------------ the loop
    def set_learning_rate(self, lr: float) -> None:
        set_learning_rate(self.optimizers.values(), lr)

    def current_learning_rate(self) -> float:
        lr = self.config.learning_rate
        return lr * self.progress_remaining if self.config.anneal_lr else lr

    def _collect_rollout(self) -> RolloutBatch:
        """One rollout of ``n_steps`` per env through the collector (GAE included); records
        the finished episodes and the phase timings. HybridPPO replaces it with compiled code."""
        cfg = self.config
        on_step = self.callbacks.on_step if self.callbacks.needs_step else None
        self.policy.train(False)
        if cfg.rollout_episodes is not None:     # r2l's episode-bounded rollouts
            batch = self.collector.collect(self.policy, n_episodes=cfg.rollout_episodes, generator=self.torch_gen,
                                           on_step=on_step, sde_sample_freq=cfg.sde_sample_freq)
        else:
            batch = self.collector.collect(self.policy, cfg.n_steps, generator=self.torch_gen, on_step=on_step,
                                           sde_sample_freq=cfg.sde_sample_freq)
        self.policy.train(True)
        self.record_episodes(self.collector.episode_returns, self.collector.episode_lengths)
        for phase in ("env_step", "policy_forward", "gae_compute"):
            self.time_phase(phase, self.collector.timings[phase])
        self.stop_requested = self.collector.stop_requested
        return batch

    @property
    def update_hooks(self) -> Any:
        """The callbacks the update calls (``rlox.callbacks.CallbackList``; loggers included
        while training)."""
        return getattr(self, "_hooks", None) or self.callbacks

    def _iteration(self) -> tuple[dict[str, Any], bool]:
        cfg = self.config
        lr = self.current_learning_rate()
        if cfg.anneal_lr:
            self.set_learning_rate(lr)
        keep_going = self.callbacks.on_rollout_start()
        before = dict(self.timings)
        batch = self._collect_rollout()
        self.num_timesteps += len(batch)
        rollout = {"train/mean_reward": self.mean_reward, "train/episodes": self.episodes}
        keep_going = self.callbacks.on_rollout_end(rollout) and keep_going and not self.stop_requested
        t0 = time.perf_counter()
        hooks = self.update_hooks
        hooks.on_advantages(batch)      # r2l: after advantages/returns (may replace them)
        losses = self._update(batch)
        hooks.on_update_end(losses)     # r2l: after all minibatches
        self.time_phase("gradient_update", time.perf_counter() - t0)
        metrics = {**rollout, **losses, "train/learning_rate": lr}
        for phase in ("env_step", "gae_compute", "gradient_update"):
            metrics[f"time/{phase}"] = self.timings.get(phase, 0.0) - before.get(phase, 0.0)
        return metrics, keep_going

    # ------------------------------------------------------------------ persistence
    def _state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(),
                "sde_noise": getattr(self.policy, "sde_noise", None),
                "optimizers": {k: opt.state_dict() for k, opt in self.optimizers.items()},
                "collector": self.collector.state_dict()}

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        if state.get("sde_noise") is not None:
            self.policy.sde_noise = state["sde_noise"].to(self.device)
        for k, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][k])
        self.collector.load_state_dict(to_numpy_tree(state["collector"]))
        if self.config.anneal_lr:
            self.set_learning_rate(self.current_learning_rate())

    @staticmethod
    def _mean_metrics(items: list[dict[str, torch.Tensor]], prefix: str = "loss/") -> dict[str, float]:
        """Average per-minibatch metric tensors (one sync per metric per iteration)."""
        if not items:
            return {}
        out = {}
        for k in items[0]:
            out[prefix + k] = float(torch.stack([m[k] for m in items]).float().nanmean())
        return out
