"""DreamerV3 on Pendulum-v1: return after a budget of env steps, and wall time.

rlox's DreamerV3 (``Trainer("dreamer", env="Pendulum-v1")``, size preset ``--size``) is trained
for ``--steps`` env steps per seed and scored by the mean return of 5 deterministic episodes
(``predict`` with its recurrent state reset between episodes) at each ``--eval-every`` steps.
Goal (issue 15): Pendulum >= -200 within 20k steps (SAC reaches about -150 there).

The peer, sheeprl's DreamerV3, pins its own lightning/hydra/gymnasium versions, so it must run
from a venv of its own; this script runs it only where ``sheeprl`` imports (it says so in the
table otherwise).

    .venv/bin/python benchmarks/bench_dreamer.py --steps 20000 --seeds 1 [--train-ratio 512] [--size XS]
    RLOX_BENCH_QUICK=1 .venv/bin/python benchmarks/bench_dreamer.py     # 5k steps, train_ratio 64
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, RESULTS, Table, header  # noqa: E402


def evaluate(algo, n_episodes: int = 5, seed: int = 10_000) -> float:
    import gymnasium as gym

    env = gym.make("Pendulum-v1")
    returns = []
    for ep in range(n_episodes):
        obs, _ = env.reset(seed=seed + ep)
        algo.reset_state()
        total, done = 0.0, False
        while not done:
            obs, reward, terminated, truncated, _ = env.step(algo.predict(obs, deterministic=True))
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def run_rlox(seed: int, steps: int, eval_every: int, config: dict) -> dict:
    from rlox import Trainer

    trainer = Trainer("dreamer", env="Pendulum-v1", seed=seed, config=config)
    curve, t0, done = [], time.perf_counter(), 0
    train_time = 0.0
    while done < steps:
        chunk = min(eval_every, steps - done)
        t = time.perf_counter()
        trainer.train(total_timesteps=chunk)
        train_time += time.perf_counter() - t
        done += chunk
        curve.append((done, evaluate(trainer.algo), train_time))
        print(f"  seed {seed}: {done} steps, return {curve[-1][1]:.1f}, train {train_time:.0f} s, "
              f"{trainer.algo.updates} updates", flush=True)
    return {"seed": seed, "curve": curve, "wall": time.perf_counter() - t0}


def main() -> None:
    ap = argparse.ArgumentParser()
    # RLOX_BENCH_QUICK=1: 5k steps at train_ratio 64 (what fits a shared 2-core machine).
    ap.add_argument("--steps", type=int, default=5_000 if QUICK else 20_000)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=2_500 if QUICK else 5_000)
    ap.add_argument("--train-ratio", type=float, default=64.0 if QUICK else 512.0)
    ap.add_argument("--size", default="XS")
    args = ap.parse_args()
    torch.set_num_threads(1)
    config = {"size": args.size, "train_ratio": args.train_ratio}
    header(f"DreamerV3 Pendulum-v1: {args.steps} steps, {args.seeds} seed(s), {config}")
    runs = [run_rlox(s, args.steps, args.eval_every, config) for s in range(args.seeds)]
    try:
        import sheeprl  # noqa: F401
        peer_note = "sheeprl importable but its runner is not wired here"
    except ImportError:
        peer_note = "sheeprl not run (not installed: it needs a venv of its own)"
    table = Table("dreamer", "DreamerV3 on Pendulum-v1: return at a budget and wall time (rlox)")
    for i, (steps, _, _) in enumerate(runs[0]["curve"]):
        finals = [r["curve"][i][1] for r in runs]
        wall = float(np.mean([r["curve"][i][2] for r in runs]))
        table.add(f"Pendulum return at {steps} steps ({args.size}, train_ratio {args.train_ratio:g})",
                  rlox=float(np.mean(finals)), unit="return",
                  note=f"{len(runs)} seed(s) {np.round(finals, 1).tolist()}; train wall {wall:.0f} s; {peer_note}")
    table.finish()
    (RESULTS / "dreamer_runs.json").write_text(json.dumps({"config": config, "runs": runs}, indent=2))


if __name__ == "__main__":
    main()
