"""``OfflineAlgorithm``: what TD3+BC, IQL, CQL and BC share.

Offline RL learns from a fixed dataset, never stepping an env while training:

    from rlox.algorithms.iql import IQL
    algo = IQL(dataset="pendulum.npz", obs_dim=3, act_dim=1, eval_env="Pendulum-v1", eval_freq=5_000)
    algo.train(n_gradient_steps=50_000)
    action = algo.predict(obs)                         # in the env's (or dataset's) action units

``dataset`` is anything ``rlox.offline.resolve_dataset`` takes: an ``OfflineDatasetBuffer``,
a ``.npz`` or D4RL ``.hdf5`` path, a Minari id installed locally or a ``MinariDataset``, an
``rlox.ReplayBuffer``, or a mapping of arrays. One *iteration* (what loggers, ``on_update`` and
``EvalCallback`` see) is ``steps_per_iteration`` gradient steps, and ``num_timesteps`` counts
gradient steps, so ``eval_freq`` and ``CheckpointCallback.save_freq`` are in gradient steps.

Actions. Continuous policies act in ``[-1, 1]^act_dim``; dataset actions are mapped there from
the action bounds (the env's or ``action_space``'s Box, else ``[-1, 1]`` when every dataset
action lies inside it, else the dataset's per-dimension min and max), and ``predict`` maps back.
Discrete actions (BC, CQL) need a ``Discrete`` ``action_space`` or env; the dataset then holds
one integer action per transition and ``act_dim`` is the number of actions.

Observations. With ``normalize_obs`` (or a dataset built with ``normalize=True``) observations
are standardised with the dataset's mean and std; the statistics are saved with the model and
applied in ``predict`` and evaluation.

A subclass builds its networks in ``_build`` (seeded) and takes one gradient step on a batch
in ``_train_step``; the dataset, sampling, the loop, evaluation and persistence live here.
"""
from __future__ import annotations

import abc
import math
import time
from pathlib import Path
from typing import Any, ClassVar, Mapping, NamedTuple, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlox.algorithms.base import Algorithm, NamedNetworks
from rlox.envs import env_label
from rlox.offline import OfflineDatasetBuffer, resolve_dataset

__all__ = ["OfflineAlgorithm", "Batch"]


class Batch(NamedTuple):
    """A minibatch on the algorithm's device. ``obs``/``next_obs`` [B, obs_dim] (normalised when
    normalisation is on); ``actions`` [B, act_dim] in [-1, 1] (discrete: [B] int64);
    ``rewards`` [B]; ``not_done`` [B] = 1 - terminated (a truncated step still bootstraps)."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    next_obs: torch.Tensor
    not_done: torch.Tensor


class _RunningStats:
    """``obs_rms`` view of frozen statistics (what ``rlox.artifacts`` reads from a normaliser)."""

    def __init__(self, mean: np.ndarray, std: np.ndarray) -> None:
        self._mean, self._var = mean.astype(np.float64), std.astype(np.float64) ** 2

    def mean(self) -> np.ndarray:
        return self._mean

    def var(self) -> np.ndarray:
        return self._var

    def count(self) -> float:
        return 1.0


class DatasetObsNormalizer:
    """``(obs - mean) / std`` with the dataset's frozen statistics (``std`` includes +1e-3)."""

    norm_obs = True
    clip_obs = math.inf
    epsilon = 0.0

    def __init__(self, mean: np.ndarray, std: np.ndarray) -> None:
        self.mean = np.asarray(mean, dtype=np.float32)
        self.std = np.asarray(std, dtype=np.float32)
        self.obs_rms = _RunningStats(self.mean, self.std)

    def normalize_obs(self, obs: np.ndarray) -> np.ndarray:
        x = np.asarray(obs, dtype=np.float32)
        return ((x.reshape(x.shape[0], -1) - self.mean) / self.std).reshape(x.shape).astype(np.float32, copy=False)


def _env_spaces(env: Any) -> tuple[gym.Space, gym.Space, Any]:
    """Observation space (as evaluation sees it: Discrete, Tuple, ... flattened), action space and
    ``ObsLayout`` (None for Box observations) of an env id or env object (a made env is closed again)."""
    if isinstance(env, gym.Env):
        from rlox.multi_input import flatten_structured

        flat = flatten_structured(env)      # a wrapper around env (nothing is stepped or reset)
        return flat.observation_space, env.action_space, getattr(flat, "obs_layout", None)
    from rlox.evaluation import _make_eval_env

    made, owned = _make_eval_env(env, 0)
    try:
        return made.observation_space, made.action_space, getattr(made, "obs_layout", None)
    finally:
        if owned:
            made.close()


