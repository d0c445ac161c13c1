"""Loggers: where an algorithm's metrics go, once per training iteration.

    from rlox.logging import ConsoleLogger, TensorBoardLogger, WandbLogger, CSVLogger
    trainer = Trainer("ppo", env="CartPole-v1", logger=ConsoleLogger(log_interval=500))
    # step=512 | SPS=1234 | reward=45.20

The algorithm calls ``on_train_step(step, metrics)`` on its logger after each iteration (after
the callbacks, so an evaluation that ran in this iteration is in ``metrics`` too) and
``flush()`` when training ends. ``metrics`` keys are namespaced: ``train/`` (mean_reward,
mean_length, episodes, timesteps, learning_rate), ``loss/`` (policy_loss, value_loss, entropy,
approx_kl, clip_fraction, ...), ``eval/`` (mean_reward, std_reward, ...), ``time/`` (sps,
iteration and per-phase seconds).

``logger=`` takes one logger or a list of them. A ``LoggerCallback`` may also be passed in
``callbacks=[...]``: either way it is fed once per iteration. For another backend, subclass
``LoggerCallback`` and implement ``on_train_step``:

    class MLflowLogger(LoggerCallback):
        def on_train_step(self, step, metrics):
            mlflow.log_metrics({k: v for k, v in metrics.items() if is_scalar(v)}, step=step)

``TensorBoardLogger`` writes event files through TensorBoard's own writer and ``WandbLogger``
through ``wandb``; both come with ``pip install 'rlox[logging]'`` (``WANDB_MODE=offline``
is honoured).
"""
from __future__ import annotations

import csv
import io
import math
import numbers
import os
import sys
import time
from pathlib import Path
from typing import Any, ClassVar, Mapping, TextIO

import numpy as np

from rlox.callbacks import Callback

__all__ = ["LoggerCallback", "ConsoleLogger", "TensorBoardLogger", "WandbLogger", "CSVLogger",
           "scalar_metrics", "EventFileWriter"]


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


