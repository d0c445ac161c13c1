"""Offline RL side by side: rlox's TD3+BC, IQL, CQL and BC against d3rlpy 2.8.1.

    .venv/bin/python benchmarks/bench_offline.py                       # throughput + learning
    .venv/bin/python benchmarks/bench_offline.py --only throughput --steps 300
    .venv/bin/python benchmarks/bench_offline.py --only learning --seeds 5 --learn-steps 20000

d3rlpy pins gymnasium 1.0.0, so it runs in a venv this script creates under
``benchmarks/.cache/offline/d3rlpy-venv`` (git-ignored; torch from the same local wheel), called
as a subprocess in the same invocation, contestants interleaved. Both sides use one torch thread,
the same arrays (written once to an ``.npz`` in the cache), the same number of gradient steps,
the same batch size, the same two-layer MLP widths and the same learning rates.

* Throughput: gradient steps per second on random arrays shaped like HalfCheetah (obs 17, act 6,
  100k transitions), batch 256, hidden 256 (d3rlpy's default widths), batch sampling included on
  both sides (rlox: the Cython buffer; d3rlpy: its own). CQL is Lagrangian on both sides
  (d3rlpy's default ``alpha_threshold=10``; rlox ``target_action_gap=10``).
* Learning: Pendulum-v1 datasets made with ``rlox.offline.collect_dataset``: ``expert`` (the
  hand-written swing-up controller ``pendulum_swingup_policy`` with 0.1 action noise) and
  ``medium`` (an rlox SAC agent trained for ``--sac-steps`` env steps, with 0.1 action noise);
  each algorithm is trained for ``--learn-steps`` gradient steps per seed and evaluated over
  ``--episodes`` episodes; the table gives D4RL normalised scores (``rlox.offline.normalized_score``)
  as the IQM over seeds with the min-max range.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent
CACHE = ROOT / ".cache" / "offline"
VENV = CACHE / "d3rlpy-venv"
RESULTS = ROOT / "results"
WORKER = ROOT / "_d3rlpy_worker.py"
ALGOS = ("td3_bc", "iql", "cql", "bc")


def ensure_venv() -> Path:
    """The d3rlpy venv's python, created on first use (pip only: d3rlpy 2.8.1 and torch 2.13.0)."""
    py = VENV / "bin" / "python"
    stamp = VENV / ".ready"
    if not stamp.exists():
        print(f"creating {VENV} (d3rlpy 2.8.1) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", "torch==2.13.0", "d3rlpy==2.8.1"], check=True)
        stamp.touch()
    return py


def run_d3rlpy(py: Path, job: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run([str(py), str(WORKER), json.dumps(job)], capture_output=True, text=True, env=env)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"d3rlpy worker failed ({proc.returncode}):\n{proc.stderr[-3000:]}")


def rlox_algo(name: str, dataset, hidden: int, batch: int, seed: int, env=None):
    from rlox.algorithms.bc import BC
    from rlox.algorithms.cql import CQL
    from rlox.algorithms.iql import IQL
    from rlox.algorithms.td3_bc import TD3BC

    common = dict(dataset=dataset, hidden=hidden, batch_size=batch, seed=seed, env_id=env)
    if name == "td3_bc":
        return TD3BC(**common)
    if name == "iql":
        return IQL(**common)
    if name == "cql":
        return CQL(target_action_gap=10.0, **common)
    return BC(**common)


def rlox_steps_per_s(name, dataset, hidden, batch, steps, seed=0, env=None):
    algo = rlox_algo(name, dataset, hidden, batch, seed, env)
    algo.config = algo.config.merge({"steps_per_iteration": steps})
    t0 = time.perf_counter()
    algo.train(n_gradient_steps=steps)
    return steps / (time.perf_counter() - t0), algo


