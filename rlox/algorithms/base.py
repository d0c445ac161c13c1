"""``Algorithm``: what every rlox algorithm shares (the harness), so each algorithm file only
says how it collects data and how it learns.

The base class owns:

* config parsing (``config_class``; unknown keywords are a TypeError with suggestions),
* seeding: networks are initialised from ``seed`` without touching torch's global generator;
  action sampling and minibatch shuffles use the algorithm's own ``torch.Generator`` and NumPy
  ``Generator``, so runs are reproducible and resumable,
* the training loop (``train``): runs *iterations* (``_iteration``, one rollout + update for
  on-policy methods) until the step budget is spent, calling the callbacks' hooks and the
  logger, timing each phase in ``self.timings`` (seconds per phase, cumulative),
* ``predict`` input checking, and ``save`` / ``load`` of the full state (weights, optimisers,
  config, counters, RNG streams, env and normaliser state) in a file that
  ``torch.load(weights_only=True)`` reads, written atomically.

Subclasses set ``name`` and ``config_class`` and implement ``_iteration``, ``_predict`` and
the ``_state_dict`` / ``_load_state_dict`` pair for their own parts.
"""
from __future__ import annotations

import abc
import json
import math
import time
from collections import deque
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlox.callbacks import Callback, CallbackList
from rlox.checkpointing import CheckpointError, atomic_torch_save, safe_torch_load
from rlox.config import ConfigBase
from rlox.envs import env_label
from rlox.optim import adam  # noqa: F401  (re-exported: the one Adam factory)

__all__ = ["Algorithm", "NamedNetworks", "adam", "to_torch_tree", "to_numpy_tree", "mean_loss_metrics", "CHECKPOINT_FORMAT", "CHECKPOINT_VERSION"]

CHECKPOINT_FORMAT = "rlox-checkpoint"
CHECKPOINT_VERSION = 1


def resolve_device(device: str | torch.device) -> torch.device:
    """``device`` as a torch.device that this torch can use, or a ValueError saying why not."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device={device!r} is not a torch device ({exc}); pass 'cpu', 'cuda' or "
                         f"'cuda:0'") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
        raise ValueError(f"device={device!r} but this torch {torch.__version__} ({build}) sees no CUDA "
                         f"device; pass device='cpu', or install a CUDA build of torch on a machine "
                         f"with an NVIDIA GPU")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ValueError(f"device={device!r} but only {torch.cuda.device_count()} CUDA device(s) are "
                         f"visible (indices 0 .. {torch.cuda.device_count() - 1})")
    if dev.type == "mps" and not (hasattr(torch.backends, "mps") and torch.backends.mps.is_available()):
        raise ValueError(f"device={device!r} but MPS is not available in this torch/machine; pass "
                         f"device='cpu'")
    return dev


def to_torch_tree(obj: Any) -> Any:
    """NumPy arrays (and scalars) inside dicts/lists -> tensors, so ``weights_only`` loads them."""
    if isinstance(obj, np.ndarray):
        return torch.from_numpy(np.ascontiguousarray(obj).copy())
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: to_torch_tree(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_torch_tree(v) for v in obj]
    return obj


def to_numpy_tree(obj: Any) -> Any:
    """The inverse of ``to_torch_tree`` (tensors -> NumPy arrays)."""
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu().numpy()
    if isinstance(obj, dict):
        return {k: to_numpy_tree(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [to_numpy_tree(v) for v in obj]
    return obj


def mean_loss_metrics(steps: list[torch.Tensor], names: Sequence[str]) -> dict[str, float]:
    """Means over an iteration's gradient steps of their stacked metric tensors (each ``[len(names)]``,
    detached), as ``loss/<name>``, with one device sync; NaN entries are skipped. Empties ``steps``."""
    if not steps:
        return {}
    means = torch.stack(steps).float().nanmean(0).tolist()
    steps.clear()
    return {f"loss/{name}": float(v) for name, v in zip(names, means)}


def _env_kwargs(env: Any) -> dict[str, Any] | None:
    """The gymnasium kwargs of an env object, when they are plain JSON values (for checkpoints)."""
    spec = getattr(env, "spec", None)
    kwargs = dict(getattr(spec, "kwargs", None) or {})
    if not kwargs:
        return None
    try:
        json.dumps(kwargs)
    except (TypeError, ValueError):
        return None
    return kwargs


def _resolvable(env_id: Any) -> bool:
    """Whether a checkpoint's env label can be built again (native, gymnasium or registered)."""
    from rlox.envs import is_native
    from rlox.plugins import ENV_REGISTRY

    if not isinstance(env_id, str):
        return False
    if is_native(env_id) or env_id in gym.registry or ":" in env_id or env_id in ENV_REGISTRY:
        return True
    try:
        gym.spec(env_id)       # versionless and namespaced ids
    except Exception:
        return False
    return True


