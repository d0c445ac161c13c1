"""Overhead of the training harness (loggers, callbacks) on training speed, side by side.

PPO and A2C on CartPole-v1 with their tuned presets, trained from the same seed with no
logger or callbacks, then with each logger, then with every logger and callback at once.
Variants run interleaved, ``ROUNDS`` times each; the table gives the median steps/second and
the ratio to the bare run (goal: >= 0.95, i.e. under 5% overhead). On a shared machine the
side-by-side ratio is noisy (other work shifts whole runs by 10-30%), so each row also gives
the share of wall time the training loop itself measured in callbacks and loggers
(``algo.timings["callbacks"]``), which is the harness's cost within the same run. A2C's preset makes an
iteration only 40 env steps (8 envs x 5), so per-iteration costs weigh most there.

    .venv/bin/python benchmarks/bench_harness.py        # RLOX_BENCH_QUICK=1 for a shorter run
"""
from __future__ import annotations

import io
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _harness import QUICK, Table, header  # noqa: E402

from rlox import Trainer  # noqa: E402
from rlox.callbacks import CheckpointCallback, EarlyStoppingCallback, ProgressBarCallback, TimingCallback  # noqa: E402
from rlox.dashboard import MetricsCollector, TerminalDashboard  # noqa: E402
from rlox.logging import ConsoleLogger, CSVLogger, TensorBoardLogger  # noqa: E402

STEPS = {"ppo": 8_192 if QUICK else 24_576, "a2c": 4_000 if QUICK else 12_000}
ROUNDS = 2 if QUICK else 5


def variants(tmp: Path) -> dict[str, callable]:
    sink = open(os.devnull, "w")

    def none():
        return {}

    def console():
        return {"logger": ConsoleLogger(log_interval=1000, stream=sink)}

    def tensorboard():
        return {"logger": TensorBoardLogger(tmp / "tb")}

    def csv_logger():
        return {"logger": CSVLogger(tmp / "m.csv")}

    def everything(interval=None):
        from rich.console import Console

        return {"logger": [ConsoleLogger(log_interval=1000, stream=sink),
                           TensorBoardLogger(tmp / "tb2", log_interval=interval),
                           CSVLogger(tmp / "m2.csv", log_interval=interval)],
                "callbacks": [EarlyStoppingCallback(patience=10**9), ProgressBarCallback(file=sink),
                              TimingCallback(), MetricsCollector(),
                              TerminalDashboard(console=Console(file=io.StringIO(), force_terminal=True)),
                              CheckpointCallback(save_freq=10_000, save_path=tmp / "ck", keep_last=1)]}

    return {"no logger, no callbacks": none, "ConsoleLogger": console, "TensorBoardLogger": tensorboard,
            "CSVLogger": csv_logger, "all loggers + all callbacks (no eval)": everything,
            "same, TensorBoard/CSV log_interval=1000": lambda: everything(1000)}


def run(algo: str, kwargs: dict) -> tuple[float, float]:
    """(steps/s, share of wall time spent in callbacks and loggers as the loop measures it)."""
    trainer = Trainer(algo, env="CartPole-v1", seed=0, **kwargs)
    metrics = trainer.train(STEPS[algo])
    wall = STEPS[algo] / metrics["sps"]
    return float(metrics["sps"]), trainer.algo.timings.get("callbacks", 0.0) / wall


def main() -> None:
    table = Table("harness", "Training harness overhead: steps/s with loggers and callbacks vs without")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for algo in ("ppo", "a2c"):
            header(f"{algo.upper()} CartPole-v1 preset, {STEPS[algo]} steps, {ROUNDS} interleaved rounds")
            vs = variants(tmp)
            run(algo, {})   # warm-up (imports, allocator)
            sps: dict[str, list[float]] = {name: [] for name in vs}
            share: dict[str, list[float]] = {name: [] for name in vs}
            for _ in range(ROUNDS):
                for name, make in vs.items():
                    s, f = run(algo, make())
                    sps[name].append(s)
                    share[name].append(f)
            base = statistics.median(sps["no logger, no callbacks"])
            for name, values in sps.items():
                med = statistics.median(values)
                note = (f"range {min(values):,.0f}-{max(values):,.0f} steps/s; in-loop harness time "
                        f"{100 * statistics.median(share[name]):.2f}% of wall")
                if name == "no logger, no callbacks":
                    table.add(f"{algo} {name}", rlox=med, unit="steps/s", note=note)
                else:
                    table.add(f"{algo} {name}", rlox=med, peer=base, peer_name="bare run", goal=0.95,
                              unit="steps/s", note=note + f"; overhead {100 * (1 - med / base):+.1f}%")
    table.finish()


if __name__ == "__main__":
    main()
