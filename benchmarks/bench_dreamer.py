"""DreamerV3 on Pendulum-v1: return after a budget of env steps, and wall time.

rlox's DreamerV3 (``Trainer("dreamer", env="Pendulum-v1")``, size preset ``--size``) is trained
for ``--steps`` env steps per seed and scored by the mean return of ``--eval-episodes``
deterministic episodes (``predict`` with its recurrent state reset between episodes) at each
``--eval-every`` steps. ``--set key=value`` overrides any ``DreamerV3Config`` field.
Goal (issue 15): Pendulum >= -200 within 20k steps (SAC reaches about -150 there).

``--time-updates N`` instead times N gradient updates (CPU seconds per update, one torch
thread, XS model, replay filled by 1000 random steps); with ``--compare-with DIR`` it runs the
same timing in alternating subprocesses with ``PYTHONPATH=DIR`` (another rlox checkout, e.g.
the commit before a change) and with this checkout, ``--rounds`` times each, and writes the
ratio to ``results/dreamer_update.md``.

The peer, sheeprl's DreamerV3, pins its own lightning/hydra/gymnasium versions, so it must run
from a venv of its own; this script runs it only where ``sheeprl`` imports (it says so in the
table otherwise).

    .venv/bin/python benchmarks/bench_dreamer.py --steps 20000 --seeds 1 [--train-ratio 512] [--size XS]
    .venv/bin/python benchmarks/bench_dreamer.py --time-updates 5 --compare-with /path/to/old/checkout
    RLOX_BENCH_QUICK=1 .venv/bin/python benchmarks/bench_dreamer.py     # 5k steps, train_ratio 64
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, RESULTS, Row, Table, header  # noqa: E402


def evaluate(algo, n_episodes: int = 10, seed: int = 10_000) -> float:
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


def run_rlox(seed: int, steps: int, eval_every: int, config: dict, n_episodes: int, on_eval=None) -> dict:
    from rlox import Trainer

    trainer = Trainer("dreamer", env="Pendulum-v1", seed=seed, config=config)
    run = {"seed": seed, "curve": [], "wall": 0.0}
    t0, done, train_time = time.perf_counter(), 0, 0.0
    while done < steps:
        chunk = min(eval_every, steps - done)
        t = time.perf_counter()
        trainer.train(total_timesteps=chunk)
        train_time += time.perf_counter() - t
        done += chunk
        run["curve"].append((done, evaluate(trainer.algo, n_episodes), train_time))
        run["wall"] = time.perf_counter() - t0
        print(f"  seed {seed}: {done} steps, return {run['curve'][-1][1]:.1f}, train {train_time:.0f} s, "
              f"{trainer.algo.updates} updates", flush=True)
        if on_eval is not None:
            on_eval(run)
    return run


def time_updates(n: int, size: str) -> float:
    """CPU seconds per gradient update of the ``size`` model on Pendulum (replay of 1000 random
    steps, 2 warm-up updates first)."""
    from rlox.algorithms.dreamer_v3 import DreamerV3

    algo = DreamerV3("Pendulum-v1", seed=0, size=size, learning_starts=1000, train_ratio=1e-9)
    algo.train(total_timesteps=1000)          # fills the replay; train_ratio ~0: no updates
    for _ in range(2):
        algo._train_step()
    t = time.process_time()
    for _ in range(n):
        algo._train_step()
    return (time.process_time() - t) / n


def compare_updates(args) -> None:
    """Alternate subprocesses (old checkout, this one) so both see the same machine load."""
    here = str(Path(__file__).resolve().parents[1])
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cmd = [sys.executable, __file__, "--time-updates", str(args.time_updates), "--size", args.size]
    times: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for key, path in (("old", args.compare_with), ("new", here)):
            out = subprocess.run(cmd, env=dict(env, PYTHONPATH=path), capture_output=True, text=True, check=True)
            times[key].append(float(out.stdout.strip().splitlines()[-1].split()[0]))
            print(f"  round {r}: {key} {times[key][-1]:.3f} cpu-s/update", flush=True)
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    load = os.getloadavg()[0]
    table = Table("dreamer_update", "DreamerV3 gradient update: CPU seconds per update (rlox, before/after)")
    table.add(f"XS update on Pendulum (B=16, T=64, H=15), median of {args.rounds} interleaved rounds",
              rlox=new, peer=old, peer_name=f"rlox at {args.compare_with}", unit="time",
              note=f"old {[round(t, 3) for t in times['old']]}, new {[round(t, 3) for t in times['new']]}; "
                   f"{args.time_updates} updates a round, 1 torch thread, load average {load:.1f} on "
                   f"{os.cpu_count()} cores")
    table.finish()


def _parse_set(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects key=value (a DreamerV3Config field), got {item!r}")
        try:
            out[key] = json.loads(value)
        except json.JSONDecodeError:
            out[key] = value
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    # RLOX_BENCH_QUICK=1: 5k steps at train_ratio 64 (what fits a shared 2-core machine).
    ap.add_argument("--steps", type=int, default=5_000 if QUICK else 20_000)
    ap.add_argument("--seeds", type=int, default=1)
    ap.add_argument("--eval-every", type=int, default=2_500 if QUICK else 5_000)
    ap.add_argument("--eval-episodes", type=int, default=10)
    ap.add_argument("--train-ratio", type=float, default=64.0 if QUICK else 512.0)
    ap.add_argument("--size", default="XS")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a DreamerV3Config override (repeatable), e.g. --set model_lr=3e-4")
    ap.add_argument("--time-updates", type=int, default=0, metavar="N",
                    help="time N gradient updates instead of training (CPU seconds per update)")
    ap.add_argument("--compare-with", default=None, metavar="DIR",
                    help="with --time-updates: alternate with PYTHONPATH=DIR (another rlox checkout)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--keep", action="store_true",
                    help="keep the table rows and saved curves of earlier runs with other settings")
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.time_updates:
        if args.compare_with:
            compare_updates(args)
        else:
            print(f"{time_updates(args.time_updates, args.size):.4f} cpu-s/update")
        return
    config = {"size": args.size, "train_ratio": args.train_ratio, **_parse_set(args.set)}
    header(f"DreamerV3 Pendulum-v1: {args.steps} steps, {args.seeds} seed(s), {config}")
    runs: list[dict] = []
    runs_file, table_file = RESULTS / "dreamer_runs.json", RESULTS / "dreamer.json"
    saved = json.loads(runs_file.read_text()) if args.keep and runs_file.exists() else []
    saved = [saved] if isinstance(saved, dict) else saved          # (the one-config format of before)
    saved = [e for e in saved if e.get("config") != config]
    kept = json.loads(table_file.read_text()) if args.keep and table_file.exists() else []
    try:
        import sheeprl  # noqa: F401
        peer_note = "sheeprl importable but its runner is not wired here"
    except ImportError:
        peer_note = "sheeprl not run (not installed: it needs a venv of its own)"
    extra = "".join(f", {k} {v}" for k, v in config.items() if k not in ("size", "train_ratio"))

    def write_table(done: list[dict]) -> None:
        table = Table("dreamer", "DreamerV3 on Pendulum-v1: return at a budget and wall time (rlox)")
        for i in range(max(len(r["curve"]) for r in done)):
            points = [r["curve"][i] for r in done if len(r["curve"]) > i]
            finals = [p[1] for p in points]
            table.add(f"Pendulum return at {points[0][0]} steps ({args.size}, train_ratio {args.train_ratio:g}"
                      f"{extra})", rlox=float(np.mean(finals)), unit="return",
                      note=f"{len(points)} seed(s) {np.round(finals, 1).tolist()} (mean of {args.eval_episodes} "
                           f"deterministic episodes each); train wall {np.mean([p[2] for p in points]):.0f} s; "
                           f"{peer_note}")
        new_cases = {r.case for r in table.rows}
        # --keep: the rows of earlier runs with other settings stay in the table, before these.
        old = [Row(r["case"], r["rlox"], r["peer"], r["peer_name"], r["goal"], r["unit"], r["note"])
               for r in kept if r["case"] not in new_cases]
        table.rows[:0] = old
        table.finish()

    def save(run: dict) -> None:      # after every evaluation: a killed run keeps its curve and rows
        done = [r for r in runs if r["seed"] != run["seed"]] + [run]
        runs_file.write_text(json.dumps(saved + [{"config": config, "runs": done}], indent=2))
        write_table(done)

    for s in range(args.seeds):
        runs.append(run_rlox(s, args.steps, args.eval_every, config, args.eval_episodes, save))


if __name__ == "__main__":
    main()
