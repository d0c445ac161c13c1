"""Config-driven training: an experiment in YAML (or a ``TrainingConfig``) -> a trained agent.

    # experiment.yaml
    algorithm: ppo
    env: CartPole-v1
    total_timesteps: 100_000
    seed: 42
    config:
      n_envs: 16
      learning_rate: 3e-4
    logger:
      type: tensorboard
      log_dir: runs/ppo-cartpole
    callbacks:
      - progress_bar
      - {type: early_stopping, patience: 20, min_delta: 1.0}

    from rlox.runner import train_from_config
    metrics = train_from_config("experiment.yaml")
    # or: python -m rlox train --config experiment.yaml

The YAML reader takes ``3e-4`` and ``1e5`` as numbers (YAML 1.1 readers see strings) and
``100_000`` as an int. Unknown top-level keys are an error listing the allowed ones
(``TrainingConfig`` fields). Loggers, callbacks and wrappers are named as registered in
``LOGGERS``, ``CALLBACKS`` and ``WRAPPERS`` (``rlox.plugins`` registries, which plugins extend;
any spelling works: ``early_stopping``, ``EarlyStopping``, ``EarlyStoppingCallback``); their
arguments are the constructors' and are checked against them.
"""
from __future__ import annotations

import dataclasses
import inspect
import os
import re
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from rlox.config import ConfigBase, _f, _plain, _suggest
from rlox.plugins import CALLBACK_REGISTRY, LOGGER_REGISTRY, WRAPPER_REGISTRY, Registry

__all__ = ["TrainingConfig", "train_from_config", "build_trainer", "load_config", "load_yaml", "LOGGERS", "CALLBACKS",
           "WRAPPERS", "EXPERIMENT_KEYS"]


# ---------------------------------------------------------------------- the experiment
#: What ``TrainingConfig.logger`` / ``callbacks`` / ``wrappers`` entries may look like.
_ENTRY_HELP = ("a name ('console'), a mapping with 'type' ({'type': 'tensorboard', 'log_dir': 'runs/x'}) "
               "or a one-key mapping ({'tensorboard': {'log_dir': 'runs/x'}})")


