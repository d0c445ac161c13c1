"""DreamerV3 on a DeepMind Control task (default cartpole-swingup), from its proprio state or, with
``--pixels``, from 64x64 RGB frames, at a budget that fits a 2-core CPU, beside the published
DreamerV3 score at 500k steps (``shared/ANCHORS.md``).

rlox's DreamerV3 (size ``--size``, ``--train-ratio``, DreamerV2's DMC learning rates by default:
model 3e-4, actor and critic 8e-5, as the Pendulum runs of ``bench_dreamer.py``) trains on
``DMControlWrapper(domain, task, action_repeat=2)`` (DreamerV3's DMC setting; with ``--pixels``
``from_pixels=True, height=64, width=64``, camera 0, so the convolutional encoder and decoder
are used: DreamerV3's DMC vision setting) for ``--steps``
agent steps per seed; every ``--eval-every`` steps ``rlox.evaluation.evaluate_policy`` scores the
greedy policy over ``--eval-episodes`` episodes (reset seeds 10000..). Writes
``results/dreamer_dmc.md`` and keeps the curves in ``results/dreamer_dmc_runs.json`` (runs of
other settings stay).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dreamer_dmc.py --task cartpole-swingup --steps 20000 --seeds 1
    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dreamer_dmc.py --task cartpole-swingup --pixels --steps 10000

Pixel frames are rendered by MuJoCo headless (EGL, ``MUJOCO_GL``); on a CPU-only machine that is
Mesa's software renderer, whose frame cost (60-90 ms for 64x64 on the 2-core machine here) is a
large part of a pixel run's wall time, so the table's train wall includes it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import RESULTS  # noqa: E402

#: DreamerV3's published DMC proprio scores at 500k steps and PPO's with fixed hyperparameters
#: (shared/ANCHORS.md).
PUBLISHED = {"cartpole-swingup": (852, 243), "pendulum-swingup": (788, 0), "cartpole-balance": (990, 521)}
RUNS = RESULTS / "dreamer_dmc_runs.json"


def run(task: str, seed: int, steps: int, eval_every: int, episodes: int, config: dict,
        pixels: bool = False) -> dict:
    from rlox.algorithms.dreamer_v3 import DreamerV3
    from rlox.evaluation import evaluate_policy
    from rlox.wrappers.visual import DMControlWrapper

    domain, name = task.split("-", 1)
    view = dict(from_pixels=True, height=64, width=64, camera_id=0) if pixels else {}
    make = lambda: DMControlWrapper(domain, name, action_repeat=2, **view)  # noqa: E731
    algo = DreamerV3(make(), seed=seed, **config)
    curve, wall = [], 0.0
    while algo.num_timesteps < steps:
        t = time.perf_counter()
        algo.train(total_timesteps=min(eval_every, steps - algo.num_timesteps))
        wall += time.perf_counter() - t
        score = evaluate_policy(algo, make(), n_episodes=episodes, seed=10_000)["mean_reward"]
        curve.append([int(algo.num_timesteps), float(score), round(wall, 1), round(os.getloadavg()[0], 1)])
        print(f"  {task} seed {seed} step {algo.num_timesteps}: return {score:.1f} (train wall {wall:.0f} s, "
              f"load {os.getloadavg()[0]:.1f})", flush=True)
    return {"seed": seed, "curve": curve}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--task", default="cartpole-swingup", help="domain-task, e.g. cartpole-swingup")
    ap.add_argument("--steps", type=int, default=20_000, help="agent steps (each repeats the action twice)")
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=5_000)
    ap.add_argument("--eval-episodes", type=int, default=5)
    ap.add_argument("--size", default="XS")
    ap.add_argument("--train-ratio", type=float, default=96.0)
    ap.add_argument("--pixels", action="store_true", help="observe 64x64 RGB frames (CNN encoder/decoder)")
    args = ap.parse_args()
    if "-" not in args.task:
        raise SystemExit(f"--task must be domain-task (e.g. cartpole-swingup), got {args.task!r}")
    torch.set_num_threads(1)
    config = dict(size=args.size, train_ratio=args.train_ratio, model_lr=3e-4, actor_lr=8e-5, critic_lr=8e-5)
    # (proprio runs keep the key they had before --pixels existed)
    key = json.dumps(dict(task=args.task, **config, **({"pixels": True} if args.pixels else {})), sort_keys=True)
    stored = json.loads(RUNS.read_text()) if RUNS.exists() else {}
    runs = stored.setdefault(key, [])
    for seed in range(args.seeds):
        if any(r["seed"] == seed and r["curve"] and r["curve"][-1][0] >= args.steps for r in runs):
            continue
        runs[:] = [r for r in runs if r["seed"] != seed] + [run(args.task, seed, args.steps, args.eval_every,
                                                                 args.eval_episodes, config, args.pixels)]
        RUNS.write_text(json.dumps(stored, indent=1))
    lines = ["# DreamerV3 on DeepMind Control (proprio state or 64x64 pixels), rlox", "",
             f"Machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, one torch thread, "
             f"{time.strftime('%Y-%m-%d %H:%M')}", "",
             "Command: `OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_dreamer_dmc.py --task TASK --steps N "
             "--seeds S [--pixels]`. Action repeat 2 (DreamerV3's DMC setting): *steps* are agent steps, twice as many "
             "env frames. Return: mean of the greedy policy's episodes (reset seeds 10000..), "
             "`rlox.evaluation.evaluate_policy`. *published*: DreamerV3's score at 500k steps and PPO's with "
             "fixed hyperparameters (shared/ANCHORS.md), for reference: the budgets here are far smaller, and "
             "the published figures are from proprio state (pixel rows have no published figure here).", "",
             "| task | observation | config | seed | steps: return (train wall s, load) | published DreamerV3 / PPO |",
             "|---|---|---|---|---|---|"]
    for k, rs in stored.items():
        cfg = json.loads(k)
        task = cfg.pop("task")
        seen = "pixels 64x64" if cfg.pop("pixels", False) else "proprio"
        pub = PUBLISHED.get(task)
        published = (f"{pub[0]} / {pub[1]}" + (" (proprio figures)" if seen != "proprio" else "")) if pub else "-"
        for r in sorted(rs, key=lambda r: r["seed"]):
            pts = ", ".join(f"{s}: {v:.0f} ({w:.0f} s, {ld})" for s, v, w, ld in r["curve"])
            lines.append(f"| {task} | {seen} | {', '.join(f'{a}={b}' for a, b in cfg.items())} | {r['seed']} | {pts} | "
                         f"{published} |")
    (RESULTS / "dreamer_dmc.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
