"""IMPALA on CartPole-v1: per-seed learning curves for the defaults or a variant, to see why a
seed fails (collapse after reaching 500? entropy? staleness? value loss?). Not part of run_all.

    .venv/bin/python benchmarks/impala_curves.py base --seeds 0,1,2,3,4
    .venv/bin/python benchmarks/impala_curves.py rms --seeds 0,1,2,3,4 \
        --config '{"optimizer": "rmsprop", "optimizer_eps": 0.01}'
    .venv/bin/python benchmarks/impala_curves.py --summary base rms

Each seed: ``IMPALA("CartPole-v1", seed=seed, **config)`` trained for ``--steps`` env steps,
scored like bench_impala's learning row (mean of 10 deterministic episodes, seed 1000 + seed);
its per-update metrics (sub-sampled to ~400 rows) go to ``benchmarks/.cache/impala_curves/
<tag>_s<seed>.json`` (git-ignored). ``--summary`` prints, per tag, the scores, their IQM, the mean
training return over the last 30% of the run, the fraction of that stretch at >= 475 and the
first step at >= 475.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

OUT = Path(__file__).resolve().parent / ".cache" / "impala_curves"
KEYS = ["train/mean_reward", "loss/entropy", "loss/value_loss", "loss/policy_loss", "actors/staleness",
        "actors/max_staleness", "loss/rho_mean", "loss/clip_fraction", "loss/explained_variance",
        "train/learning_rate"]


def iqm(x) -> float:
    x = np.sort(np.asarray(x, dtype=float))
    n = len(x)
    return float(x[int(np.floor(n * 0.25)):int(np.ceil(n * 0.75))].mean())


class _Rows:
    def __init__(self) -> None:
        self.rows: list[list[float]] = []

    def on_train_step(self, step, metrics) -> None:
        self.rows.append([int(step)] + [float(metrics.get(k, np.nan)) for k in KEYS])


def run(tag: str, seeds: list[int], config: dict, steps: int) -> None:
    import torch

    from rlox.algorithms.impala import IMPALA
    from rlox.evaluation import evaluate_policy

    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    for seed in seeds:
        log, t0 = _Rows(), time.time()
        algo = IMPALA("CartPole-v1", seed=seed, logger=log, **config)
        algo.train(total_timesteps=steps)
        score = evaluate_policy(algo, "CartPole-v1", n_episodes=10, seed=1000 + seed)["mean_reward"]
        rows = np.asarray(log.rows)
        (OUT / f"{tag}_s{seed}.json").write_text(json.dumps(dict(
            tag=tag, seed=seed, config=config, steps=steps, eval=score, train=algo.mean_reward,
            seconds=time.time() - t0, keys=["step"] + KEYS, rows=rows[::max(1, len(rows) // 400)].tolist())))
        idx = np.linspace(0, len(rows) - 1, 11).astype(int)
        print(f"{tag} seed {seed}: {score:.1f} (training return {algo.mean_reward:.1f}, {time.time() - t0:.0f} s)",
              flush=True)
        for col, name in [(1, "return"), (2, "entropy"), (3, "value loss"), (5, "staleness")]:
            print(f"   {name:>10} at 0%, 10%, .. 100%: " + " ".join(f"{rows[i, col]:.3g}" for i in idx), flush=True)


def summary(tags: list[str]) -> None:
    for tag in tags:
        scores, late, frac, first = [], [], [], []
        for f in sorted(OUT.glob(f"{tag}_s*.json")):
            d = json.loads(f.read_text())
            rows = np.asarray(d["rows"])
            step, ret = rows[:, 0], rows[:, 1]
            tail = ret[step >= 0.7 * step[-1]]
            hit = step[ret >= 475]
            scores.append(d["eval"])
            late.append(tail.mean())
            frac.append((tail >= 475).mean())
            first.append(f"{hit[0] / 1e3:.0f}k" if len(hit) else "-")
        if not scores:
            print(f"{tag}: no runs under {OUT}")
            continue
        print(f"{tag}: scores {', '.join(f'{s:.0f}' for s in scores)} (IQM {iqm(scores):.0f}); last 30%: mean "
              f"training return {', '.join(f'{x:.0f}' for x in late)}, share >= 475 "
              f"{', '.join(f'{x:.2f}' for x in frac)}; first >= 475 at {', '.join(first)}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("tag", nargs="?", help="name of this variant (file prefix)")
    p.add_argument("--seeds", default="0,1,2,3,4", help="comma-separated seeds")
    p.add_argument("--config", default="{}", help="IMPALAConfig overrides as JSON (default: the defaults)")
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--summary", nargs="+", metavar="TAG", help="print the summary of these tags and exit")
    args = p.parse_args()
    if args.summary:
        summary(args.summary)
        return
    if not args.tag:
        p.error("give a tag (or --summary TAG ...)")
    run(args.tag, [int(s) for s in args.seeds.split(",")], json.loads(args.config), args.steps)


if __name__ == "__main__":
    main()
