"""``OffPolicyAlgorithm``: what SAC, TD3 and DQN share.

One *iteration* (what the logger and ``on_update`` see) covers about ``steps_per_iteration``
env steps, made of cycles of:

1. collection: ``train_freq`` vector steps through ``OffPolicyCollector`` (uniform random
   actions while ``num_timesteps < learning_starts``), each inserted into the replay buffer
   with one ``push_batch``;
2. learning: once ``num_timesteps > learning_starts``, ``gradient_steps`` calls of the
   subclass's ``_train_step`` (``-1``: as many as env steps were collected).

This is SB3's ``collect_rollouts`` / ``train`` schedule (the same hyperparameters mean the same
thing), but the loop is chunked so loggers and callbacks run once per iteration, and losses
stay tensors until the iteration's end (one sync, not one ``.item()`` per gradient step).

The subclass builds its networks in ``_build`` (seeded, without touching torch's global
generator), acts in ``_act`` and learns in ``_train_step``; the replay buffer, env, seeding,
save/load (optionally with the buffer) and ``predict`` live here.
"""
from __future__ import annotations

import abc
import copy
import math
import os
import time
import warnings
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlox.algorithms.base import Algorithm, NamedNetworks, to_numpy_tree
from rlox.checkpointing import CheckpointError
from rlox.envs import env_label
from rlox.errors import RloxWarning
from rlox.exploration import Exploration
from rlox.off_policy_collector import OffPolicyCollector
from rlox.optim import set_learning_rate

# The optimiser helpers (make_adam, FastAdam, polyak_update, clip_grad_norm) live in rlox.optim.
__all__ = ["OffPolicyAlgorithm", "OffPolicyWarning", "buffer_path"]


class OffPolicyWarning(RloxWarning):
    """A setting of an off-policy algorithm does not fit the run (e.g. learning never starts)."""


def _cpu_has_fast_bf16() -> bool:
    """Whether oneDNN has bfloat16 matrix kernels for this CPU (AVX512-BF16 or AMX)."""
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def buffer_path(path: str | os.PathLike) -> Path:
    """Where ``save(path, include_buffer=True)`` writes the replay buffer: ``<path>.buffer.npz``."""
    return Path(str(path) + ".buffer.npz")