@dataclass
class TrainingConfig:
    """One training run, as an experiment file describes it (``rlox.runner.train_from_config``).

        cfg = TrainingConfig(algorithm="ppo", env="CartPole-v1", total_timesteps=100_000, seed=42,
                             config={"n_envs": 16, "learning_rate": 3e-4})

    Loggers, callbacks and wrappers are given by name (``rlox.runner.LOGGERS``, ``CALLBACKS``,
    ``WRAPPERS``), as a string or a mapping with ``type`` and the constructor's arguments.
    ``from_dict`` rejects unknown top-level keys, listing the allowed ones.
    """

    algorithm: str = _f("ppo", "registered algorithm name (ppo, a2c, ...)")
    env: Any = _f("CartPole-v1", "env id (gymnasium id or rlox.plugins.ENV_REGISTRY name)")
    total_timesteps: int = _f(100_000, "env steps to train (all envs together)", ge=1)
    seed: int = _f(0, "seed of envs, networks and sampling")
    config: dict = _f({}, "algorithm config fields, merged over the preset")
    logger: Any = _f(None, "logger(s): " + _ENTRY_HELP + ", or a list of them", optional=True)
    callbacks: list = _f([], "callbacks, each " + _ENTRY_HELP)
    wrappers: list = _f([], "vector-env wrappers, each " + _ENTRY_HELP + " (e.g. vec_normalize)")
    preset: bool = _f(True, "merge the tuned preset for (algorithm, env) under config")
    device: str = _f("cpu", "torch device")
    artifacts_dir: str | None = _f(None, "write training artifacts (best actor, inference.yaml, CSVs) here",
                                   optional=True)
    eval_freq: int | None = _f(None, "env steps between the artifacts' evaluations (None: 20 per run)",
                               ge=1, optional=True)
    eval_episodes: int = _f(5, "episodes per artifacts evaluation", ge=1)
    save_path: str | None = _f(None, "save the final checkpoint here", optional=True)
    dataset: str | None = _f(None, "offline algorithms: the dataset (.npz/.hdf5 path or Minari id); env is "
                             "then only for evaluation and total_timesteps counts gradient steps", optional=True)

    def __post_init__(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):
            ConfigBase._check_field(self, f, hints.get(f.name))  # the algorithm configs' type/range checks
        self.validate()

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of the fields (what an experiment file holds)."""
        return {f.name: _plain(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def validate(self) -> None:
        if not isinstance(self.algorithm, str) or not self.algorithm:
            raise ValueError(f"TrainingConfig.algorithm must be a non-empty string such as 'ppo', got "
                             f"{self.algorithm!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"TrainingConfig.seed must be an integer, got {self.seed!r}")
        if not isinstance(self.config, dict):
            raise ValueError(f"TrainingConfig.config must be a mapping of algorithm config fields, got "
                             f"{type(self.config).__name__}")
        for name in ("callbacks", "wrappers"):
            value = getattr(self, name)
            if not isinstance(value, list):
                raise ValueError(f"TrainingConfig.{name} must be a list, each entry {_ENTRY_HELP}; got "
                                 f"{type(value).__name__}")
            for i, entry in enumerate(value):
                _check_entry(f"TrainingConfig.{name}[{i}]", entry)
        loggers = self.logger if isinstance(self.logger, list) else [] if self.logger is None else [self.logger]
        for i, entry in enumerate(loggers):
            _check_entry("TrainingConfig.logger" + (f"[{i}]" if isinstance(self.logger, list) else ""), entry)
        for name in ("artifacts_dir", "save_path", "dataset"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"TrainingConfig.{name} must be a path string, got {value!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, source: str | None = None) -> "TrainingConfig":
        """A config from an experiment mapping (e.g. a YAML file's contents).

        Numbers written as strings (``"3e-4"``, ``"100_000"``) become numbers in the top-level
        numeric fields and in ``config``. Unknown top-level keys are a ValueError that lists the
        allowed keys; ``source`` (a file name) prefixes the messages.
        """
        where = source or cls.__name__
        if data is None:
            data = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"{where} must hold a mapping of experiment settings, got {type(data).__name__}")
        names = cls.field_names()
        unknown = sorted(str(k) for k in data if k not in names)
        if unknown:
            raise ValueError(f"{where} has unknown top-level keys {unknown}" + _suggest(unknown, set(names))
                             + f"; allowed: {names}")
        values = dict(data)
        for key in ("total_timesteps", "seed", "eval_freq", "eval_episodes"):
            if key in values:
                values[key] = _number(values[key])
        cfg = values.get("config")
        if cfg is None:
            values.pop("config", None)
        elif isinstance(cfg, Mapping):
            values["config"] = {str(k): _number(v) for k, v in cfg.items()}
        for key in ("callbacks", "wrappers"):
            if values.get(key) is None:
                values.pop(key, None)
        try:
            return cls(**values)
        except ValueError as exc:
            if source:
                raise ValueError(f"{source}: {exc}") from None
            raise


def _check_entry(where: str, entry: Any) -> None:
    if isinstance(entry, str) and entry:
        return
    if isinstance(entry, Mapping):
        if "type" in entry and isinstance(entry["type"], str):
            return
        if len(entry) == 1:
            (_, kwargs), = entry.items()
            if kwargs is None or isinstance(kwargs, Mapping):
                return
    raise ValueError(f"{where} = {entry!r} is not understood; expected {_ENTRY_HELP}")


def _number(value: Any) -> Any:
    """``"3e-4"`` -> 0.0003, ``"100_000"`` -> 100000; anything else unchanged."""
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        for conv in (int, float):
            try:
                return conv(text)
            except ValueError:
                pass
    return value


#: Top-level keys of an experiment file.
EXPERIMENT_KEYS = tuple(TrainingConfig.field_names())


# Experiment files name their parts through these registries (rlox.plugins): the built-ins are
# the rlox.loggers / rlox.callbacks / rlox.wrappers entry points in pyproject.toml, and a plugin
# adds its own through the same groups or with LOGGERS.register("mlflow", MLflowLogger).
LOGGERS = LOGGER_REGISTRY
CALLBACKS = CALLBACK_REGISTRY
WRAPPERS = WRAPPER_REGISTRY


# ---------------------------------------------------------------------- YAML
def _yaml_loader() -> Any:
    import yaml

    class Loader(yaml.SafeLoader):
        """SafeLoader that also reads YAML 1.2 floats such as ``3e-4``, ``1e5`` and ``1.5e3``."""

    Loader.add_implicit_resolver(
        "tag:yaml.org,2002:float",
        re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
        list("-+0123456789."))
    return Loader


def load_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """A YAML file's top-level mapping (empty file: ``{}``).

    Raises:
        FileNotFoundError: no such file. ValueError: invalid YAML or not a mapping (the message
            names the file and the line).
    """
    import yaml

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"config file {str(p)!r} does not exist")
    try:
        data = yaml.load(p.read_text(), Loader=_yaml_loader())
    except yaml.YAMLError as exc:
        first = " ".join(str(exc).split())
        raise ValueError(f"config file {str(p)!r} is not valid YAML: {first}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ValueError(f"config file {str(p)!r} must hold a mapping of settings, got {type(data).__name__}")
    return data


def load_config(path_or_config: str | os.PathLike | TrainingConfig | Mapping[str, Any]) -> TrainingConfig:
    """A ``TrainingConfig`` from a YAML path, a mapping, or a ``TrainingConfig`` (returned as is)."""
    if isinstance(path_or_config, TrainingConfig):
        return path_or_config
    if isinstance(path_or_config, Mapping):
        return TrainingConfig.from_dict(path_or_config)
    if isinstance(path_or_config, (str, os.PathLike)):
        return TrainingConfig.from_dict(load_yaml(path_or_config), source=f"config file {str(path_or_config)!r}")
    raise TypeError(f"expected a YAML path, a mapping or a TrainingConfig, got {type(path_or_config).__name__}")


# ---------------------------------------------------------------------- building
def _instantiate(registry: Registry, entry: Any, where: str) -> Any:
    if isinstance(entry, str):
        name, kwargs = entry, {}
    elif "type" in entry:
        name, kwargs = entry["type"], {k: v for k, v in entry.items() if k != "type"}
    else:
        (name, kwargs), = entry.items()
        kwargs = dict(kwargs or {})
    try:
        cls = registry.get(name)
    except KeyError as exc:          # a bad value in the experiment: name the entry and the registry
        raise ValueError(f"{where}: {exc.args[0]}") from None
    try:
        params = inspect.signature(cls).parameters
    except (TypeError, ValueError):
        params = {}
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        unknown = sorted(k for k in kwargs if k not in params)
        if unknown:
            allowed = [p for p in params if params[p].kind is not inspect.Parameter.VAR_POSITIONAL]
            raise TypeError(f"{where}: {cls.__name__} does not take {unknown}; its arguments are {allowed}")
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise TypeError(f"{where}: {cls.__name__}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}): {exc}") from None


def build_loggers(cfg: TrainingConfig) -> Any:
    """The logger(s) of ``cfg``: None, one logger, or a list."""
    if cfg.logger is None:
        return None
    if isinstance(cfg.logger, list):
        return [_instantiate(LOGGERS, e, f"logger[{i}]") for i, e in enumerate(cfg.logger)]
    return _instantiate(LOGGERS, cfg.logger, "logger")


def build_trainer(path_or_config: Any) -> Any:
    """The ``rlox.Trainer`` an experiment describes (not trained yet)."""
    from rlox.trainer import Trainer

    cfg = load_config(path_or_config)
    callbacks = [_instantiate(CALLBACKS, e, f"callbacks[{i}]") for i, e in enumerate(cfg.callbacks)]
    wrappers = [_instantiate(WRAPPERS, e, f"wrappers[{i}]") for i, e in enumerate(cfg.wrappers)]
    extra = {"dataset": cfg.dataset} if cfg.dataset is not None else {}   # offline algorithms
    return Trainer(cfg.algorithm, env=cfg.env, seed=cfg.seed, config=dict(cfg.config), callbacks=callbacks,
                   logger=build_loggers(cfg), wrappers=wrappers or None, preset=cfg.preset, device=cfg.device,
                   artifacts_dir=cfg.artifacts_dir, eval_freq=cfg.eval_freq, eval_episodes=cfg.eval_episodes,
                   **extra)


def train_from_config(path_or_config: Any, *, return_trainer: bool = False) -> Any:
    """Build the experiment's Trainer, train it for ``total_timesteps``, save it to
    ``save_path`` when given, and return the metrics (``(metrics, trainer)`` with
    ``return_trainer=True``).

    Args:
        path_or_config: a YAML file path, a mapping, or a ``rlox.config.TrainingConfig``.
    """
    cfg = load_config(path_or_config)
    trainer = build_trainer(cfg)
    metrics = trainer.train(total_timesteps=cfg.total_timesteps)
    if cfg.save_path:
        Path(cfg.save_path).parent.mkdir(parents=True, exist_ok=True)
        trainer.save(cfg.save_path)
    return (metrics, trainer) if return_trainer else metrics