class Algorithm(abc.ABC):
    """Base of the rlox algorithms.

    Args:
        env_id: a gymnasium id, an ``rlox.plugins.ENV_REGISTRY`` name, or a gymnasium env object.
        seed: seeds envs, network initialisation, action sampling and shuffling.
        callbacks: ``rlox.callbacks.Callback`` instances (hooks; one returning False stops).
        logger: None or an object with ``on_train_step(step, metrics)`` (``rlox.logging``).
        device: torch device for the networks.
        **config: fields of ``config_class``.
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type[ConfigBase]]

    def __init__(self, env_id: Any = "CartPole-v1", *, seed: int = 0,
                 callbacks: Sequence[Any] | None = None, logger: Any = None,
                 device: str | torch.device = "cpu", **config: Any) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.config = self.config_class.from_kwargs(type(self).__name__, config)
        self.env_id = env_id
        self.seed = int(seed)
        self.device = resolve_device(device)
        self.callbacks = CallbackList(callbacks)
        self.logger = logger
        # Counters (saved with the model).
        self.num_timesteps = 0
        self.iterations = 0
        self.episodes = 0
        self._run_start = 0
        self._run_end = 0
        # Own random streams: action sampling (torch) and shuffles / exploration (NumPy).
        self.torch_gen = torch.Generator(device="cpu").manual_seed(self.seed)
        self.np_rng = np.random.default_rng(self.seed)
        self.timings: dict[str, float] = {}
        self.episode_returns: deque[float] = deque(maxlen=100)
        self.episode_lengths: deque[int] = deque(maxlen=100)
        self.last_metrics: dict[str, Any] = {}

    # ------------------------------------------------------------------ subclass interface
    @abc.abstractmethod
    def _iteration(self) -> tuple[dict[str, Any], bool]:
        """Run one iteration (collect + learn); return (namespaced metrics, keep_going)."""

    @abc.abstractmethod
    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        """Actions [B, *action_shape] for a batch of (already normalised) observations."""

    @abc.abstractmethod
    def _state_dict(self) -> dict[str, Any]:
        """The subclass's parts of a checkpoint (modules, optimisers, env state)."""

    @abc.abstractmethod
    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Restore ``_state_dict``'s parts (tensors as saved; ``to_numpy_tree`` for arrays)."""

    # The single-env spaces: an algorithm that steps envs through ``self.collector`` reads them
    # from it; one without a collector (IMPALA, DreamerV3, offline) sets ``self._obs_space`` and
    # ``self._act_space`` in ``__init__``.
    @property
    def observation_space(self) -> gym.Space:
        """The single-env observation space."""
        return self._space("_obs_space", "observation_space")

    @property
    def action_space(self) -> gym.Space:
        """The single-env action space."""
        return self._space("_act_space", "action_space")

    def _space(self, attr: str, name: str) -> gym.Space:
        space = self.__dict__.get(attr)
        if space is None:
            collector = self.__dict__.get("collector")
            if collector is None:
                raise AttributeError(f"{type(self).__name__} has no {name}: it sets neither self.{attr} nor "
                                     f"self.collector in __init__")
            space = getattr(collector, name)
        return space

    def obs_normalizer(self) -> Any:
        """The observation normaliser applied before the policy (None if there is none)."""
        return None

    # ------------------------------------------------------------------ the training loop
    @property
    def progress_remaining(self) -> float:
        """1 at the start of the current ``train`` run, 0 at its end (for schedules)."""
        span = self._run_end - self._run_start
        if span <= 0:
            return 1.0
        return max(0.0, 1.0 - (self.num_timesteps - self._run_start) / span)

    def time_phase(self, phase: str, seconds: float) -> None:
        """Add ``seconds`` to ``self.timings[phase]`` (what TimingCallback reports)."""
        self.timings[phase] = self.timings.get(phase, 0.0) + seconds

    def record_episodes(self, returns: Sequence[float], lengths: Sequence[int]) -> None:
        """Count finished training episodes (their raw, unnormalised returns)."""
        if len(returns):
            self.episode_returns.extend(float(r) for r in returns)
            self.episode_lengths.extend(int(n) for n in lengths)
            self.episodes += len(returns)

    @property
    def mean_reward(self) -> float:
        """Mean return of the last (up to 100) finished training episodes; NaN before any."""
        return float(np.mean(self.episode_returns)) if self.episode_returns else math.nan

    def train(self, total_timesteps: int | None = None, *, resume: bool = False) -> dict[str, Any]:
        """Train for ``total_timesteps`` more env steps (all envs together).

        Schedules (learning-rate annealing, clip range, exploration) run over this call's
        budget. ``resume=True`` instead continues the run a checkpoint was saved in the middle
        of, to that run's original end, exactly as if it had not stopped.

        Returns:
            ``mean_reward`` (mean of the last finished episodes' returns), ``episodes``,
            ``timesteps``, ``sps`` (env steps per second of this call) and the last
            iteration's metrics without their namespace (``policy_loss``, ...).
        """
        if resume:
            if total_timesteps is not None:
                raise ValueError("train(resume=True) continues the saved run to its end; do not pass "
                                 "total_timesteps (or pass it without resume=True for a new run)")
            if self.num_timesteps >= self._run_end:
                raise ValueError(f"nothing to resume: the saved run ended at step {self._run_end} and "
                                 f"the model is at step {self.num_timesteps}; call train(total_timesteps)")
        else:
            if isinstance(total_timesteps, bool) or not isinstance(total_timesteps, (int, np.integer)):
                raise TypeError(f"total_timesteps must be an int >= 1, got {total_timesteps!r}")
            if total_timesteps < 1:
                raise ValueError(f"total_timesteps must be >= 1, got {total_timesteps}")
            self._run_start = self.num_timesteps
            self._run_end = self.num_timesteps + int(total_timesteps)
        threads = getattr(self.config, "torch_threads", None)
        previous_threads = torch.get_num_threads()
        if threads is not None and threads != previous_threads:
            torch.set_num_threads(threads)
        try:
            return self._train_loop()
        finally:
            if threads is not None and threads != previous_threads:
                torch.set_num_threads(previous_threads)

    def _train_loop(self) -> dict[str, Any]:
        self._before_training()
        start_steps, t0 = self.num_timesteps, time.perf_counter()
        loggers = self._loggers()
        # Loggers given as logger= that are Callbacks see the hooks too (after the callbacks).
        extra = [lg for lg in loggers if isinstance(lg, Callback) and not any(lg is cb for cb in self.callbacks)]
        hooks = CallbackList([*self.callbacks, *extra]) if extra else self.callbacks
        self._hooks, self._pending_eval = hooks, {}
        hooks.init_callback(self)
        keep_going = hooks.on_training_start()
        metrics: dict[str, Any] = {}
        while keep_going and self.num_timesteps < self._run_end:
            t_it = time.perf_counter()
            metrics, keep_going = self._iteration()
            self.iterations += 1
            elapsed = time.perf_counter() - t0
            metrics["time/sps"] = (self.num_timesteps - start_steps) / max(elapsed, 1e-9)
            metrics["time/iteration"] = time.perf_counter() - t_it
            metrics["train/timesteps"] = self.num_timesteps
            metrics["train/episodes"] = self.episodes
            metrics["train/mean_reward"] = self.mean_reward
            if self.episode_lengths:
                metrics["train/mean_length"] = float(np.mean(self.episode_lengths))
            t_cb, t_eval = time.perf_counter(), self.timings.get("evaluation", 0.0)
            keep_going = hooks.on_update(metrics) and keep_going
            if self._pending_eval:  # an evaluation ran in a callback: its eval/ metrics go to the loggers
                metrics.update(self._pending_eval)
                self._pending_eval = {}
            for lg in loggers:
                lg.on_train_step(self.num_timesteps, metrics)
            eval_time = self.timings.get("evaluation", 0.0) - t_eval
            self.time_phase("callbacks", time.perf_counter() - t_cb - eval_time)
        self.last_metrics = metrics
        hooks.on_training_end(metrics)
        if self._pending_eval:  # a final evaluation at the end of training
            metrics.update(self._pending_eval)
            for lg in loggers:
                lg.on_train_step(self.num_timesteps, dict(self._pending_eval))
            self._pending_eval = {}
        self._hooks = None
        t_cb = time.perf_counter()
        for lg in loggers:
            flush = getattr(lg, "flush", None)
            if callable(flush):
                flush()
        self.time_phase("callbacks", time.perf_counter() - t_cb)   # buffered loggers write here
        elapsed = time.perf_counter() - t0
        # Namespaces dropped, except eval/ (eval_mean_reward beside the training mean_reward).
        result = {(k.replace("/", "_", 1) if k.startswith("eval/") else k.split("/", 1)[-1]): v
                  for k, v in metrics.items()}
        result.update(mean_reward=self.mean_reward, episodes=self.episodes,
                      timesteps=self.num_timesteps,
                      sps=(self.num_timesteps - start_steps) / max(elapsed, 1e-9))
        return result

    def _before_training(self) -> None:
        """Hook for subclasses (e.g. warn about settings that do not fit the budget)."""

    # ------------------------------------------------------------------ harness (rlox.callbacks, rlox.logging)
    def _loggers(self) -> list[Any]:
        """``logger`` (one object or a list) plus the ``LoggerCallback``s among the callbacks;
        each gets ``on_train_step(step, metrics)`` once per iteration."""
        given = self.logger if isinstance(self.logger, (list, tuple)) else [self.logger]
        out = [lg for lg in given if lg is not None]
        for i, lg in enumerate(out):
            if not callable(getattr(lg, "on_train_step", None)):
                raise TypeError(f"logger {type(lg).__name__} has no on_train_step(step, metrics) method; use "
                                f"an rlox.logging logger or subclass rlox.logging.LoggerCallback")
        out += [cb for cb in self.callbacks if getattr(cb, "is_logger", False) and not any(cb is lg for lg in out)]
        return out

    def report_eval(self, metrics: Mapping[str, Any]) -> bool:
        """Hand an evaluation's ``eval/...`` metrics to every callback's ``on_eval`` and, with
        this iteration's metrics, to the loggers (``EvalCallback`` calls it). Returns False
        when a callback asks to stop."""
        pending = getattr(self, "_pending_eval", None)
        if pending is not None:
            pending.update(metrics)
        hooks = getattr(self, "_hooks", None) or self.callbacks
        return hooks.on_eval(metrics)

    @property
    def remaining_timesteps(self) -> int:
        """Env steps left in the current (or saved) ``train`` run."""
        return max(0, self._run_end - self.num_timesteps)

    def export_policy(self) -> dict[str, Any] | None:
        """The deployable actor, for ``rlox.artifacts`` (``actor.safetensors`` + ``inference.yaml``)
        and ``rlox.inference`` (which rebuilds it with torch alone). None: not supported.

        Algorithms that support artifacts return a dict:

        * ``distribution``: "categorical" (output ``logits``), "gaussian" (``mean`` and a
          ``log_std``, actions clipped to the bounds), "squashed_gaussian" (``mean`` and
          ``log_std``; tanh, then scaled to the bounds), "deterministic" (``action``, clipped),
          "squashed_deterministic" (``action`` before its tanh; tanh, then scaled to the
          bounds), "greedy" (``q_values``, argmax), or DreamerV3's "unimix_categorical"
          (``logits``) and "bounded_normal" (``mean_std``);
        * ``networks``: name -> ``torch.nn.Sequential`` of ``Linear`` and activation layers;
        * ``outputs``: output name -> list of network names applied in turn to the
          (normalised) observation;
        * ``tensors`` (optional): name -> tensor, e.g. a state-independent ``log_std``;
        * ``recurrent`` (optional): a recurrent core the outputs read instead of the
          observation, ``{"type": "lstm", "module": nn.LSTM}`` or ``{"type": "rssm", ...}``
          (DreamerV3); ``distribution_args`` (optional): e.g. ``{"unimix": 0.01}`` for
          ``unimix_categorical``. See ``rlox.inference.RecurrentInferencePolicy``.
        """
        return None

    # ------------------------------------------------------------------ inference
    def _check_obs(self, obs: Any) -> tuple[np.ndarray, bool]:
        """``obs`` as float32 [B, *obs_shape] and whether it was a single observation."""
        space = self.observation_space
        shape = tuple(space.shape or ())
        if isinstance(obs, torch.Tensor):
            obs = obs.detach().cpu().numpy()
        if isinstance(obs, Mapping):   # a Dict observation (or a batch of them): rlox.multi_input
            from rlox.multi_input import find_dict_layout

            layout = find_dict_layout(self)
            if layout is None:
                raise TypeError(f"obs is a dict, but {env_label(self.env_id)} has observation space {space}")
            obs = layout.flatten(obs)
        else:   # a Discrete / MultiDiscrete / MultiBinary / Tuple observation in its own form
            from rlox.multi_input import find_obs_layout

            obs_layout = find_obs_layout(self)
            if obs_layout is not None and obs_layout.is_raw(obs):
                obs = obs_layout.flatten(obs)
        arr = np.asarray(obs)
        if arr.dtype.kind not in "biuf":
            raise TypeError(f"obs must hold numbers, got dtype {arr.dtype}")
        if arr.shape == shape:
            return arr.reshape(1, *shape).astype(np.float32, copy=False), True
        if arr.ndim == len(shape) + 1 and arr.shape[1:] == shape:
            return arr.astype(np.float32, copy=False), False
        raise ValueError(f"obs has shape {arr.shape}, expected {shape} (one observation) or "
                         f"(B, {', '.join(map(str, shape))}) (a batch) for {env_label(self.env_id)}")

    def predict(self, obs: Any, deterministic: bool = False) -> Any:
        """Action(s) for one observation ``[*obs]`` or a batch ``[B, *obs]``, as NumPy.

        Observations are normalised with the frozen training statistics when normalisation is
        on. One discrete observation gives an ``np.int64``; continuous actions are clipped to
        the action space's bounds.
        """
        batch, single = self._check_obs(obs)
        norm = self.obs_normalizer()
        if norm is not None:
            batch = norm.normalize_obs(batch)
        with torch.inference_mode():
            actions = self._predict(torch.as_tensor(batch, device=self.device), bool(deterministic))
        if single:
            actions = actions[0]
            if isinstance(self.action_space, gym.spaces.Discrete):
                return np.int64(actions)
        return actions

    # ------------------------------------------------------------------ persistence
    def _rng_state(self) -> dict[str, Any]:
        return {"torch": self.torch_gen.get_state(),
                "numpy": json.dumps(self.np_rng.bit_generator.state)}

    def _set_rng_state(self, state: Mapping[str, Any]) -> None:
        self.torch_gen.set_state(state["torch"])
        self.np_rng.bit_generator.state = json.loads(state["numpy"])

    def save(self, path: str | Path) -> None:
        """Write the full training state to ``path`` (atomically; torch format readable with
        ``weights_only=True``): weights, optimisers, config, counters, RNG streams, env and
        normaliser state. ``load`` restores it, and training continues exactly."""
        ckpt = {
            "format": CHECKPOINT_FORMAT,
            "version": CHECKPOINT_VERSION,
            "algorithm": self.name,
            "env_id": self.env_name,
            "env_kwargs": _env_kwargs(self.env_id),
            "seed": self.seed,
            "config": self.config.to_dict(),
            "counters": {"num_timesteps": self.num_timesteps, "iterations": self.iterations,
                         "episodes": self.episodes, "run_start": self._run_start,
                         "run_end": self._run_end},
            "episodes": {"returns": list(self.episode_returns), "lengths": list(self.episode_lengths)},
            "timings": dict(self.timings),
            "rng": self._rng_state(),
            "state": to_torch_tree(self._state_dict()),
        }
        atomic_torch_save(ckpt, path)

    @classmethod
    def load(cls, path: str | Path, env_id: Any = None, *, device: str | torch.device = "cpu",
             callbacks: Sequence[Any] | None = None, logger: Any = None) -> "Algorithm":
        """Rebuild an algorithm from ``save``'s file (read with ``weights_only=True``).

        Args:
            path: the checkpoint.
            env_id: env to attach; default: the one recorded in the checkpoint.
        """
        ckpt = cls._read_checkpoint(path)
        if env_id is None:
            env_id = ckpt["env_id"]
            if not cls._can_rebuild_env(env_id):
                raise CheckpointError(
                    f"{str(path)!r} was trained on {env_id!r}, which is neither a gymnasium id nor "
                    f"an rlox.plugins.ENV_REGISTRY name (a custom env instance or factories); pass the "
                    f"env: {cls.__name__}.load(path, env_id={env_id}(...)) or a registered id")
            if ckpt.get("env_kwargs"):
                env_id = gym.make(env_id, **ckpt["env_kwargs"])
        algo = cls(env_id, seed=int(ckpt["seed"]), device=device, callbacks=callbacks, logger=logger,
                   **ckpt["config"])
        algo._restore(ckpt)
        return algo

    @classmethod
    def _can_rebuild_env(cls, env_id: Any) -> bool:
        """Whether ``load`` can build the env a checkpoint names (multi-agent algorithms widen it)."""
        return _resolvable(env_id)

    @classmethod
    def _read_checkpoint(cls, path: str | Path) -> dict[str, Any]:
        """``save``'s file as a dict, after checking its header, version and algorithm."""
        ckpt = safe_torch_load(path)
        if not isinstance(ckpt, dict) or ckpt.get("format") != CHECKPOINT_FORMAT:
            raise CheckpointError(f"{str(path)!r} is not an rlox checkpoint (no '{CHECKPOINT_FORMAT}' "
                                  f"header); it may be a bare state_dict or another library's file")
        if int(ckpt.get("version", 0)) > CHECKPOINT_VERSION:
            raise CheckpointError(f"{str(path)!r} has checkpoint version {ckpt['version']}, newer than "
                                  f"this rlox understands ({CHECKPOINT_VERSION}); upgrade rlox")
        if ckpt.get("algorithm") != cls.name:
            raise CheckpointError(f"{str(path)!r} holds a {ckpt.get('algorithm')!r} model, not {cls.name!r}; "
                                  f"load it with that algorithm")
        return ckpt

    def _restore(self, ckpt: Mapping[str, Any]) -> None:
        c = ckpt["counters"]
        self.num_timesteps, self.iterations, self.episodes = (int(c["num_timesteps"]), int(c["iterations"]),
                                                              int(c["episodes"]))
        self._run_start, self._run_end = int(c["run_start"]), int(c["run_end"])
        self.episode_returns.clear()
        self.episode_lengths.clear()
        self.episode_returns.extend(float(x) for x in ckpt["episodes"]["returns"])
        self.episode_lengths.extend(int(x) for x in ckpt["episodes"]["lengths"])
        self.timings = {k: float(v) for k, v in ckpt.get("timings", {}).items()}
        self._set_rng_state(ckpt["rng"])
        self._load_state_dict(ckpt["state"])

    @property
    def env_name(self) -> str:
        """The env's label for checkpoints and messages: its id, or for an unregistered env (an
        instance or factories) the name of the env the collector built."""
        label = env_label(self.env_id)
        built = getattr(getattr(getattr(self, "collector", None), "env", None), "env_id", None)
        if not isinstance(self.env_id, str) and isinstance(built, str) and built:
            return built if getattr(self.env_id, "spec", None) is None else label
        return label

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env_id={self.env_name!r}, seed={self.seed})"


