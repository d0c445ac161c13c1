"""``OnPolicyAlgorithm``: the collect-then-learn loop PPO, A2C, VPG and TRPO share.

One iteration: the callbacks' ``on_rollout_start``; a rollout of ``n_steps`` per env (or, with
``rollout_episodes=n``, n complete episodes per env), GAE included, through the compiled
rollout kernel where it can run (``compiled_collection``, see
``rlox.algorithms._compiled_collection``: native env, default Tanh MLP policy, no gSDE,
normalisation, wrappers or episode-bounded rollouts, CPU device) or else ``RolloutCollector``
(torch forward pass, any env); ``on_rollout_end``; ``on_advantages(batch)``; the subclass's
``_update(batch)`` (the only part that differs between the algorithms; it calls ``on_minibatch_loss`` /
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

from rlox.algorithms._compiled_collection import CompiledCollection, compiled_collection_unsupported
from rlox.algorithms.base import Algorithm, to_numpy_tree
from rlox.optim import adam, set_learning_rate
from rlox.collectors import RolloutBatch, RolloutCollector
from rlox.policies import make_policy

__all__ = ["OnPolicyAlgorithm", "export_actor"]



def export_actor(policy: Any, observation_space: Any) -> dict[str, Any] | None:
    """``Algorithm.export_policy``'s dict for an ``rlox.policies`` actor-critic (its ``actor``
    ``nn.Sequential`` and, for Gaussian policies, ``log_std``) reading ``observation_space``;
    None for a policy without an ``actor`` ``nn.Sequential``. RecurrentPPO exports its heads
    with it (reading the LSTM's features)."""
    actor = getattr(policy, "actor", None)
    if not isinstance(actor, torch.nn.Sequential):
        return None
    if getattr(policy, "features", None) is None and len(observation_space.shape or ()) > 1:
        # an MLP policy sees flattened observations (a CNN's first layer takes the images)
        actor = torch.nn.Sequential(torch.nn.Flatten(), *actor)
    if getattr(policy, "discrete", False):
        return {"distribution": "categorical", "networks": {"actor": actor}, "outputs": {"logits": ["actor"]}}
    log_std = getattr(policy, "log_std", None)
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
        self._setup_compiled_collection()

    # ------------------------------------------------------------------ compiled collection
    def _setup_compiled_collection(self) -> None:
        """Build the rollout kernel where it can run (``compiled_collection``: None = there,
        True = required, False = never)."""
        requested = self.config.compiled_collection
        why_not = compiled_collection_unsupported(self, auto=requested is None)
        if requested and why_not:
            raise ValueError(f"{type(self).__name__}(compiled_collection=True) cannot run here: {why_not} "
                             f"(compiled_collection=None picks it wherever it can run)")
        self._compiled_collection_why_not = why_not
        if why_not is None and requested is not False:
            self.compiled_collector: CompiledCollection | None = CompiledCollection(
                self.policy, self.collector.env_id, self.config.n_envs, self.seed, self.config.gamma,
                self.config.gae_lambda, self.device)
        else:
            self.compiled_collector = None
        self._compiled_collection = self.compiled_collector is not None

    @property
    def compiled_collection(self) -> bool:
        """Whether rollouts run in the compiled kernel (else ``RolloutCollector``'s torch loop).
        Switching between ``train`` calls hands the envs and episodes over, so training
        continues where it was; True raises a ValueError where the kernel cannot run."""
        return self._compiled_collection

    @compiled_collection.setter
    def compiled_collection(self, value: bool) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"compiled_collection must be True or False, got {value!r}")
        if bool(value) == self._compiled_collection:
            return
        if value:
            why_not = compiled_collection_unsupported(self, auto=False)
            if why_not:
                raise ValueError(f"{type(self).__name__}.compiled_collection = True cannot run here: {why_not}")
            if self.compiled_collector is None:
                cfg = self.config
                self.compiled_collector = CompiledCollection(self.policy, self.collector.env_id, cfg.n_envs,
                                                             self.seed, cfg.gamma, cfg.gae_lambda, self.device)
            self.compiled_collector.from_collector(self.collector)
        else:
            self.compiled_collector.to_collector(self.collector)
        self._compiled_collection = bool(value)

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
        return export_actor(self.policy, self.observation_space)

    # ------------------------------------------------------------------ the loop
    def set_learning_rate(self, lr: float) -> None:
        set_learning_rate(self.optimizers.values(), lr)

    def current_learning_rate(self) -> float:
        lr = self.config.learning_rate
        return lr * self.progress_remaining if self.config.anneal_lr else lr

    def _collect_rollout(self) -> RolloutBatch:
        """One rollout of ``n_steps`` per env (GAE included), compiled or through the torch
        collector; records the finished episodes and the phase timings."""
        cfg = self.config
        on_step = self.callbacks.on_step if self.callbacks.needs_step else None
        if self._compiled_collection:
            # env_step: the whole kernel (forward pass and sampling included)
            batch, t_kernel, t_gae = self.compiled_collector.collect(self.policy, cfg.n_steps, on_step)
            self.time_phase("env_step", t_kernel)
            self.time_phase("gae_compute", t_gae)
            self.record_episodes(self.compiled_collector.episode_returns, self.compiled_collector.episode_lengths)
            self.stop_requested = self.compiled_collector.stop_requested
            return batch
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

    def timing_summary(self) -> dict[str, float]:
        """Share of wall time (percent) spent collecting (env steps, policy forward and GAE, or
        the compiled kernel and GAE) and training (gradient updates), over all ``train`` calls."""
        collect = sum(self.timings.get(k, 0.0) for k in ("env_step", "policy_forward", "gae_compute"))
        train = self.timings.get("gradient_update", 0.0)
        total = collect + train
        if total <= 0:
            return {"collection_pct": 0.0, "training_pct": 0.0}
        return {"collection_pct": round(100.0 * collect / total, 1),
                "training_pct": round(100.0 * train / total, 1)}

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
    # Which collector ran is saved, and the compiled one's envs and action streams with it, so
    # a resumed run continues exactly on the same path.
    def _state_dict(self) -> dict[str, Any]:
        state = {"policy": self.policy.state_dict(),
                 "sde_noise": getattr(self.policy, "sde_noise", None),
                 "optimizers": {k: opt.state_dict() for k, opt in self.optimizers.items()},
                 "collector": self.collector.state_dict(),
                 "compiled_collection": self._compiled_collection}
        if self.compiled_collector is not None:
            state.update(self.compiled_collector.state_dict())
        return state

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.policy.load_state_dict(state["policy"])
        if state.get("sde_noise") is not None:
            self.policy.sde_noise = state["sde_noise"].to(self.device)
        for k, opt in self.optimizers.items():
            opt.load_state_dict(state["optimizers"][k])
        self.collector.load_state_dict(to_numpy_tree(state["collector"]))
        # Both collectors' states come from the checkpoint (no hand-over). Checkpoints written
        # before compiled_collection existed: HybridPPO's hold "kernel", PPO's collected with torch.
        compiled = bool(state.get("compiled_collection", "kernel" in state))
        if compiled and self.compiled_collector is None and "kernel" in state \
                and compiled_collection_unsupported(self, auto=False) is None:
            cfg = self.config               # (e.g. a CPU run resumed on another device)
            self.compiled_collector = CompiledCollection(self.policy, self.collector.env_id, cfg.n_envs,
                                                         self.seed, cfg.gamma, cfg.gae_lambda, self.device)
        if "kernel" in state and self.compiled_collector is not None:
            self.compiled_collector.load_state_dict(to_numpy_tree(
                {"kernel": state["kernel"], "compiled_rng": state["compiled_rng"]}))
        # (where the kernel cannot run, e.g. loaded for another env, the torch collector goes on)
        self._compiled_collection = compiled and self.compiled_collector is not None
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
