"""A logger from a plugin: one JSON object per line, found through the ``rlox.loggers`` entry point.

    # experiment.yaml
    logger: {type: jsonl, path: runs/metrics.jsonl}

This module imports rlox (its base class); rlox imports it only when an experiment or a lookup
names ``jsonl``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from rlox.logging import LoggerCallback, scalar_metrics

__all__ = ["JSONLinesLogger"]


class JSONLinesLogger(LoggerCallback):
    """``{"step": ..., "train/mean_reward": ..., ...}`` per iteration, appended to ``path``.

    Args:
        path: the file (its directory is created; an existing file is replaced when the logger
            writes its first line).
    """

    def __init__(self, path: str | os.PathLike = "metrics.jsonl") -> None:
        super().__init__()
        self.path = Path(path)
        self._fh: Any = None

    def on_train_step(self, step: int, metrics: Mapping[str, Any]) -> None:
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.path, "w")
        self._fh.write(json.dumps({"step": int(step), **scalar_metrics(metrics)}) + "\n")

    def flush(self) -> None:
        if self._fh is not None:
            self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