class NamedNetworks(abc.ABC):
    """The parts shared by the families that list their networks by name (off-policy, offline):
    ``_modules`` and ``_optimizers`` (name -> object) and ``_extra_state`` (e.g. SAC's log alpha)
    are saved and restored together, and the per-gradient-step metric tensors in ``_metrics``
    are averaged once per iteration under ``metric_names``. Mixed in before ``Algorithm``."""

    metric_names: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def _modules(self) -> dict[str, torch.nn.Module]:
        """Every module whose weights are saved (name -> module)."""

    @abc.abstractmethod
    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        """Every optimizer whose state is saved (name -> optimizer)."""

    def _extra_state(self) -> dict[str, Any]:
        """Tensors or numbers besides modules and optimizers to save (e.g. SAC's log alpha)."""
        return {}

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``_extra_state``."""

    def _networks_state(self) -> dict[str, Any]:
        """``modules``, ``optimizers`` and ``extra`` of a checkpoint."""
        return {"modules": {k: m.state_dict() for k, m in self._modules().items()},
                "optimizers": {k: opt.state_dict() for k, opt in self._optimizers().items()},
                "extra": self._extra_state()}

    def _load_networks_state(self, state: Mapping[str, Any]) -> None:
        """Restore ``_networks_state``'s parts."""
        for k, m in self._modules().items():
            m.load_state_dict(state["modules"][k])
        for k, opt in self._optimizers().items():
            opt.load_state_dict(state["optimizers"][k])
        self._load_extra_state(state.get("extra", {}))

    def _flush_metrics(self) -> dict[str, float]:
        """Means of the iteration's per-step metric tensors (one sync), namespaced ``loss/``."""
        return mean_loss_metrics(self._metrics, self.metric_names)
