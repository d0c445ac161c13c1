"""High-level training: ``Trainer("ppo", env="CartPole-v1", seed=42).train(50_000)``.

A Trainer looks the algorithm class up in ``rlox.plugins.ALGORITHM_REGISTRY`` (built-ins register
through the package's ``rlox.algorithms`` entry points, third parties through ``rlox.plugins``),
merges the tuned preset for (algorithm, env) *under* the user's config (``rlox.presets``;
``preset=False`` opts out), builds the algorithm and delegates ``train``/``predict``/``save``.

Every built-in algorithm has a named trainer, derived from its entry point, so a new algorithm
needs no code here (``PPOTrainer(env=..., config=..., seed=...)`` is ``Trainer("ppo", ...)``);
``trainer_for("my_algo")`` makes one for a plugin's algorithm.
"""
from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

from rlox.presets import merge_preset



def resolve_algorithm(name: str) -> type:
    """The algorithm class registered under ``name`` (case-insensitive).

    Raises KeyError with close matches from the registry when the name is unknown.
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"algorithm must be a non-empty string such as 'ppo', got {name!r}")
    from rlox.plugins import ALGORITHM_REGISTRY

    return ALGORITHM_REGISTRY.get(name.lower())


def _config_fields(algo_cls: type, name: str) -> set[str] | None:
    """Field names of the algorithm's config dataclass: the class's ``config_class``
    attribute, else ``rlox.config.<NAME>Config``; None when neither exists."""
    cfg = getattr(algo_cls, "config_class", None)
    if cfg is not None and dataclasses.is_dataclass(cfg):
        return {f.name for f in dataclasses.fields(cfg)}
    try:
        import rlox.config as config_module
    except ImportError:
        return None
    cfg = getattr(config_module, f"{name.upper()}Config", None)
    if cfg is not None and dataclasses.is_dataclass(cfg):
        return {f.name for f in dataclasses.fields(cfg)}
    return None


def _accepts(fn: Any, name: str) -> bool:
    """Whether callable ``fn`` declares a parameter ``name`` explicitly (``**kwargs`` does not
    count: there it would be taken for a config field)."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return name in params