# ---------------------------------------------------------------------- throughput
def throughput(py: Path, steps: int, rounds: int) -> list[dict]:
    from rlox.offline import OfflineDatasetBuffer

    n, obs_dim, act_dim = 100_000, 17, 6
    rng = np.random.default_rng(0)
    arrays = dict(observations=rng.normal(size=(n, obs_dim)).astype(np.float32),
                  actions=rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
                  rewards=rng.normal(size=n).astype(np.float32), terminals=np.zeros(n, bool),
                  timeouts=np.zeros(n, bool))
    arrays["timeouts"][999::1000] = True
    arrays["next_observations"] = np.roll(arrays["observations"], -1, axis=0)
    path = CACHE / "throughput.npz"
    np.savez(path, **arrays)
    buf = OfflineDatasetBuffer.from_npz(path)
    rows = []
    for name in ALGOS:
        s = steps if name != "cql" else max(steps // 5, 20)
        ours, theirs = [], []
        for _ in range(rounds):   # interleaved
            ours.append(rlox_steps_per_s(name, buf, 256, 256, s)[0])
            job = dict(mode="throughput", algo=name, npz=str(path), steps=s, hidden=256, batch_size=256, seed=0,
                       low=[-1.0] * act_dim, high=[1.0] * act_dim)
            theirs.append(run_d3rlpy(py, job)["steps_per_s"])
        row = dict(algo=name, steps=s, rlox=float(np.median(ours)), d3rlpy=float(np.median(theirs)))
        row["ratio"] = row["rlox"] / row["d3rlpy"]
        print(f"throughput {name}: rlox {row['rlox']:.1f} steps/s, d3rlpy {row['d3rlpy']:.1f} steps/s, "
              f"x{row['ratio']:.2f}", flush=True)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------- learning
def make_datasets(sac_steps: int) -> dict[str, Path]:
    from rlox.offline import collect_dataset, pendulum_swingup_policy

    out = {}
    expert = CACHE / "pendulum-expert.npz"
    if not expert.exists():
        collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 20_000, noise=0.1, seed=0, path=expert)
    out["expert"] = expert
    medium = CACHE / f"pendulum-medium-sac{sac_steps}.npz"
    if not medium.exists():
        from rlox.algorithms import SAC

        sac = SAC("Pendulum-v1", seed=0)
        sac.train(total_timesteps=sac_steps)
        collect_dataset(sac, "Pendulum-v1", 20_000, noise=0.1, seed=1, path=medium)
    out["medium"] = medium
    return out


def iqm(x) -> float:
    x = np.sort(np.asarray(x, dtype=np.float64))
    k = len(x) // 4
    return float(x[k:len(x) - k].mean()) if len(x) > 2 * k else float(x.mean())


def learning(py: Path, steps: int, seeds: int, episodes: int, sac_steps: int, hidden: int, algos,
             on_row=None) -> list[dict]:
    from rlox.evaluation import evaluate_policy
    from rlox.offline import OfflineDatasetBuffer, normalized_score

    rows = []
    for level, path in make_datasets(sac_steps).items():
        buf = OfflineDatasetBuffer.from_npz(path)
        behaviour = normalized_score("Pendulum-v1", buf.stats()["mean_return"])
        for name in algos:
            ours, theirs = [], []
            for seed in range(seeds):
                _, algo = rlox_steps_per_s(name, buf, hidden, 256, steps, seed=seed, env="Pendulum-v1")
                r = evaluate_policy(algo, "Pendulum-v1", n_episodes=episodes, seed=1000)["mean_reward"]
                ours.append(normalized_score("Pendulum-v1", r))
                job = dict(mode="learn", algo=name, npz=str(path), steps=steps, hidden=hidden, batch_size=256,
                           seed=seed, env="Pendulum-v1", episodes=episodes, low=[-2.0], high=[2.0])
                theirs.append(normalized_score("Pendulum-v1", float(np.mean(run_d3rlpy(py, job)["returns"]))))
            row = dict(dataset=f"pendulum-{level}", algo=name, behaviour=behaviour, seeds=seeds, steps=steps,
                       rlox=iqm(ours), rlox_range=[min(ours), max(ours)], d3rlpy=iqm(theirs),
                       d3rlpy_range=[min(theirs), max(theirs)])
            print(f"learning pendulum-{level} {name}: rlox {row['rlox']:.1f} [{min(ours):.1f}, {max(ours):.1f}], "
                  f"d3rlpy {row['d3rlpy']:.1f} [{min(theirs):.1f}, {max(theirs):.1f}], behaviour {behaviour:.1f}",
                  flush=True)
            rows.append(row)
            if on_row is not None:   # the table so far, so a long run that is stopped keeps its rows
                on_row(rows)
    return rows


