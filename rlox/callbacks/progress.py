"""Callbacks that watch or stop a run: early stopping, a progress bar, phase timings."""
from __future__ import annotations

import math
import sys
import time
from typing import Any, Mapping

from rlox.callbacks._common import _check_int, _finite
from rlox.callbacks.base import Callback


class EarlyStoppingCallback(Callback):
    """Stop training when a metric has not improved by ``min_delta`` for ``patience`` checks.

    A check happens after each iteration (``on_update``) for ``train/`` metrics, and after each
    evaluation (``on_eval``) for ``eval/`` metrics; checks where the metric is missing or NaN
    (no finished episode yet) do not count.

    Args:
        patience: checks without improvement before stopping (>= 1).
        min_delta: an improvement must exceed the best value so far by more than this.
        metric: the metric watched (default ``train/mean_reward``; ``eval/mean_reward`` with an
            ``EvalCallback``).
        mode: "max" (higher is better) or "min".

    Attributes:
        best, wait (checks since the last improvement), stopped_step (None while running).
    """

    def __init__(self, patience: int = 5, min_delta: float = 0.0, metric: str = "train/mean_reward",
                 mode: str = "max") -> None:
        super().__init__()
        self.patience = _check_int("EarlyStoppingCallback", "patience", patience, 1)
        if _finite(min_delta) is None or min_delta < 0:
            raise ValueError(f"EarlyStoppingCallback min_delta must be a finite number >= 0, got {min_delta!r}")
        if mode not in ("max", "min"):
            raise ValueError(f"EarlyStoppingCallback mode must be 'max' or 'min', got {mode!r}")
        self.min_delta = float(min_delta)
        self.metric = str(metric)
        self.mode = mode
        self.best: float | None = None
        self.wait = 0
        self.stopped_step: int | None = None

    def _check(self, metrics: Mapping[str, Any]) -> bool | None:
        value = _finite(metrics.get(self.metric))
        if value is None:
            return None
        gain = value - self.best if (self.best is not None and self.mode == "max") else \
            (self.best - value if self.best is not None else math.inf)
        if gain > self.min_delta:
            self.best, self.wait = value, 0
            return None
        self.wait += 1
        if self.wait >= self.patience:
            self.stopped_step = self.num_timesteps
            return False
        return None

    def on_update(self, metrics: Mapping[str, Any]) -> bool | None:
        return None if self.metric.startswith("eval/") else self._check(metrics)

    def on_eval(self, metrics: Mapping[str, Any]) -> bool | None:
        return self._check(metrics) if self.metric.startswith("eval/") else None


class ProgressBarCallback(Callback):
    """A tqdm progress bar over the ``train`` call's env steps, with the mean training reward
    and steps/second in the bar (``reward=...``, ``sps=...``).

    Args:
        file: stream of the bar (default ``sys.stderr``).
        **tqdm_kwargs: more ``tqdm`` arguments (``ncols``, ``mininterval``, ``disable``, ...).
    """

    def __init__(self, file: Any = None, **tqdm_kwargs: Any) -> None:
        super().__init__()
        self.file = file
        self.tqdm_kwargs = tqdm_kwargs
        self.bar: Any = None
        self._last = 0

    def on_training_start(self) -> None:
        from tqdm.auto import tqdm

        algo = self.algo
        total = int(getattr(algo, "remaining_timesteps", 0))
        self._last = algo.num_timesteps
        kwargs = {"unit": "step", "unit_scale": True, "dynamic_ncols": True, "mininterval": 0.25,
                  "desc": f"{getattr(algo, 'name', '') or type(algo).__name__}", **self.tqdm_kwargs}
        self.bar = tqdm(total=max(total, 0), file=self.file if self.file is not None else sys.stderr, **kwargs)

    def on_update(self, metrics: Mapping[str, Any]) -> None:
        if self.bar is None:
            return
        step = self.num_timesteps
        reward = _finite(metrics.get("train/mean_reward"))
        sps = _finite(metrics.get("time/sps"))
        self.bar.set_postfix_str(f"reward={reward:.2f}, sps={sps:,.0f}" if reward is not None and sps is not None
                                 else f"reward=-, sps={sps or 0:,.0f}", refresh=False)
        self.bar.update(step - self._last)
        self._last = step

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


class TimingCallback(Callback):
    """Where the wall time of training went, per phase the algorithm times.

    Phases come from ``algo.timings`` (cumulative seconds): on-policy algorithms report
    ``env_step``, ``policy_forward``, ``gae_compute`` and ``gradient_update``; the training loop
    adds ``callbacks`` (callbacks and loggers) and evaluating callbacks add ``evaluation``.

        timing = TimingCallback()
        ...train...
        timing.summary()   # {'env_step': 42.1, 'gae_compute': 8.3, 'gradient_update': 45.0, ..., 'other': 1.2}

    Covers every ``train`` call the callback was attached to.
    """

    def __init__(self) -> None:
        super().__init__()
        self.wall_seconds = 0.0
        self.phase_seconds: dict[str, float] = {}
        self._t0: float | None = None
        self._start: dict[str, float] = {}

    def on_training_start(self) -> None:
        self._t0 = time.perf_counter()
        self._start = dict(self.algo.timings)

    def _running(self) -> tuple[float, dict[str, float]]:
        wall, phases = self.wall_seconds, dict(self.phase_seconds)
        if self._t0 is not None and self.algo is not None:
            wall += time.perf_counter() - self._t0
            for k, v in self.algo.timings.items():
                phases[k] = phases.get(k, 0.0) + v - self._start.get(k, 0.0)
        return wall, phases

    def on_training_end(self, metrics: Mapping[str, Any]) -> None:
        if self._t0 is not None:
            self.wall_seconds, self.phase_seconds = self._running()
            self._t0 = None

    def timings(self) -> dict[str, float]:
        """Seconds per phase, plus ``total`` (wall time of training)."""
        wall, phases = self._running()
        return {**phases, "total": wall}

    def summary(self) -> dict[str, float]:
        """Percent of training wall time per phase (one decimal); ``other`` is the rest (loop
        overhead, anything no phase covers), so the values add up to 100."""
        wall, phases = self._running()
        if wall <= 0:
            return {}
        out = {k: round(100.0 * v / wall, 1) for k, v in phases.items() if v > 0}
        rest = wall - sum(v for v in phases.values() if v > 0)
        if rest > 0:
            out["other"] = round(100.0 * rest / wall, 1)
        return out
