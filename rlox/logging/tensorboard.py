"""``TensorBoardLogger``: scalars to event files through TensorBoard's own writer."""
from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any, Mapping

from rlox.logging.base import LoggerCallback, scalar_metrics

__all__ = ["TensorBoardLogger", "EventFileWriter"]


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