def _raw_obs_size(space: gym.Space) -> int:
    """Values per observation when a Discrete / Multi* / Tuple observation is stored as it is
    (a Discrete one as one integer)."""
    parts = space.spaces if isinstance(space, gym.spaces.Tuple) else (space,)
    return int(sum(1 if isinstance(p, gym.spaces.Discrete) else int(np.prod(p.shape)) for p in parts))


def _flatten_dataset_obs(data: OfflineDatasetBuffer, layout: Any, name: str, seed: int) -> OfflineDatasetBuffer:
    """``data`` with its observations in the env's own form (a Discrete observation as one integer,
    as ``collect_dataset`` and Minari store them) turned into the flat vectors the networks see
    (``ObsLayout``: one-hot for the integer spaces), so training, ``predict`` and evaluation agree."""
    if data.normalize:
        raise ValueError(f"{name}: the dataset was normalised when loaded, but its observations are the raw "
                         f"values of {layout.space} and must be one-hot encoded first; load it with "
                         f"normalize=False (the algorithm normalises with normalize_obs)")
    cols = data.gather(np.arange(len(data), dtype=np.int64))
    parts = layout.space.spaces if isinstance(layout.space, gym.spaces.Tuple) else (layout.space,)

    def flat(x: np.ndarray, field: str) -> np.ndarray:
        n, out, at = x.shape[0], [], 0
        for sub in parts:
            k = _raw_obs_size(sub)
            v = x[:, at:at + k]
            at += k
            if isinstance(sub, gym.spaces.Box):
                out.append(v.reshape(n, *sub.shape))
                continue
            bad = np.flatnonzero((v != np.round(v)).any(axis=1))
            if bad.size:
                raise ValueError(f"{name}: dataset {field}[{int(bad[0])}] = {v[bad[0]].tolist()} is not an integer "
                                 f"observation of {sub}")
            v = v.astype(np.int64)
            out.append(v[:, 0] if isinstance(sub, gym.spaces.Discrete) else v.reshape(n, *sub.shape))
        try:
            return layout.flatten(tuple(out) if isinstance(layout.space, gym.spaces.Tuple) else out[0])
        except ValueError as e:
            raise ValueError(f"{name}: dataset {field}: {e}") from None

    return OfflineDatasetBuffer(flat(cols["obs"], "observations"), flat(cols["next_obs"], "next_observations"),
                                cols["actions"], cols["rewards"], cols["terminated"], cols["truncated"], seed=seed)


