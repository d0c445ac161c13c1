"""``CSVLogger``: one CSV row per iteration."""
from __future__ import annotations

import csv
import io
import os
from pathlib import Path
from typing import Any, Mapping

from rlox.logging.base import LoggerCallback, scalar_metrics

__all__ = ["CSVLogger"]


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
