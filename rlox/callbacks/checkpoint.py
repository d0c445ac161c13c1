"""``CheckpointCallback``: periodic checkpoints, atomically written, the last ``keep_last`` kept."""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Mapping

from rlox.callbacks._common import _check_int
from rlox.callbacks.base import Callback


class CheckpointCallback(Callback):
    """Save the full training state every ``save_freq`` env steps, keeping the last ``keep_last``.

    Files are ``<save_path>/<name_prefix>_<steps>_steps.pt``, written atomically by
    ``algo.save`` (a crash mid-save leaves the previous checkpoints intact) and readable with
    ``weights_only=True``. Resume with ``PPO.load(path)`` then ``train(resume=True)``.

    Args:
        save_freq: env steps (all envs together) between checkpoints.
        save_path: directory (created).
        name_prefix: file name prefix.
        keep_last: keep only this many newest checkpoints with this prefix (None: keep all);
            checkpoints of an earlier run in the same directory count too.
        save_final: also save when training ends.

    Attributes:
        saved: paths written by this callback, oldest first.
    """

    def __init__(self, save_freq: int, save_path: str | os.PathLike = "checkpoints", name_prefix: str = "rl_model",
                 keep_last: int | None = None, save_final: bool = False) -> None:
        super().__init__()
        self.save_freq = _check_int("CheckpointCallback", "save_freq", save_freq, 1)
        if keep_last is not None:
            keep_last = _check_int("CheckpointCallback", "keep_last", keep_last, 1)
        if not name_prefix or not re.fullmatch(r"[A-Za-z0-9._-]+", name_prefix):
            raise ValueError(f"CheckpointCallback name_prefix must be letters, digits, '.', '_' or '-', "
                             f"got {name_prefix!r}")
        self.save_path = Path(save_path)
        self.name_prefix = name_prefix
        self.keep_last = keep_last
        self.save_final = bool(save_final)
        self.saved: list[Path] = []
        self._last: int | None = None

    def init_callback(self, algo: Any) -> None:
        super().init_callback(algo)
        self.save_path.mkdir(parents=True, exist_ok=True)
        if self._last is None:
            self._last = algo.num_timesteps

    def path_for(self, step: int) -> Path:
        return self.save_path / f"{self.name_prefix}_{int(step)}_steps.pt"

    def existing(self) -> list[Path]:
        """Checkpoints with this prefix in ``save_path``, oldest (fewest steps) first."""
        pat = re.compile(re.escape(self.name_prefix) + r"_(\d+)_steps\.pt")
        found = [(int(m.group(1)), p) for p in self.save_path.iterdir() if (m := pat.fullmatch(p.name))]
        return [p for _, p in sorted(found)]

    def save(self) -> Path:
        """Save now; returns the path."""
        path = self.path_for(self.num_timesteps)
        self.algo.save(path)
        self._last = self.num_timesteps
        if path not in self.saved:
            self.saved.append(path)
        if self.keep_last is not None:
            for old in self.existing()[:-self.keep_last]:
                if old.is_dir():      # LLM algorithms save a directory (save_pretrained layout)
                    import shutil
                    shutil.rmtree(old, ignore_errors=True)
                old.unlink(missing_ok=True)
                if old in self.saved:
                    self.saved.remove(old)
        return path

    def on_update(self, metrics: Mapping[str, Any]) -> None:
        if self.num_timesteps - self._last >= self.save_freq:
            self.save()

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.save_final and self.algo is not None and self.num_timesteps != self._last:
            self.save()