class OfflineAlgorithm(NamedNetworks, Algorithm):
    """Base of the offline algorithms.

    Args:
        env_id: optional env (gymnasium id or object) used only for evaluation and its spaces;
            ``eval_env=`` is the same argument by name.
        dataset: the data (see the module docstring); may be omitted to build a model for
            ``predict`` only (``load`` does so; ``load(path, dataset=...)`` resumes training).
        obs_dim, act_dim: checked against the dataset (a ValueError names both on a mismatch);
            inferred from it when omitted. Discrete: ``act_dim`` is the number of actions.
        action_space: a ``gymnasium.spaces.Box`` or ``Discrete`` giving the action bounds or
            count, when no env is given.
        eval_freq: gradient steps between evaluations in the env (an ``EvalCallback``).
        n_eval_episodes: episodes per evaluation.
        seed, callbacks, logger, device: see ``Algorithm``.
        **config: fields of the algorithm's config dataclass.
    """

    #: Whether the algorithm also learns Discrete actions (BC, CQL).
    supports_discrete: ClassVar[bool] = False
    #: Names of the per-gradient-step values ``_train_step`` returns (logged as ``loss/<name>``).
    metric_names: ClassVar[tuple[str, ...]] = ()

    def __init__(self, env_id: Any = None, *, dataset: Any = None, obs_dim: int | None = None,
                 act_dim: int | None = None, action_space: gym.Space | None = None, eval_env: Any = None,
                 eval_freq: int | None = None, n_eval_episodes: int = 10, seed: int = 0,
                 callbacks: Sequence[Any] | None = None, logger: Any = None, device: str | torch.device = "cpu",
                 **config: Any) -> None:
        if eval_env is not None:
            if env_id is not None and env_id is not eval_env:
                raise ValueError(f"pass the evaluation env once: env_id={env_label(env_id)!r} and "
                                 f"eval_env={env_label(eval_env)!r} were both given")
            env_id = eval_env
        super().__init__(env_id, seed=seed, callbacks=callbacks, logger=logger, device=device, **config)
        name = type(self).__name__
        env_obs_space = None
        #: How the env's Discrete / Tuple / ... observations become the flat vectors trained on.
        self.obs_layout = None
        if env_id is not None:
            env_obs_space, env_act_space, self.obs_layout = _env_spaces(env_id)
            if action_space is None:
                action_space = env_act_space
        if action_space is not None and not isinstance(action_space, (gym.spaces.Box, gym.spaces.Discrete)):
            raise ValueError(f"{name} supports Box and Discrete action spaces, got {action_space}")
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if self.discrete and not self.supports_discrete:
            raise ValueError(f"{name} learns continuous actions only, but the action space is {action_space}; "
                             f"use BC or CQL for discrete actions")
        if self.discrete:
            n = int(action_space.n)
            if act_dim is not None and int(act_dim) != n:
                raise ValueError(f"act_dim={act_dim}, but the Discrete action space has {n} actions; for "
                                 f"discrete actions act_dim is the number of actions")
            act_dim = n
        self.dataset: OfflineDatasetBuffer | None = None
        data = None
        if dataset is not None:
            data = resolve_dataset(dataset, seed=self.seed)
            if (self.obs_layout is not None and data.obs_dim != self.obs_layout.flat_dim
                    and data.obs_dim == _raw_obs_size(self.obs_layout.space)):
                data = _flatten_dataset_obs(data, self.obs_layout, name, self.seed)
            self._check_dims(data, obs_dim, act_dim)
            obs_dim = data.obs_dim if obs_dim is None else int(obs_dim)
            if act_dim is None:
                act_dim = data.act_dim
        if obs_dim is None or act_dim is None:
            raise ValueError(f"{name} needs a dataset, or obs_dim and act_dim (and action_space) to build a "
                             f"model for predict; got dataset=None, obs_dim={obs_dim!r}, act_dim={act_dim!r}")
        for label, value in (("obs_dim", obs_dim), ("act_dim", act_dim)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{label} must be an int >= 1, got {value!r}")
        self.obs_dim, self.act_dim = int(obs_dim), int(act_dim)
        if env_obs_space is not None and int(np.prod(env_obs_space.shape or (1,))) != self.obs_dim:
            raise ValueError(f"the dataset has obs_dim={self.obs_dim}, but {env_label(env_id)} observations have "
                             f"shape {env_obs_space.shape}; evaluate in the env the data came from")
        self._obs_space = env_obs_space if env_obs_space is not None else gym.spaces.Box(
            -np.inf, np.inf, (self.obs_dim,), np.float32)
        # Action bounds: the space's, else from the dataset (see the module docstring).
        if self.discrete:
            self._act_space = action_space
            low = high = np.zeros(0, np.float32)
        elif action_space is not None:
            low = np.asarray(action_space.low, np.float32).reshape(-1)
            high = np.asarray(action_space.high, np.float32).reshape(-1)
            if low.shape[0] != self.act_dim:
                raise ValueError(f"act_dim={self.act_dim}, but the action space {action_space} has "
                                 f"{low.shape[0]} dimensions")
            if not (np.isfinite(low).all() and np.isfinite(high).all()):
                raise ValueError(f"{name} squashes actions into the action bounds, but {action_space} is "
                                 f"unbounded; pass action_space= with finite bounds")
        elif data is not None:
            acts = data.gather(np.arange(len(data), dtype=np.int64), ["actions"])["actions"]
            lo, hi = acts.min(axis=0), acts.max(axis=0)
            if lo.min() >= -1.0 and hi.max() <= 1.0:
                low, high = -np.ones(self.act_dim, np.float32), np.ones(self.act_dim, np.float32)
            else:
                low, high = lo.astype(np.float32), np.maximum(hi, lo + 1e-6).astype(np.float32)
        else:
            low, high = -np.ones(self.act_dim, np.float32), np.ones(self.act_dim, np.float32)
        if not self.discrete:
            self._act_space = gym.spaces.Box(low, high, dtype=np.float32)
        self._set_action_scale(low, high)
        # Observation statistics: the dataset's own normalisation, or normalize_obs here.
        self._normalizer: DatasetObsNormalizer | None = None
        self._norm_in_batch = False
        self._obs_mean = self._obs_std = None
        if data is not None:
            if data.normalize:
                self._normalizer = DatasetObsNormalizer(data.obs_mean, data.obs_std)
            elif self.config.normalize_obs:
                self._set_batch_normalizer(data.obs_mean, data.obs_std)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self._build()
        self._n_updates = 0
        self._metrics: list[torch.Tensor] = []
        self.n_eval_episodes = int(n_eval_episodes)
        if eval_freq is not None:
            if env_id is None:
                raise ValueError(f"eval_freq={eval_freq} needs an env to evaluate in: pass eval_env= (or the "
                                 f"env as the first argument)")
            from rlox.callbacks import EvalCallback

            self.callbacks.append(EvalCallback(env_id, eval_freq=eval_freq, n_eval_episodes=n_eval_episodes,
                                               seed=self.seed))
        if data is not None:
            self._attach(data)

    # ------------------------------------------------------------------ subclass interface
    @abc.abstractmethod
    def _build(self) -> None:
        """Create the networks, target networks and optimizers (called under the seed)."""

    @abc.abstractmethod
    def _train_step(self, batch: Batch) -> torch.Tensor:
        """One gradient step; returns the detached values of ``metric_names`` (stacked)."""

    @abc.abstractmethod
    def _policy_action(self, obs: torch.Tensor, deterministic: bool) -> torch.Tensor:
        """Actions for normalised observations [B, obs_dim]: [B, act_dim] in [-1, 1], or [B] ints."""

    # ------------------------------------------------------------------ dataset
    def _check_dims(self, data: OfflineDatasetBuffer, obs_dim: Any, act_dim: Any) -> None:
        name = type(self).__name__
        if obs_dim is not None and int(obs_dim) != data.obs_dim:
            raise ValueError(f"{name}: obs_dim={obs_dim}, but the dataset's observations have {data.obs_dim} "
                             f"values each; pass obs_dim={data.obs_dim} (or check you loaded the right dataset)")
        if self.discrete:
            if data.act_dim != 1:
                raise ValueError(f"{name}: discrete actions need one integer action per transition, but the "
                                 f"dataset's actions have {data.act_dim} values each")
            acts = data.gather(np.arange(len(data), dtype=np.int64), ["actions"])["actions"].reshape(-1)
            bad = np.flatnonzero((acts != np.round(acts)) | (acts < 0) | (acts >= int(act_dim)))
            if bad.size:
                raise ValueError(f"{name}: dataset action {float(acts[bad[0]])!r} at transition {int(bad[0])} is not an "
                                 f"integer in [0, {act_dim}) (the Discrete action space's range)")
        elif act_dim is not None and int(act_dim) != data.act_dim:
            raise ValueError(f"{name}: act_dim={act_dim}, but the dataset's actions have {data.act_dim} values "
                             f"each; pass act_dim={data.act_dim} (or check you loaded the right dataset)")

    def _attach(self, data: OfflineDatasetBuffer) -> None:
        self.dataset = data
        # Minibatches are drawn by the dataset's Cython sampler from seeds of the algorithm's
        # own NumPy stream, so a run (and a resumed one) is reproducible.

    def set_dataset(self, dataset: Any) -> None:
        """Attach (or replace) the training dataset; its dimensions must match the model's.
        The saved observation statistics stay in use, so a loaded model resumes exactly."""
        data = resolve_dataset(dataset, seed=self.seed)
        self._check_dims(data, self.obs_dim, self.act_dim)
        if data.normalize and self._normalizer is None and not self._norm_in_batch:
            raise ValueError("the dataset was built with normalize=True, but this model was trained on raw "
                             "observations; pass the dataset without normalize=True")
        self._attach(data)

    def _set_action_scale(self, low: np.ndarray, high: np.ndarray) -> None:
        self._act_low, self._act_high = low.astype(np.float32), high.astype(np.float32)
        self._rescale = bool(low.size) and not (np.all(low == -1.0) and np.all(high == 1.0))
        center, half = (high + low) / 2, (high - low) / 2
        self._act_center = torch.as_tensor(center, device=self.device)
        self._act_half = torch.as_tensor(half, device=self.device)

    def _set_batch_normalizer(self, mean: np.ndarray, std: np.ndarray) -> None:
        self._normalizer = DatasetObsNormalizer(mean, std)
        self._norm_in_batch = True
        self._obs_mean = torch.as_tensor(self._normalizer.mean, device=self.device)
        self._obs_std = torch.as_tensor(self._normalizer.std, device=self.device)

    def obs_normalizer(self) -> DatasetObsNormalizer | None:
        return self._normalizer

    def sample_batch(self) -> Batch:
        """A uniform minibatch of ``batch_size`` transitions (with replacement) as tensors."""
        b = self.dataset.sample(self.config.batch_size, seed=int(self.np_rng.integers(0, 2**63 - 1)))
        dev = self.device
        obs, next_obs = torch.from_numpy(b["obs"]).to(dev), torch.from_numpy(b["next_obs"]).to(dev)
        if obs.dtype != torch.float32:
            obs, next_obs = obs.float(), next_obs.float()
        if self._norm_in_batch:
            obs = (obs - self._obs_mean) / self._obs_std
            next_obs = (next_obs - self._obs_mean) / self._obs_std
        actions = torch.from_numpy(b["actions"]).to(dev)
        if self.discrete:
            actions = actions.reshape(-1).long()
        elif self._rescale:
            actions = ((actions - self._act_center) / self._act_half).clamp_(-1.0, 1.0)
        return Batch(obs, actions, torch.from_numpy(b["rewards"]).to(dev), next_obs,
                     1.0 - torch.from_numpy(b["terminated"]).to(dev))

    # ------------------------------------------------------------------ inference (spaces: Algorithm)
    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        actions = self._policy_action(obs.reshape(obs.shape[0], -1), deterministic).cpu().numpy()
        if self.discrete:
            return actions.astype(np.int64)
        out = self._act_low + (actions + 1.0) * 0.5 * (self._act_high - self._act_low)
        return np.clip(out, self._act_low, self._act_high).reshape(-1, *self._act_space.shape).astype(np.float32)

    # ------------------------------------------------------------------ the loop
    def train(self, n_gradient_steps: int | None = None, *, total_timesteps: int | None = None,
              resume: bool = False) -> dict[str, Any]:
        """Take ``n_gradient_steps`` more gradient steps (``total_timesteps`` is the same number,
        for ``Trainer`` and the CLI). ``resume=True`` continues a loaded checkpoint's run to its
        end exactly. Returns the last iteration's metrics (``critic_loss``, ...), ``timesteps``
        (gradient steps so far), ``sps`` (gradient steps per second) and, with evaluation,
        ``eval_mean_reward``."""
        if n_gradient_steps is not None and total_timesteps is not None and n_gradient_steps != total_timesteps:
            raise ValueError(f"pass n_gradient_steps ({n_gradient_steps}) or total_timesteps ({total_timesteps}), "
                             f"not both")
        steps = n_gradient_steps if n_gradient_steps is not None else total_timesteps
        if self.dataset is None:
            raise ValueError(f"{type(self).__name__} has no dataset to train on; pass dataset= to the constructor, "
                             f"call set_dataset(...), or load(path, dataset=...)")
        if not resume and steps is None:
            raise TypeError("train() needs n_gradient_steps, e.g. train(n_gradient_steps=100_000)")
        return super().train(steps, resume=resume)

    def _iteration(self) -> tuple[dict[str, Any], bool]:
        n = min(self.config.steps_per_iteration, self._run_end - self.num_timesteps)
        keep_going = True
        t0 = time.perf_counter()
        if self.callbacks.needs_step:
            for _ in range(n):
                self._metrics.append(self._train_step(self.sample_batch()))
                self._n_updates += 1
                self.num_timesteps += 1
                if not self.callbacks.on_step():
                    keep_going = False
                    break
        else:
            for _ in range(n):
                self._metrics.append(self._train_step(self.sample_batch()))
                self._n_updates += 1
            self.num_timesteps += n
        elapsed = time.perf_counter() - t0
        self.time_phase("gradient_update", elapsed)
        metrics = {**self._flush_metrics(), "train/n_updates": self._n_updates, "time/gradient_update": elapsed,
                   "time/gradient_steps_per_s": n / max(elapsed, 1e-9)}
        return metrics, keep_going

    # ------------------------------------------------------------------ persistence
    def _state_dict(self) -> dict[str, Any]:
        norm = self._normalizer
        return {
            **self._networks_state(),
            "updates": {"n_updates": self._n_updates},
            "spaces": {"obs_dim": self.obs_dim, "act_dim": self.act_dim, "discrete": self.discrete,
                       "low": self._act_low, "high": self._act_high, "has_env": self.env_id is not None},
            "normalizer": None if norm is None else {"mean": norm.mean, "std": norm.std,
                                                     "in_batch": self._norm_in_batch},
        }

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        self._load_networks_state(state)
        self._n_updates = int(state["updates"]["n_updates"])
        norm = state.get("normalizer")
        if norm is None:
            self._normalizer, self._norm_in_batch = None, False
        elif bool(norm["in_batch"]):
            self._set_batch_normalizer(np.asarray(norm["mean"]), np.asarray(norm["std"]))
        else:
            self._normalizer = DatasetObsNormalizer(np.asarray(norm["mean"]), np.asarray(norm["std"]))
            self._norm_in_batch = False

    @classmethod
    def load(cls, path: str | Path, env_id: Any = None, *, dataset: Any = None, device: str | torch.device = "cpu",
             callbacks: Sequence[Any] | None = None, logger: Any = None) -> "OfflineAlgorithm":
        """Rebuild a model from ``save``'s file: weights, optimizers, observation statistics,
        action bounds, counters and random streams. With ``dataset=`` (the one it was trained
        on) ``train(resume=True)`` continues the run exactly; without, it serves ``predict``."""
        ckpt = cls._read_checkpoint(path)
        spaces = ckpt["state"]["spaces"]
        if env_id is None and spaces.get("has_env"):
            env_id = ckpt["env_id"]
            if ckpt.get("env_kwargs"):
                env_id = gym.make(env_id, **ckpt["env_kwargs"])
        if bool(spaces["discrete"]):
            space: gym.Space = gym.spaces.Discrete(int(spaces["act_dim"]))
        else:
            space = gym.spaces.Box(np.asarray(spaces["low"], np.float32), np.asarray(spaces["high"], np.float32),
                                   dtype=np.float32)
        algo = cls(env_id, obs_dim=int(spaces["obs_dim"]), act_dim=int(spaces["act_dim"]),
                   action_space=None if env_id is not None else space, seed=int(ckpt["seed"]), device=device,
                   callbacks=callbacks, logger=logger, **ckpt["config"])
        if not bool(spaces["discrete"]):   # the bounds the model was trained with, whatever env is attached
            low, high = np.asarray(spaces["low"], np.float32), np.asarray(spaces["high"], np.float32)
            algo._act_space = gym.spaces.Box(low, high, dtype=np.float32)
            algo._set_action_scale(low, high)
        algo._restore(ckpt)
        if dataset is not None:
            algo.set_dataset(dataset)
        return algo

    def export_policy(self) -> dict[str, Any] | None:
        """The deterministic actor for ``rlox.artifacts``: discrete -> ``greedy`` over
        ``_export_head()``'s outputs; continuous -> ``[-1, 1]`` actions mapped onto the bounds."""
        head = self._export_head()
        if head is None:
            return None
        if len(self.observation_space.shape or ()) > 1:
            head = torch.nn.Sequential(torch.nn.Flatten(), *head)
        if self.discrete:
            return {"distribution": "greedy", "networks": {"q": head}, "outputs": {"q_values": ["q"]}}
        rescale = torch.nn.Linear(self.act_dim, self.act_dim)
        low, high = torch.as_tensor(self._act_low), torch.as_tensor(self._act_high)
        with torch.no_grad():
            rescale.weight.copy_(torch.diag((high - low) / 2))
            rescale.bias.copy_((high + low) / 2)
        return {"distribution": "deterministic", "networks": {"actor": torch.nn.Sequential(*head, rescale)},
                "outputs": {"action": ["actor"]}}

    def _export_head(self) -> torch.nn.Sequential | None:
        """Linear/activation layers from a (normalised) observation to the deterministic action in
        [-1, 1] (continuous) or to per-action scores (discrete); None: no export."""
        return None
