"""The logger base class and the metric filter every backend shares."""
from __future__ import annotations

import numbers
from typing import Any, ClassVar, Mapping

import numpy as np

from rlox.callbacks import Callback

__all__ = ["LoggerCallback", "scalar_metrics", "run_metadata", "algo_env_label"]


def _scalar(value: Any) -> float | None:
    """``value`` as a Python float when it is one number (int, float, NumPy or 0-d/1-element
    tensor), else None. Booleans count as numbers (0/1)."""
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, np.ndarray) and value.size == 1 and value.dtype.kind in "biuf":
        return float(value.reshape(()))
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    if callable(item) and callable(numel):  # a torch tensor, without importing torch
        try:
            if numel() == 1:
                return float(item())
        except (TypeError, ValueError, RuntimeError):
            return None
    return None


def scalar_metrics(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The entries of ``metrics`` that are single numbers, as floats (others dropped)."""
    out = {}
    for k, v in metrics.items():
        t = type(v)
        if t is float:                      # the common case, without the ABC check
            out[k] = v
        elif t is int:
            out[k] = float(v)
        else:
            s = _scalar(v)
            if s is not None:
                out[str(k)] = s
    return out


class LoggerCallback(Callback):
    """Base of the rlox loggers, and of custom logging backends.

    Override ``on_train_step(step, metrics)``; ``flush()`` and ``close()`` are optional.
    A LoggerCallback is a ``Callback``, so it sees the training hooks too (``self.algo`` is the
    algorithm). The algorithm calls ``on_train_step`` once per iteration whether the logger was
    given as ``logger=`` or in ``callbacks=[...]``.
    """

    #: Marks loggers for the training loop (``rlox.algorithms.base.Algorithm.train``).
    is_logger: ClassVar[bool] = True
    #: Env steps between written records (None: every iteration); see ``_due``.
    log_interval: int | None = None
    _next_log: int | None = None

    def _due(self, step: int, metrics: Mapping[str, Any]) -> bool:
        """Whether to write this iteration: always without ``log_interval``; else at the first
        iteration reaching each multiple of it, and whenever evaluation results are present."""
        if self.log_interval is None:
            return True
        if self._next_log is None:
            self._next_log = self.log_interval
        if step >= self._next_log:
            self._next_log = (step // self.log_interval + 1) * self.log_interval
            return True
        return "eval/mean_reward" in metrics

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        """Called after each training iteration with the env-step count and the metrics."""

    def flush(self) -> None:
        """Write out anything buffered (called when training ends)."""

    def close(self) -> None:
        """Release files and connections; the logger may not be used afterwards."""
        self.flush()




def algo_env_label(algo: Any) -> str | None:
    """The label of an algorithm's env (None without one): ``Algorithm.env_name`` where the
    algorithm has it (it also names unregistered envs), else ``rlox.envs.env_label(algo.env_id)``."""
    name = getattr(algo, "env_name", None)
    if isinstance(name, str):
        return name
    env = getattr(algo, "env_id", None)
    if env is None:
        return None
    from rlox.envs import env_label

    return env_label(env)


def run_metadata(algo: Any) -> dict[str, Any]:
    """What a run is, the one record every harness piece writes (wandb's ``config``, the
    dashboard's run table, the artifacts' ``training.yaml``): ``algorithm``, ``env`` (its label,
    ``rlox.envs.env_label``), ``seed``, ``start_timesteps``, ``total_timesteps`` (where this
    ``train`` call ends), ``config`` (the algorithm config's fields) and ``started`` (ISO time).
    """
    import time

    cfg = getattr(getattr(algo, "config", None), "to_dict", None)
    env = algo_env_label(algo)
    start = int(getattr(algo, "num_timesteps", 0) or 0)
    return {"algorithm": getattr(algo, "name", "") or type(algo).__name__, "env": env,
            "seed": getattr(algo, "seed", None), "start_timesteps": start,
            "total_timesteps": start + int(getattr(algo, "remaining_timesteps", 0) or 0),
            "config": cfg() if callable(cfg) else {}, "started": time.strftime("%Y-%m-%dT%H:%M:%S")}