class Trainer:
    """Train, use and save an rlox algorithm by name.

    Args:
        algorithm: registered algorithm name ("ppo", "a2c", "vpg", "trpo", ... or a plugin's).
            Named subclasses (``PPOTrainer``) fix it and take ``env`` first.
        env: a gymnasium id, an ``rlox.plugins.ENV_REGISTRY`` name, or a gymnasium env object.
        seed: seed of the algorithm (envs, networks, sampling).
        config: algorithm config fields (dict or the algorithm's config dataclass); merged over
            the preset for (algorithm, env) when ``preset`` is True.
        callbacks: list of ``rlox.callbacks.Callback`` (kept as ``trainer.callbacks``).
        logger: None or an object with ``on_train_step(step, metrics)``.
        wrappers: vector-env wrappers (e.g. ``VecNormalize``), passed to the algorithm.
        preset: use the tuned preset for known (algorithm, env) pairs (default True).
        device: torch device string.
        artifacts_dir: write training artifacts there (``rlox.artifacts.TrainingArtifacts``: the
            best ``actor.safetensors``, ``inference.yaml``, ``evaluations.csv``, ...).
        eval_freq: env steps between the artifacts' evaluations (default: 20 per run).
        eval_episodes: episodes per evaluation of the artifacts (default 5).
        **kwargs: more config fields (merged over ``config``).

    Attributes:
        algo: the algorithm instance; ``config``: the merged config dict actually used;
        ``artifacts``: the ``TrainingArtifacts`` callback (None without ``artifacts_dir``).
    """

    algorithm: ClassVar[str | None] = None

    def __init__(self, algorithm: str | None = None, env: Any = "CartPole-v1", *, seed: int = 0,
                 config: Mapping[str, Any] | Any | None = None, callbacks: Sequence[Any] | None = None,
                 logger: Any = None, wrappers: Sequence[Any] | None = None, preset: bool = True,
                 device: str = "cpu", artifacts_dir: str | Path | None = None, eval_freq: int | None = None,
                 eval_episodes: int = 5, **kwargs: Any) -> None:
        name = algorithm if algorithm is not None else type(self).algorithm
        if name is None:
            raise TypeError("Trainer needs an algorithm name, e.g. Trainer('ppo', env='CartPole-v1')")
        algo_cls = resolve_algorithm(name)
        if getattr(algo_cls, "takes_env", True) is False:
            raise TypeError(f"Trainer({name!r}) drives environment algorithms; {algo_cls.__name__} post-trains a "
                            f"language model: use rlox.algorithms.{algo_cls.__name__}(model, ref_model, ...) with "
                            f".train_step(batch) or .train(dataset, n_steps=...), or `python -m rlox llm "
                            f"{name.lower()} --model PATH ...`")
        self.algorithm_name = name.lower()
        user = self._user_config(config)
        user.update(kwargs)
        merged = merge_preset(self.algorithm_name, env, {}, preset=preset)
        fields = _config_fields(algo_cls, self.algorithm_name)
        if fields is not None:
            # A preset only sets fields this algorithm has; unknown *user* keys still reach the
            # algorithm, which rejects them with its own message.
            merged = {k: v for k, v in merged.items() if k in fields}
        merged.update(user)
        self.config: dict[str, Any] = merged
        self.env = env
        self.seed = seed
        self.device = device
        self.callbacks: list[Any] = list(callbacks or [])
        self.logger = logger
        self.wrappers: list[Any] = list(wrappers or [])
        extra: dict[str, Any] = {}
        if self.wrappers:
            if not _accepts(algo_cls, "wrappers"):
                raise TypeError(f"algorithm {self.algorithm_name!r} ({algo_cls.__name__}) does not take "
                                f"wrappers; remove wrappers= or use an algorithm that supports them")
            extra["wrappers"] = self.wrappers
        self.algo = algo_cls(env, seed=seed, callbacks=self.callbacks, logger=logger, device=device,
                             **extra, **merged)
        self.artifacts: Any = None
        if artifacts_dir is not None:
            # Runs after the user's callbacks; trainer.callbacks stays the list given.
            from rlox.artifacts import TrainingArtifacts

            self.artifacts = TrainingArtifacts(artifacts_dir, eval_freq=eval_freq, n_eval_episodes=eval_episodes)
            self.algo.callbacks.append(self.artifacts)

    @staticmethod
    def _user_config(config: Any) -> dict[str, Any]:
        if config is None:
            return {}
        if dataclasses.is_dataclass(config) and not isinstance(config, type):
            to_dict = getattr(config, "to_dict", None)
            return dict(to_dict()) if callable(to_dict) else dataclasses.asdict(config)
        if isinstance(config, Mapping):
            return dict(config)
        raise TypeError(f"config must be a dict or a config dataclass, got {type(config).__name__}")

    @classmethod
    def _wrap(cls, algo: Any, algorithm_name: str, env: Any) -> "Trainer":
        """A Trainer around an existing algorithm instance (no construction, no preset)."""
        self = cls.__new__(cls)
        self.algorithm_name = algorithm_name
        self.algo = algo
        cfg = getattr(algo, "config", None)
        self.config = Trainer._user_config(cfg) if cfg is not None else {}
        self.env = env
        self.seed = getattr(algo, "seed", None)
        self.device = str(getattr(algo, "device", "cpu"))
        self.callbacks = list(getattr(getattr(algo, "callbacks", None), "callbacks", None) or [])
        self.logger = getattr(algo, "logger", None)
        self.wrappers = []
        self.artifacts = None
        return self

    def train(self, total_timesteps: int | None = None, *, resume: bool = False) -> dict[str, Any]:
        """Train for ``total_timesteps`` env steps; returns the algorithm's metrics
        (at least ``mean_reward``, ``episodes``, ``timesteps``, ``sps``).

        ``resume=True`` (without ``total_timesteps``) continues the run a checkpoint was saved
        in (``Trainer.from_checkpoint``) to its original end, exactly."""
        if resume:
            return self.algo.train(resume=True)
        return self.algo.train(total_timesteps=total_timesteps)

    def predict(self, obs: Any, deterministic: bool = False, *, state: Any = None, episode_start: Any = None) -> Any:
        """Action(s) for one observation ``[*obs]`` or a batch ``[B, *obs]`` (NumPy).

        A recurrent algorithm (``recurrent_ppo``) returns ``(actions, state)``: pass ``state``
        and ``episode_start`` back with the next observation (see ``RecurrentPPO.predict``)."""
        if getattr(self.algo, "recurrent", False):
            return self.algo.predict(obs, state=state, episode_start=episode_start, deterministic=deterministic)
        if state is not None or episode_start is not None:
            raise TypeError(f"{self.algorithm_name!r} is not recurrent: predict takes no state or episode_start "
                            f"(those are for recurrent algorithms such as 'recurrent_ppo')")
        return self.algo.predict(obs, deterministic=deterministic)

    def evaluate(self, n_episodes: int = 10, deterministic: bool = True, seed: int = 0) -> dict[str, Any]:
        """``rlox.evaluation.evaluate_policy`` of this trainer on a fresh env like its own
        (MAPPO/IPPO: a fresh multi-agent vector env; the result adds ``agent_rewards``)."""
        from rlox.evaluation import evaluate_policy

        return evaluate_policy(self, self.env, n_episodes=n_episodes, deterministic=deterministic, seed=seed)

    def save(self, path: str | Path) -> None:
        """Save the algorithm's full state (weights, optimiser, config, counters) to ``path``."""
        self.algo.save(str(path))

    @classmethod
    def from_checkpoint(cls, path: str | Path, algorithm: str | None = None, env: Any = None) -> "Trainer":
        """Rebuild a Trainer from a checkpoint written by ``save``.

        Args:
            path: checkpoint file (read with ``weights_only=True``; pickled objects are refused).
            algorithm: registered algorithm name; named trainers supply their own. Default: the
                name the checkpoint records (``save`` writes it), so
                ``Trainer.from_checkpoint("model.pt")`` is enough for a file rlox wrote.
            env: env to attach (defaults to the one stored in the checkpoint).
        """
        name = algorithm if algorithm is not None else cls.algorithm
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"checkpoint {str(p)!r} does not exist")
        if name is None:
            name = _checkpoint_algorithm(p)
        algo_cls = resolve_algorithm(str(name).lower())
        algo = algo_cls.load(str(p), env_id=env)
        return cls._wrap(algo, str(name).lower(), env if env is not None else getattr(algo, "env_id", None))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(algorithm={self.algorithm_name!r}, env={self.env!r}, seed={self.seed!r})"


