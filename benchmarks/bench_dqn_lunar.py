"""DQN on LunarLander-v3 at 100k steps: rlox's ``Trainer("dqn", env="LunarLander-v3")`` defaults
(its preset: the RL Zoo's hyperparameters) next to SB3's DQN with the same hyperparameters,
seed by seed (issue 18; Zoo result 154, goal: rlox >= 100).

Both are scored the same way: the training return (mean of the last 100 episodes, SB3's
``rollout/ep_rew_mean``) and the mean return of 10 deterministic (greedy) episodes after training
(``rlox.evaluation.evaluate_policy``, reset seeds 10_000 + seed, as ``bench_offpolicy.py``).
One run at a time, one torch thread. Runs are stored in ``results/dqn_lunar_runs.json`` as they
finish, tagged with ``--tag`` (e.g. the rlox commit), and skipped when already stored.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dqn_lunar.py --seeds 0 1 2 --tag after
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dqn_lunar.py --libs rlox --seeds 0 1 2 --tag after
    .venv/bin/python benchmarks/bench_dqn_lunar.py --report      # the table from stored runs only
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS  # noqa: E402
from bench_offpolicy import sb3_model, score  # noqa: E402

from rlox.presets import get_preset  # noqa: E402

ENV, STEPS, GOAL, ZOO = "LunarLander-v3", 100_000, 100.0, 154.0
RUNS = RESULTS / "dqn_lunar_runs.json"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"


def run_one(lib: str, seed: int, steps: int) -> dict[str, Any]:
    import torch

    torch.set_num_threads(1)
    t0 = time.perf_counter()
    if lib == "rlox":
        from rlox import Trainer

        trainer = Trainer("dqn", env=ENV, seed=seed)          # the defaults: preset on
        trainer.train(total_timesteps=steps)
        dt = time.perf_counter() - t0
        algo = trainer.algo
        train_ret = float(algo.mean_reward)              # last 100 training episodes
        value = score(lambda o: trainer.predict(o, deterministic=True), ENV, seed)
    else:
        model = sb3_model("dqn", ENV, seed, get_preset("dqn", ENV))
        model.learn(total_timesteps=steps)
        dt = time.perf_counter() - t0
        train_ret = float(np.mean([ep["r"] for ep in model.ep_info_buffer]))
        value = score(lambda o: model.predict(o, deterministic=True)[0], ENV, seed)
    return dict(lib=lib, seed=seed, steps=steps, train=train_ret, eval=float(value), seconds=dt)


def load() -> list[dict[str, Any]]:
    return json.loads(RUNS.read_text()) if RUNS.is_file() else []


def store(run: dict[str, Any]) -> None:
    runs = [r for r in load() if not _same(r, run)] + [run]
    RESULTS.mkdir(parents=True, exist_ok=True)
    tmp = RUNS.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(runs, indent=1))
    os.replace(tmp, RUNS)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return all(a[k] == b[k] for k in ("lib", "seed", "steps", "tag"))


def report() -> None:
    runs = load()
    tags = list(dict.fromkeys(r["tag"] for r in runs))
    lines = [f"# DQN {ENV}, {STEPS // 1000}k steps: rlox Trainer defaults vs SB3 (same preset)", "",
             "Training return: mean of the last 100 training episodes (epsilon-greedy, final eps 0.1).",
             "Evaluated: mean of 10 deterministic episodes after training (reset seeds 10_000 + seed).",
             f"RL Zoo (SB3, LunarLander-v2): {ZOO:g}. Goal (issue 18): rlox evaluated mean >= {GOAL:g}.",
             "Wall seconds are on a 2-core machine shared with 10-25 runnable processes (not a speed figure).", "",
             "Command: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dqn_lunar.py --seeds 0 1 2 "
             "--tag <tag>`, then `--report`.", "",
             "| tag | lib | seeds | training return per seed | evaluated per seed | evaluated mean | "
             "wall s (mean) |", "|---|---|---|---|---|---|---|"]
    table = []
    for tag in tags:
        for lib in ("rlox", "sb3"):
            rs = sorted((r for r in runs if r["tag"] == tag and r["lib"] == lib and r["steps"] == STEPS),
                        key=lambda r: r["seed"])
            if not rs:
                continue
            ev = [r["eval"] for r in rs]
            row = dict(tag=tag, lib=lib, seeds=[r["seed"] for r in rs], train=[r["train"] for r in rs],
                       eval=ev, eval_mean=float(np.mean(ev)), seconds=float(np.mean([r["seconds"] for r in rs])),
                       commit=sorted({r.get("commit", "?") for r in rs}))
            table.append(row)
            lines.append(f"| {tag} | {lib} | {', '.join(map(str, row['seeds']))} | "
                         + ", ".join(f"{x:.1f}" for x in row["train"]) + " | "
                         + ", ".join(f"{x:.1f}" for x in ev) + f" | {row['eval_mean']:.1f} | {row['seconds']:.0f} |")
    (RESULTS / "dqn_lunar.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "dqn_lunar.json").write_text(json.dumps(
        {"env": ENV, "steps": STEPS, "goal": GOAL, "zoo": ZOO, "rows": table,
         "command": "OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dqn_lunar.py --seeds 0 1 2 --tag <tag>"},
        indent=1))
    print("\n".join(lines))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--libs", nargs="+", default=["rlox", "sb3"], choices=["rlox", "sb3"])
    p.add_argument("--tag", default="current", help="label of the rlox version measured (stored with each run)")
    p.add_argument("--steps", type=int, default=STEPS)
    p.add_argument("--report", action="store_true", help="only print/write the table from stored runs")
    a = p.parse_args()
    if not a.report:
        for seed in a.seeds:
            for lib in a.libs:
                probe = dict(lib=lib, seed=seed, steps=a.steps, tag=a.tag)
                if any(_same(r, probe) for r in load()):
                    continue
                run = {**run_one(lib, seed, a.steps), "tag": a.tag, "commit": _commit(),
                       "when": time.strftime("%Y-%m-%d %H:%M")}
                store(run)
                print(f"{a.tag} {lib} seed {seed}: train {run['train']:.1f} eval {run['eval']:.1f} "
                      f"({run['seconds']:.0f}s)", flush=True)
    report()


if __name__ == "__main__":
    main()