# ====================================================================== console
class ConsoleLogger(LoggerCallback):
    """One line every ``log_interval`` env steps: ``step=500 | SPS=1234 | reward=45.20``.

    When an evaluation ran since the last line, `` | eval=...`` follows.

    Args:
        log_interval: env steps between lines (a line is printed at the first iteration that
            reaches each multiple).
        stream: where to print (default: ``sys.stdout`` at print time).
    """

    def __init__(self, log_interval: int = 1000, stream: TextIO | None = None) -> None:
        super().__init__()
        if isinstance(log_interval, bool) or not isinstance(log_interval, (int, np.integer)) or log_interval < 1:
            raise ValueError(f"ConsoleLogger log_interval must be an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = int(log_interval)
        self.stream = stream
        self._next: int | None = None
        self._eval: float | None = None

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        ev = metrics.get("eval/mean_reward")
        if ev is not None:
            self._eval = float(ev)
        if self._next is None:
            self._next = self.log_interval
        if step < self._next:
            return
        self._next = (step // self.log_interval + 1) * self.log_interval
        print(self.format_line(step, metrics), file=self.stream or sys.stdout, flush=True)

    def format_line(self, step: int, metrics: Mapping[str, Any]) -> str:
        sps = _scalar(metrics.get("time/sps"))
        reward = _scalar(metrics.get("train/mean_reward"))
        parts = [f"step={step}", f"SPS={sps:.0f}" if sps is not None and math.isfinite(sps) else "SPS=-",
                 f"reward={reward:.2f}" if reward is not None and math.isfinite(reward) else "reward=-"]
        if self._eval is not None:
            parts.append(f"eval={self._eval:.2f}")
            self._eval = None
        return " | ".join(parts)


# ====================================================================== TensorBoard
class EventFileWriter:
    """Scalars to one TensorBoard event file, through TensorBoard's own writer
    (``tensorboard.summary.writer.event_file_writer``: TFRecord framing, CRC-32C, a background
    thread that writes every ``flush_secs`` or ``max_queue`` events).

    ``add_scalars`` puts every ``tag -> value`` of one step into ONE event (TensorBoard's
    ``Summary`` holds any number of values), so an iteration costs one queue put, not one per
    metric as ``SummaryWriter.add_scalar`` would.

    Args:
        log_dir: directory (created); the file is ``events.out.tfevents.<time>.<host>.<pid>.<n>``.
        flush_secs: longest time an event waits in memory.
        max_queue: most events waiting in memory.
    """

    def __init__(self, log_dir: str | os.PathLike, flush_secs: float = 10.0, max_queue: int = 1000) -> None:
        try:
            from tensorboard.compat.proto.event_pb2 import Event
            from tensorboard.compat.proto.summary_pb2 import Summary
            from tensorboard.summary.writer.event_file_writer import EventFileWriter as _TBWriter
        except ImportError as exc:
            raise ImportError(f"TensorBoardLogger writes through the tensorboard package ({exc}); install "
                              f"it with: pip install 'rlox[logging]' (or pip install tensorboard)") from None
        self._event, self._summary = Event, Summary
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        before = set(self.log_dir.glob("events.out.tfevents.*"))
        self._writer = _TBWriter(str(self.log_dir), max_queue_size=int(max_queue),
                                 flush_secs=max(1, math.ceil(float(flush_secs))))
        self._writer.flush()                      # the file and its version record exist now
        made = sorted(set(self.log_dir.glob("events.out.tfevents.*")) - before)
        self.path = made[-1] if made else None
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def add_scalars(self, step: int, scalars: Mapping[str, float], wall_time: float | None = None) -> None:
        """Queue one event holding every ``tag -> value`` of ``scalars`` at ``step``."""
        if self._closed:
            raise ValueError(f"the event file in {str(self.log_dir)!r} is closed")
        if not scalars:
            return
        value = self._summary.Value
        summary = self._summary(value=[value(tag=tag, simple_value=v) for tag, v in scalars.items()])
        self._writer.add_event(self._event(wall_time=time.time() if wall_time is None else wall_time,
                                           step=int(step), summary=summary))

    def flush(self) -> None:
        if not self._closed:
            self._writer.flush()

    def close(self) -> None:
        if not self._closed:
            self._writer.close()
            self._closed = True


class TensorBoardLogger(LoggerCallback):
    """Scalars of every iteration to TensorBoard event files under ``log_dir``.

    Every single-number metric is written with its namespaced name as the tag
    (``train/mean_reward``, ``loss/policy_loss``, ``eval/mean_reward``, ``time/sps``, ...);
    the x axis is the env-step count. View with ``tensorboard --logdir <log_dir>``.

    Args:
        log_dir: directory of the event files (created).
        flush_secs: how often buffered events reach the disk (also at the end of training).
        log_interval: env steps between records (default: every iteration); iterations with
            evaluation results are always written. Useful when iterations are tiny.
    """

    def __init__(self, log_dir: str | os.PathLike = "runs", flush_secs: float = 10.0,
                 log_interval: int | None = None) -> None:
        super().__init__()
        if log_interval is not None and (isinstance(log_interval, bool) or not isinstance(log_interval, int)
                                         or log_interval < 1):
            raise ValueError(f"TensorBoardLogger log_interval must be None or an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = log_interval
        self.log_dir = Path(log_dir)
        self.flush_secs = float(flush_secs)
        self._writer: EventFileWriter | None = None

    @property
    def writer(self) -> EventFileWriter:
        if self._writer is None or self._writer.closed:
            self._writer = EventFileWriter(self.log_dir, self.flush_secs)
        return self._writer

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        if self._due(step, metrics):
            self.writer.add_scalars(int(step), scalar_metrics(metrics))

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


# ====================================================================== Weights & Biases
class WandbLogger(LoggerCallback):
    """Metrics to a Weights & Biases run (``wandb.init(project=..., name=...)``).

    The run starts when training starts (or on the first metrics) with the algorithm's config,
    env and seed in ``wandb.config``, and finishes when training ends (``finish_on_end``).
    Offline: set ``WANDB_MODE=offline`` or pass ``mode="offline"`` (sync later with
    ``wandb sync``).

    Args:
        project: W&B project name.
        name: run name.
        config: extra values for ``wandb.config``.
        finish_on_end: call ``run.finish()`` when training ends (default True).
        log_interval: env steps between logged rows (default: every iteration).
        **init_kwargs: more ``wandb.init`` arguments (``entity``, ``tags``, ``mode``, ``dir``, ...).

    Raises:
        ImportError: when ``wandb`` is not installed (at construction, with the install command).
    """

    def __init__(self, project: str = "rlox", name: str | None = None, config: Mapping[str, Any] | None = None,
                 *, finish_on_end: bool = True, log_interval: int | None = None, **init_kwargs: Any) -> None:
        super().__init__()
        if log_interval is not None and (isinstance(log_interval, bool) or not isinstance(log_interval, int)
                                         or log_interval < 1):
            raise ValueError(f"WandbLogger log_interval must be None or an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = log_interval
        try:
            import wandb
        except ImportError as exc:
            raise ImportError("WandbLogger needs the wandb package, which is not installed; install it with "
                              "pip install 'rlox[logging]' (or pip install wandb), or use TensorBoardLogger / "
                              "CSVLogger instead") from exc
        self._wandb = wandb
        self.project = project
        self.name = name
        self.config = dict(config or {})
        self.finish_on_end = bool(finish_on_end)
        self.init_kwargs = init_kwargs
        self.run: Any = None

    def _run_config(self) -> dict[str, Any]:
        cfg = dict(self.config)
        algo = self.algo
        if algo is not None:
            to_dict = getattr(getattr(algo, "config", None), "to_dict", None)
            if callable(to_dict):
                cfg.setdefault("algorithm_config", to_dict())
            cfg.setdefault("algorithm", getattr(algo, "name", type(algo).__name__))
            cfg.setdefault("env", str(getattr(algo, "env_id", "")))
            cfg.setdefault("seed", getattr(algo, "seed", None))
        return cfg

    def _start(self) -> None:
        if self.run is None:
            self.run = self._wandb.init(project=self.project, name=self.name, config=self._run_config(),
                                        **self.init_kwargs)

    def on_training_start(self) -> None:
        self._start()

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        self._start()
        if self._due(step, metrics):
            self.run.log(scalar_metrics(metrics), step=int(step))

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.finish_on_end:
            self.close()

    def close(self) -> None:
        if self.run is not None:
            self.run.finish()
            self.run = None


# ====================================================================== CSV
class CSVLogger(LoggerCallback):
    """One CSV row per iteration: ``step`` then every single-number metric.

    Columns are those of the first row; a metric that appears later (``eval/...`` after the
    first evaluation) adds a column, and the file is rewritten once with the wider header
    (earlier rows get empty cells).

    Args:
        path: the CSV file (its directory is created; an existing file is replaced at the start
            of the first training run).
        log_interval: env steps between rows (default: every iteration); iterations with
            evaluation results are always written.
    """

    def __init__(self, path: str | os.PathLike = "metrics.csv", log_interval: int | None = None) -> None:
        super().__init__()
        if log_interval is not None and (isinstance(log_interval, bool) or not isinstance(log_interval, int)
                                         or log_interval < 1):
            raise ValueError(f"CSVLogger log_interval must be None or an int >= 1 (env steps), got {log_interval!r}")
        self.log_interval = log_interval
        self.path = Path(path)
        self.columns: list[str] = []
        self._known: set[str] = set()
        self._rows: list[dict[str, float]] = []
        self._pending: list[dict[str, float]] = []
        self._fh: io.TextIOBase | None = None
        self._writer: Any = None

    def _line(self, row: Mapping[str, float]) -> list[Any]:
        return [row["step"], *[row.get(c, "") for c in self.columns]]

    def _open(self) -> None:
        """(Re)write the file: header, then every row so far."""
        if self._fh is not None:
            self._fh.close()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.path, "w", newline="")
        self._writer = csv.writer(self._fh)
        self._writer.writerow(["step", *self.columns])
        self._writer.writerows(self._line(r) for r in self._rows)
        self._pending.clear()

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        if not self._due(step, metrics):
            return
        row: dict[str, Any] = scalar_metrics(metrics)
        widen = self._fh is None or len(row) > len(self._known) or not self._known.issuperset(row)
        if widen:
            new = [k for k in row if k not in self._known]
            self.columns.extend(new)
            self._known.update(new)
        row["step"] = int(step)
        self._rows.append(row)
        if widen:
            self._open()
            return
        self._pending.append(row)          # written in batches (flush, or every 256 rows)
        if len(self._pending) >= 256:
            self._write_pending()

    def _write_pending(self) -> None:
        if self._pending and self._writer is not None:
            self._writer.writerows(self._line(r) for r in self._pending)
        self._pending.clear()

    def flush(self) -> None:
        if self._fh is not None:
            self._write_pending()
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._write_pending()
            self._fh.close()
            self._fh = None
