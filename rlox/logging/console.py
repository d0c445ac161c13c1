"""``ConsoleLogger``: one line every ``log_interval`` env steps."""
from __future__ import annotations

import math
import sys
from typing import Any, Mapping, TextIO

import numpy as np

from rlox.logging.base import LoggerCallback, _scalar

__all__ = ["ConsoleLogger"]


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