def _checkpoint_algorithm(path: Path) -> str:
    """The algorithm name an rlox checkpoint records (``Algorithm.save`` writes it)."""
    from rlox.checkpointing import CheckpointError, safe_torch_load

    ckpt = safe_torch_load(path)
    name = ckpt.get("algorithm") if isinstance(ckpt, dict) else None
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"{str(path)!r} records no algorithm name (it is not a checkpoint written by "
                              f"rlox's save); pass it: Trainer.from_checkpoint({str(path)!r}, algorithm='ppo')")
    return name


_TRAINERS: dict[str, type[Trainer]] = {}


def trainer_for(algorithm: str, class_name: str | None = None) -> type[Trainer]:
    """A named Trainer subclass bound to ``algorithm`` (e.g. ``PPOTrainer``), cached in TRAINERS.

    ``PPOTrainer(env=..., seed=..., config=...)`` is ``Trainer("ppo", env=..., ...)``.
    """
    key = algorithm.lower()
    if key in _TRAINERS:
        return _TRAINERS[key]
    name = class_name or f"{algorithm.upper()}Trainer"

    def __init__(self, env: Any = "CartPole-v1", **kwargs: Any) -> None:
        if "algorithm" in kwargs:
            raise TypeError(f"{name} is bound to {key!r}; use Trainer(algorithm, ...) for another one")
        Trainer.__init__(self, key, env, **kwargs)

    cls = type(name, (Trainer,), {
        "algorithm": key, "__init__": __init__, "__module__": __name__, "__qualname__": name,
        "__doc__": f"``Trainer({key!r}, env=..., ...)``: see :class:`Trainer` for the arguments.",
    })
    _TRAINERS[key] = cls
    return cls


def _named_trainers() -> dict[str, type[Trainer]]:
    """Every built-in algorithm's named trainer (``PPOTrainer``, ...; ``rlox._builtins`` derives
    the names from the ``rlox.algorithms`` entry points), defined on first use."""
    from rlox._builtins import builtin_algorithms

    for algo in builtin_algorithms():
        if algo.trainer is not None and algo.name not in _TRAINERS:
            trainer_for(algo.name, algo.trainer)
    return _TRAINERS


def __getattr__(name: str) -> Any:
    # TRAINERS, __all__ and the named trainers read the package metadata, so on first use only
    # (importing this module stays as light as rlox.presets).
    if name == "TRAINERS":
        return _named_trainers()
    if name == "__all__":
        return ["Trainer", "trainer_for", "TRAINERS", *(cls.__name__ for cls in _named_trainers().values())]
    if not name.startswith("_"):
        for cls in _named_trainers().values():
            if cls.__name__ == name:
                globals()[name] = cls
                return cls
    raise AttributeError(f"module 'rlox.trainer' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__getattr__("__all__")))