class OffPolicyAlgorithm(NamedNetworks, Algorithm):
    """Base of SAC, TD3 and DQN.

    Args:
        env_id: a gymnasium id, an ``rlox.plugins.ENV_REGISTRY`` name, or a gymnasium env object.
        seed, callbacks, logger, device: see ``Algorithm``.
        buffer: a replay buffer to use (``rlox.ReplayBuffer`` or compatible: ``push_batch``,
            ``sample``, ``__len__``); default: one of ``buffer_size`` made here.
        replay_buffer_class, replay_buffer_kwargs: as in SB3, the class of the buffer made here
            (e.g. ``rlox.her.HerReplayBuffer``), called as ``cls(buffer_size, obs_dim=, act_dim=,
            env=<the vector env>, n_envs=, seed=, **replay_buffer_kwargs)``.
        collector: an ``OffPolicyCollector`` to use (its env, ``n_envs``, exploration); its buffer
            must be ``buffer`` when both are given.
        **config: fields of the algorithm's config dataclass.
    """

    #: True for algorithms that act in a Discrete space (DQN), False for Box ones (SAC, TD3).
    discrete_actions: ClassVar[bool] = False
    supports_images: ClassVar[bool] = False     # uint8 image observations (a CNN network)
    #: What to suggest when the action space does not fit.
    other_family: ClassVar[str] = ""
    #: Names of the per-gradient-step values ``_train_step`` returns (logged as ``loss/<name>``).
    metric_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, env_id: Any = "Pendulum-v1", *, seed: int = 0, callbacks: Sequence[Any] | None = None,
                 logger: Any = None, device: str | torch.device = "cpu", buffer: Any = None,
                 collector: OffPolicyCollector | None = None, replay_buffer_class: type | None = None,
                 replay_buffer_kwargs: Mapping[str, Any] | None = None, **config: Any) -> None:
        n_envs_given = "n_envs" in config
        if replay_buffer_class is not None and buffer is not None:
            raise ValueError("pass either buffer= or replay_buffer_class=, not both")
        if replay_buffer_kwargs is not None and replay_buffer_class is None:
            raise ValueError("replay_buffer_kwargs needs replay_buffer_class= (e.g. rlox.her.HerReplayBuffer)")
        self.replay_buffer_class = replay_buffer_class
        self.replay_buffer_kwargs = dict(replay_buffer_kwargs or {})
        super().__init__(env_id, seed=seed, callbacks=callbacks, logger=logger, device=device, **config)
        cfg = self.config
        if replay_buffer_class is not None and (getattr(cfg, "prioritized", False) or getattr(cfg, "n_step", 1) > 1):
            raise ValueError(f"replay_buffer_class={replay_buffer_class.__name__} makes the buffer, so "
                             f"prioritized=True and n_step > 1 (which need rlox's own buffers) cannot be used with "
                             f"it; set prioritized=False and n_step=1")
        if collector is None:
            collector = OffPolicyCollector(env_id, cfg.n_envs, seed=self.seed)
        else:
            if not isinstance(collector, OffPolicyCollector):
                raise TypeError(f"collector must be an rlox.off_policy_collector.OffPolicyCollector, got "
                                f"{type(collector).__name__}")
            if env_label(collector.env_id) != env_label(env_id):
                raise ValueError(f"the collector steps {env_label(collector.env_id)!r} but env_id is "
                                 f"{env_label(env_id)!r}; pass the same env to both")
            if n_envs_given and cfg.n_envs != collector.n_envs:
                raise ValueError(f"n_envs = {cfg.n_envs} but the collector has {collector.n_envs} envs; "
                                 f"leave n_envs out when passing a collector")
            if cfg.n_envs != collector.n_envs:
                self.config = cfg = cfg.merge({"n_envs": collector.n_envs})
        self.collector = collector
        if getattr(collector, "obs_dtype", np.float32) == np.uint8 and not self.supports_images:
            raise ValueError(f"{type(self).__name__} does not take image observations (got "
                             f"{collector.observation_space}); its networks are MLPs that would flatten "
                             f"{collector.obs_dim} pixels. Use SAC, TD3, DQN or PPO (NatureCNN chosen "
                             f"automatically) or DreamerV3 for pixels, or give it state observations")
        self._check_action_space()
        self.obs_dim, self.act_dim = collector.obs_dim, collector.act_dim
        if buffer is None:
            buffer = collector.buffer
        elif collector.buffer is not None and collector.buffer is not buffer:
            raise ValueError("the collector fills a different buffer than buffer=; pass the collector's "
                             "buffer (or create the collector with buffer=buf)")
        if buffer is None:
            buffer = self._make_buffer()
        else:
            self._check_buffer(buffer)
        self.buffer = buffer
        collector.buffer = buffer
        if collector.exploration is None:
            collector.set_exploration(self._default_exploration())
        # Image encoders of the actor-critic algorithms (see _build_encoders); None for vectors.
        self.encoder = self.encoder_target = self.actor_encoder = self.actor_encoder_target = None
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self._build()
        # bfloat16 autocast of the gradient steps (the collection's forward passes stay float32).
        self._bf16 = cfg.precision == "bfloat16"
        if self._bf16 and self.device.type == "cpu" and not _cpu_has_fast_bf16():
            warnings.warn(f"{type(self).__name__}: precision='bfloat16' requested, but this CPU has no "
                          f"bfloat16 matrix instructions (AVX512-BF16 or AMX), so it would run slower than "
                          f"float32; use precision='float32'", OffPolicyWarning, stacklevel=2)
        self._n_updates = 0          # gradient steps taken (all runs)
        self._n_calls = 0            # vector env steps taken (all runs)
        self._metrics: list[torch.Tensor] = []
        self._include_buffer = False
        self._saved_buffer: dict[str, Any] | None = None

    # ------------------------------------------------------------------ subclass interface
    @abc.abstractmethod
    def _build(self) -> None:
        """Create the networks, target networks and optimizers (called under the seed)."""

    @abc.abstractmethod
    def _act(self, obs: torch.Tensor) -> torch.Tensor:
        """Exploration-time actions for a batch of observations [n_envs, obs_dim], in policy space
        (continuous: [n_envs, act_dim] in [-1, 1]; discrete: [n_envs] ints)."""

    @abc.abstractmethod
    def _train_step(self) -> torch.Tensor:
        """One gradient step on a sampled batch; returns the detached values of ``metric_names``."""

    def _sample_transitions(self) -> tuple[torch.Tensor, ...]:
        """A uniform minibatch of ``batch_size`` transitions from the buffer, drawn from the
        algorithm's own generator, as tensors on the device: ``(obs, actions, rewards, next_obs,
        not_done)`` with ``not_done = 1 - terminated`` (only termination stops the bootstrap; a
        truncated step bootstraps from its true final observation)."""
        b = self.buffer.sample(self.config.batch_size, seed=int(self.np_rng.integers(0, 2**63 - 1)))
        dev = self.device
        return (torch.from_numpy(b["obs"]).to(dev), torch.from_numpy(b["actions"]).to(dev),
                torch.from_numpy(b["rewards"]).to(dev), torch.from_numpy(b["next_obs"]).to(dev),
                1.0 - torch.from_numpy(b["terminated"]).to(dev))

    def _default_exploration(self) -> Exploration | None:
        """The exploration strategy used when the collector has none (None: the policy explores)."""
        return None

    def _before_collect(self) -> None:
        """Hook before each collection phase (SAC draws new gSDE exploration matrices here)."""

    def _after_collect(self, vector_steps: int) -> None:
        """Hook after each collection phase (DQN updates its target network here)."""

    # ------------------------------------------------------------------ set-up helpers
    def _check_action_space(self) -> None:
        space = self.collector.action_space
        name = type(self).__name__
        if self.discrete_actions and not isinstance(space, gym.spaces.Discrete):
            raise ValueError(f"{name} needs a Discrete action space, but {env_label(self.env_id)} has {space}; "
                             f"{self.other_family}")
        if not self.discrete_actions:
            if not isinstance(space, gym.spaces.Box):
                raise ValueError(f"{name} needs a continuous (Box) action space, but {env_label(self.env_id)} "
                                 f"has {space}; {self.other_family}")
            if not self.collector.bounded:
                raise ValueError(f"{name} squashes actions into the action bounds, but {env_label(self.env_id)}'s "
                                 f"action space {space} is unbounded; wrap the env with "
                                 f"gymnasium.wrappers.ClipAction / RescaleAction to give it finite bounds")

    def _buffer_capacity(self) -> int:
        return int(self.config.buffer_size)

    def _make_buffer(self) -> Any:
        from rlox.buffers import ReplayBuffer

        if self.replay_buffer_class is not None:
            return self.replay_buffer_class(self._buffer_capacity(), obs_dim=self.obs_dim, act_dim=self.act_dim,
                                            env=self.collector.env, n_envs=self.collector.n_envs,
                                            seed=self._substream_seed(1), **self.replay_buffer_kwargs)

        return ReplayBuffer(self._buffer_capacity(), act_dim=self.act_dim, seed=self._substream_seed(1),
                            **self._obs_layout())

    def _obs_layout(self) -> dict[str, Any]:
        """How the buffer stores observations: flat float32 vectors, or uint8 images of their shape."""
        if getattr(self.collector, "obs_dtype", np.float32) == np.uint8:
            return {"obs_shape": self.collector.obs_shape, "obs_dtype": np.uint8}
        return {"obs_dim": self.obs_dim}

    def _check_buffer(self, buffer: Any) -> None:
        for method in ("push_batch", "sample", "__len__"):
            if not callable(getattr(buffer, method, None)):
                raise TypeError(f"buffer must have push_batch, sample and __len__ (e.g. rlox.ReplayBuffer), "
                                f"got {type(buffer).__name__} without {method}")
        for attr, want in (("obs_dim", self.obs_dim), ("act_dim", self.act_dim)):
            have = getattr(buffer, attr, None)
            if have is not None and int(have) != want:
                raise ValueError(f"buffer has {attr}={have}, but {env_label(self.env_id)} needs {attr}={want}")

    # ------------------------------------------------------------------ image encoders (SAC, TD3)
    def _build_encoders(self, actor_target: bool = False) -> int:
        """CNN encoders for image observations (``features_extractor``: NatureCNN or ImpalaCNN from
        ``rlox.cnn``, which detect the channel layout and scale uint8 to [0, 1] themselves); the
        MLP heads then read the encoder's features instead of the flat observation. Returns the
        heads' input size (``obs_dim`` for vector observations, where no encoder is made).

        ``share_encoder=True`` (default) is the pixel-SAC recipe of SAC-AE (Yarats et al., 2019) and
        DrQ (Yarats et al., 2021), whose actor updates call ``actor(obs, detach_encoder=True)``:
        one encoder, ``self.encoder``, owned by the critics and trained by the critic loss only;
        the actor reads its features detached.
        ``share_encoder=False`` is SB3's SAC/TD3 default (``share_features_extractor=False``): the
        actor owns a second CNN, ``self.actor_encoder``, trained by the actor loss. Target copies
        follow their networks (``encoder_target``; ``actor_encoder_target`` when ``actor_target``:
        TD3's target actor) with the same Polyak averaging.
        """
        from rlox.cnn import check_image_policy, make_feature_extractor

        space = self.collector.observation_space
        kind = check_image_policy(space, self.config.features_extractor, type(self).__name__)
        if kind is None:
            return self.obs_dim
        self.encoder = make_feature_extractor(space, kind).to(self.device)   # type: ignore[arg-type]
        self.encoder_target = copy.deepcopy(self.encoder).requires_grad_(False)
        if not self.config.share_encoder:
            self.actor_encoder = make_feature_extractor(space, kind).to(self.device)   # type: ignore[arg-type]
            if actor_target:
                self.actor_encoder_target = copy.deepcopy(self.actor_encoder).requires_grad_(False)
        return int(self.encoder.features_dim)

    def _critic_features(self, obs: torch.Tensor) -> torch.Tensor:
        """The critics' input for ``obs`` [B, *obs] (the encoder's features, with gradients)."""
        return obs if self.encoder is None else self.encoder(obs)

    def _actor_features(self, obs: torch.Tensor, critic_features: torch.Tensor | None = None) -> torch.Tensor:
        """The actor's input for ``obs``: its own encoder's features, or the critic encoder's
        detached (``critic_features`` when they were computed already, to save a forward pass)."""
        if self.actor_encoder is not None:
            return self.actor_encoder(obs)
        if self.encoder is None:
            return obs
        if critic_features is None:
            critic_features = self.encoder(obs)
        return critic_features.detach()

    @torch.no_grad()
    def _target_features(self, next_obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(target actor's input, target critics' input) for ``next_obs``, from the target encoders."""
        if self.encoder_target is None:
            return next_obs, next_obs
        critic_in = self.encoder_target(next_obs)
        return (critic_in if self.actor_encoder_target is None else self.actor_encoder_target(next_obs)), critic_in

    def _params(self, *names: str) -> list[torch.nn.Parameter]:
        """The parameters of the modules named (attributes; those that are None are skipped), in order."""
        return [p for name in names if getattr(self, name) is not None for p in getattr(self, name).parameters()]

    def _encoder_modules(self) -> dict[str, torch.nn.Module]:
        """The encoders that exist, by attribute name (for ``_modules``: saved with the model)."""
        names = ("encoder", "encoder_target", "actor_encoder", "actor_encoder_target")
        return {k: getattr(self, k) for k in names if getattr(self, k) is not None}

    def _actor_export_input(self) -> list[torch.nn.Module]:
        """The layers in front of the actor's MLP in an inference artifact: its encoder (a CNN),
        or a Flatten for multi-dimensional vector observations, or nothing."""
        enc = self.actor_encoder if self.actor_encoder is not None else self.encoder
        if enc is not None:
            return [enc]
        return [torch.nn.Flatten()] if len(self.observation_space.shape or ()) > 1 else []

    def _substream_seed(self, k: int) -> int:
        """A seed for sub-stream ``k`` derived from the algorithm's seed (independent streams)."""
        return int(np.random.SeedSequence([self.seed & 0xFFFFFFFFFFFFFFFF, k]).generate_state(1, np.uint64)[0] >> 1)

    # ------------------------------------------------------------------ inference (spaces: Algorithm)
    @property
    def n_envs(self) -> int:
        return self.collector.n_envs

    def _policy_numpy(self, obs: np.ndarray) -> np.ndarray:
        """The collector's view of ``_act``: NumPy in, NumPy out, no autograd."""
        with torch.inference_mode():
            return self._act(torch.from_numpy(obs).to(self.device)).cpu().numpy()

    def scale_actions(self, actions: np.ndarray) -> np.ndarray:
        """Policy-space actions in [-1, 1] -> the env's bounds, [B, *action_shape] float32."""
        space = self.action_space
        low = np.asarray(space.low, dtype=np.float32).reshape(-1)
        high = np.asarray(space.high, dtype=np.float32).reshape(-1)
        a = np.asarray(actions, dtype=np.float32).reshape(-1, low.shape[0])
        out = low + (a + 1.0) * 0.5 * (high - low)
        return np.clip(out, low, high).reshape(-1, *space.shape).astype(np.float32)

    # ------------------------------------------------------------------ the loop
    @property
    def _progress(self) -> float:
        """Fraction of the current run done (0 -> 1), for exploration schedules."""
        return 1.0 - self.progress_remaining

    def _before_training(self) -> None:
        if self.config.learning_starts >= self._run_end:
            warnings.warn(f"{type(self).__name__}: learning_starts = {self.config.learning_starts} is not below "
                          f"the run's end at step {self._run_end}, so no gradient step will be taken; lower "
                          f"learning_starts or train for more steps", OffPolicyWarning, stacklevel=3)

    def _on_vector_step(self) -> bool:
        # Callbacks see the step counter move with every vector step.
        self.num_timesteps += self.collector.n_envs
        return self.callbacks.on_step()

    def _iteration(self) -> tuple[dict[str, Any], bool]:
        cfg = self.config
        n_envs = self.collector.n_envs
        target = min(self._run_end, self.num_timesteps + cfg.steps_per_iteration)
        keep_going = self.callbacks.on_rollout_start()
        on_step = self._on_vector_step if self.callbacks.needs_step else None
        t_env = t_learn = 0.0
        span = max(self._run_end - self._run_start, 1)
        while keep_going and self.num_timesteps < target:
            # 1. Collect train_freq vector steps (fewer at the end of the run); SB3's schedule:
            #    uniform random actions while num_timesteps < learning_starts, exploration
            #    progress advancing with every step.
            remaining = math.ceil((self._run_end - self.num_timesteps) / n_envs)
            n_random = max(0, math.ceil((cfg.learning_starts - self.num_timesteps) / n_envs))
            t0 = time.perf_counter()
            self._before_collect()
            start = self.num_timesteps
            result = self.collector.collect(
                self._policy_numpy, min(cfg.train_freq, remaining), random_steps=n_random,
                progress=self._progress, progress_step=n_envs / span, on_step=on_step)
            self.num_timesteps = start + result.steps * n_envs
            self._n_calls += result.steps
            self.record_episodes(result.episode_returns, result.episode_lengths)
            self._after_collect(result.steps)
            t1 = time.perf_counter()
            t_env += t1 - t0
            if result.stopped:
                keep_going = False
            # 2. Learn (SB3: after learning_starts env steps, on a non-empty buffer).
            if self.num_timesteps > cfg.learning_starts and len(self.buffer) > 0 and result.steps:
                n_grad = cfg.gradient_steps if cfg.gradient_steps >= 0 else result.steps * n_envs
                if cfg.anneal_lr:   # SB3: the schedule is read at the start of each learning phase
                    self.set_learning_rate(cfg.learning_rate * self.progress_remaining)
                with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self._bf16):
                    self._learn(n_grad)
                t_learn += time.perf_counter() - t1
        self.time_phase("env_step", t_env)
        self.time_phase("gradient_update", t_learn)
        rollout = {"train/mean_reward": self.mean_reward, "train/episodes": self.episodes,
                   "train/buffer_size": len(self.buffer)}
        keep_going = self.callbacks.on_rollout_end(rollout) and keep_going
        metrics = {**rollout, **self._flush_metrics(), "train/n_updates": self._n_updates,
                   "time/env_step": t_env, "time/gradient_update": t_learn}
        metrics.update(self._schedule_metrics())
        if cfg.anneal_lr:
            metrics["train/learning_rate"] = next(iter(self._optimizers().values())).param_groups[0]["lr"]
        return metrics, keep_going

    def _learn(self, n_grad: int) -> None:
        """One learning phase: ``n_grad`` gradient steps (their metrics kept as tensors)."""
        for _ in range(n_grad):
            self._metrics.append(self._train_step())
            self._n_updates += 1

    def set_learning_rate(self, lr: float) -> None:
        """Set the learning rate of every optimizer (``anneal_lr`` calls it before each phase)."""
        set_learning_rate(self._optimizers().values(), lr)

    def _schedule_metrics(self) -> dict[str, float]:
        """Scalars to log each iteration besides the losses (epsilon, alpha, ...)."""
        return {}

    # ------------------------------------------------------------------ persistence
    def _state_dict(self) -> dict[str, Any]:
        state = {
            **self._networks_state(),
            "collector": self.collector.state_dict(),
            "updates": {"n_updates": self._n_updates, "n_calls": self._n_calls},
            "buffer": {"included": bool(self._include_buffer), "len": int(len(self.buffer)),
                       "class": type(self.buffer).__name__},
        }
        return state

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._load_networks_state(state)
        self.collector.load_state_dict(to_numpy_tree(state["collector"]))
        self._n_updates = int(state["updates"]["n_updates"])
        self._n_calls = int(state["updates"]["n_calls"])
        self._saved_buffer = dict(state.get("buffer") or {})

    def save(self, path: str | os.PathLike, include_buffer: bool = False) -> None:
        """Write the full training state to ``path`` (see ``Algorithm.save``).

        Args:
            include_buffer: also write the replay buffer to ``<path>.buffer.npz`` (the buffer's own
                NumPy format, no pickle, written atomically), so ``load`` resumes training exactly.
                Without it a stale buffer file beside ``path`` is removed, and a loaded model
                starts from an empty buffer.
        """
        bpath = buffer_path(path)
        if include_buffer:
            save = getattr(self.buffer, "save", None)
            if not callable(save):
                raise TypeError(f"include_buffer=True needs a buffer with save/load; "
                                f"{type(self.buffer).__name__} has none")
            tmp = bpath.with_name(f".{bpath.name[:-4]}.{os.getpid()}.tmp.npz")
            try:
                save(str(tmp))
                os.replace(tmp, bpath)
            finally:
                if tmp.exists():
                    tmp.unlink()
        self._include_buffer = bool(include_buffer)
        try:
            super().save(path)
        finally:
            self._include_buffer = False
        if not include_buffer and bpath.exists():
            bpath.unlink()

    @classmethod
    def load(cls, path: str | os.PathLike, env_id: Any = None, *, device: str | torch.device = "cpu",
             callbacks: Sequence[Any] | None = None, logger: Any = None) -> "OffPolicyAlgorithm":
        """Rebuild a model from ``save``'s file; the replay buffer too when it was saved with it
        (``include_buffer=True``), else the model starts with an empty buffer."""
        algo = super().load(path, env_id, device=device, callbacks=callbacks, logger=logger)
        info = algo._saved_buffer or {}
        if info.get("included"):
            bpath = buffer_path(path)
            if not bpath.is_file():
                raise CheckpointError(f"{str(path)!r} was saved with its replay buffer, but {str(bpath)!r} is "
                                      f"missing; copy it beside the checkpoint")
            buf_cls = type(algo.buffer)
            if buf_cls.__name__ != info.get("class"):
                raise CheckpointError(f"{str(bpath)!r} holds a {info.get('class')}, but the model uses a "
                                      f"{buf_cls.__name__}")
            buf = buf_cls.load(str(bpath))
            if len(buf) != int(info["len"]):
                raise CheckpointError(f"{str(bpath)!r} holds {len(buf)} transitions but the checkpoint was "
                                      f"saved with {info['len']}; the two files are from different saves")
            algo.buffer = buf
            algo.collector.buffer = buf
        return algo