def write(tp: list[dict], ln: list[dict], args) -> None:
    RESULTS.mkdir(exist_ok=True)
    load = os.getloadavg()
    lines = ["# Offline RL: rlox vs d3rlpy 2.8.1", "",
             f"Last command: `{' '.join(['benchmarks/bench_offline.py', *sys.argv[1:]])}` on {platform.processor() or platform.machine()}, "
             f"{os.cpu_count()} cores, load average {load[0]:.1f} at the end (a shared, loaded machine: ratios are "
             f"more telling than absolute figures). One torch thread on both sides; torch {torch.__version__}.", ""]
    if tp:
        lines += ["## Throughput (gradient steps/s; obs 17, act 6, batch 256, hidden 256-256, sampling included)", "",
                  "| algorithm | steps | rlox | d3rlpy | rlox / d3rlpy |", "|---|---|---|---|---|"]
        lines += [f"| {r['algo']} | {r['steps']} | {r['rlox']:.1f} | {r['d3rlpy']:.1f} | {r['ratio']:.2f}x |" for r in tp]
        lines += ["", f"Median of {args.rounds} interleaved rounds each."]
    if ln:
        lines += ["", f"## Learning: D4RL normalised score on Pendulum-v1 (IQM over seeds [min, max]; "
                  f"{ln[0]['steps']} gradient steps, hidden {args.hidden}-{args.hidden}, batch 256, "
                  f"{args.episodes} evaluation episodes per seed)", "",
                  "| dataset | algorithm | seeds | behaviour | rlox | d3rlpy |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['dataset']} | {r['algo']} | {r['seeds']} | {r['behaviour']:.1f} | {r['rlox']:.1f} "
                  f"[{r['rlox_range'][0]:.1f}, {r['rlox_range'][1]:.1f}] | {r['d3rlpy']:.1f} "
                  f"[{r['d3rlpy_range'][0]:.1f}, {r['d3rlpy_range'][1]:.1f}] |" for r in ln]
        lines += ["", "Scores: 0 = uniform random actions, 100 = the swing-up controller (rlox.offline.REFERENCE_SCORES); "
                  f"medium = rlox SAC after {args.sac_steps} env steps, both datasets 20k transitions with 0.1 action noise."]
    lines += ["", "Notes: d3rlpy runs as a subprocess of its own venv on the same .npz, interleaved with rlox; "
              "its CQL is Lagrangian by default, so rlox's CQL runs with target_action_gap=10 to do the same work. "
              "On one thread every algorithm is dominated by the 256x256 matrix products, which both sides run "
              "through the same torch build, so the ratios measure each library's overhead around them. "
              "With few seeds and short budgets the learning rows are single draws, not the IQM of 5 seeds "
              "over a full budget; rerun with --seeds 5 --learn-steps 20000 on an idle machine for that."]
    (RESULTS / "offline.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "offline.json").write_text(json.dumps({
        "throughput": tp, "learning": ln, "argv": sys.argv[1:], "rounds": args.rounds,
        "learning_args": {"hidden": args.hidden, "episodes": args.episodes, "sac_steps": args.sac_steps}}, indent=1))
    print(f"wrote {RESULTS / 'offline.md'}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=("throughput", "learning"))
    p.add_argument("--steps", type=int, default=500, help="gradient steps per throughput run (CQL: a fifth)")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--learn-steps", type=int, default=3000)
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--episodes", type=int, default=5)
    p.add_argument("--hidden", type=int, default=64, help="hidden width of the learning runs")
    p.add_argument("--sac-steps", type=int, default=3000, help="env steps of the SAC agent behind 'medium'")
    p.add_argument("--algos", default=",".join(ALGOS))
    args = p.parse_args()
    torch.set_num_threads(1)
    CACHE.mkdir(parents=True, exist_ok=True)
    py = ensure_venv()
    tp = throughput(py, args.steps, args.rounds) if args.only in (None, "throughput") else []
    previous = RESULTS / "offline.json"
    old_tp = json.loads(previous.read_text()).get("throughput", []) if previous.exists() else []
    ln = (learning(py, args.learn_steps, args.seeds, args.episodes, args.sac_steps, args.hidden,
                   args.algos.split(","), on_row=lambda rows: write(tp or old_tp, rows, args))
          if args.only in (None, "learning") else [])
    if args.only is not None and previous.exists():   # keep the other section of the last full run
        old = json.loads(previous.read_text())
        tp, ln = tp or old.get("throughput", []), ln or old.get("learning", [])
        if args.only == "throughput":
            args.hidden, args.episodes, args.sac_steps = (old.get("learning_args") or {}).get("hidden", args.hidden), \
                (old.get("learning_args") or {}).get("episodes", args.episodes), \
                (old.get("learning_args") or {}).get("sac_steps", args.sac_steps)
        else:
            args.rounds = old.get("rounds", args.rounds)
    write(tp, ln, args)


if __name__ == "__main__":
    main()
