"""Multi-agent benchmark: rlox MAPPO vs BenchMARL's MAPPO (TorchRL underneath) on MPE spread,
and the native MPE vector env vs mpe2's parallel env.

    .venv/bin/python benchmarks/bench_marl.py                       # everything
    .venv/bin/python benchmarks/bench_marl.py --only envs           # env throughput only
    .venv/bin/python benchmarks/bench_marl.py --frames 12000 --seeds 5
    .venv/bin/python benchmarks/bench_marl.py --frames 12000 --seed-start 3 --seeds 2 --append
                                            # add seeds 3, 4 to the stored runs, table from all of them

BenchMARL 1.5.2 cannot run MPE beside rlox: its TorchRL wrapper imports ``pettingzoo.mpe``,
which pettingzoo >= 1.25 moved out to mpe2 (and mpe2 needs pettingzoo >= 1.25). So this script
creates a venv of its own for the peer under ``benchmarks/.cache/benchmarl-venv`` (git-ignored:
benchmarl 1.5.2, pettingzoo[mpe] 1.24.3, the CPU torch of constraints.txt) and runs it as a
subprocess, one seed after the other beside rlox's, in this one invocation. Both train on
simple_spread with N=3, 25 cycles, local_ratio 0.5, discrete actions, for the same number of
env frames (one frame = one joint step of all agents), on CPU with one torch thread; BenchMARL
with its own MAPPO and experiment defaults except discrete actions and spread's 25 cycles (its
task file uses 100). Returns are mean per-agent episode returns: BenchMARL's ``mean_return`` of
its last collection (mean over agents), rlox's mean of its last 100 training episodes, and for
rlox also a deterministic evaluation over 100 episodes.

Writes benchmarks/results/marl.md and marl.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
CACHE = HERE / ".cache"
PEER_VENV = CACHE / "benchmarl-venv"
RESULTS = HERE / "results"
PEER_PACKAGES = ["benchmarl==1.5.2", "pettingzoo[mpe]==1.24.3"]


# ============================================================================ env throughput
def bench_envs(n_envs: int = 64, seconds: float = 2.0, rounds: int = 3) -> list[dict]:
    """Env steps per second (one step = one joint action of every agent), random actions,
    contestants interleaved round by round."""
    import rlox
    from mpe2 import simple_spread_v3
    from rlox.multiagent.envs import MultiAgentVecEnv

    rlox.set_num_threads(1)
    rng = np.random.default_rng(0)
    acts = rng.integers(0, 5, size=(256, n_envs, 3))

    def native(n):
        env = MultiAgentVecEnv("spread_v3", n, 3, seed=0)
        env.reset()
        a = acts[:, :n]
        k, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for i in range(256):
                env.step(a[i])
            k += 256
        return k * n / (time.perf_counter() - t0)

    def mpe2_envs(n):
        envs = [simple_spread_v3.parallel_env(N=3, max_cycles=25) for _ in range(n)]
        for i, e in enumerate(envs):
            e.reset(seed=i)
        names = envs[0].possible_agents
        k, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            a = acts[k % 256]
            for i, e in enumerate(envs):
                e.step({ag: int(a[i % n_envs, j]) for j, ag in enumerate(names)})
                if not e.agents:
                    e.reset()
            k += 1
        return k * n / (time.perf_counter() - t0)

    samples: dict[str, list[float]] = {"native1": [], "mpe2_1": [], "native": [], "mpe2": []}
    for _ in range(rounds):
        samples["native1"].append(native(1))
        samples["mpe2_1"].append(mpe2_envs(1))
        samples["native"].append(native(n_envs))
        samples["mpe2"].append(mpe2_envs(n_envs))
    med = {k: float(np.median(v)) for k, v in samples.items()}
    return [
        {"case": "spread N=3, 1 env", "rlox": med["native1"], "peer": med["mpe2_1"], "peer_name": "mpe2 parallel env",
         "ratio": med["native1"] / med["mpe2_1"]},
        {"case": f"spread N=3, {n_envs} envs", "rlox": med["native"], "peer": med["mpe2"],
         "peer_name": f"{n_envs} mpe2 parallel envs (Python loop)", "ratio": med["native"] / med["mpe2"], "goal": 100},
        {"case": f"spread N=3: rlox {n_envs} envs vs one mpe2 env", "rlox": med["native"], "peer": med["mpe2_1"],
         "peer_name": "mpe2 parallel env, 1 env", "ratio": med["native"] / med["mpe2_1"]},
    ]


# ============================================================================ training
def run_rlox(frames: int, seed: int) -> dict:
    import torch

    from rlox import Trainer

    torch.set_num_threads(1)
    tr = Trainer("mappo", env="spread_v3", n_agents=3, seed=seed)
    t0 = time.perf_counter()
    m = tr.train(total_timesteps=frames)
    wall = time.perf_counter() - t0
    ev = tr.algo.evaluate(n_episodes=100, deterministic=True, seed=10_000 + seed)
    return {"frames": int(m["timesteps"]), "seconds": wall, "fps": m["timesteps"] / wall,
            "train_return": float(m["mean_reward"]), "eval_return": ev["mean_reward"]}


PEER_SCRIPT = textwrap.dedent('''
    import json, sys, time
    import torch
    torch.set_num_threads(1)
    from benchmarl.algorithms import MappoConfig
    from benchmarl.environments import PettingZooTask
    from benchmarl.experiment import Experiment, ExperimentConfig
    from benchmarl.models.mlp import MlpConfig
    frames, seed = int(sys.argv[1]), int(sys.argv[2])
    task = PettingZooTask.SIMPLE_SPREAD.get_from_yaml()
    task.config.update({"N": 3, "max_cycles": 25, "local_ratio": 0.5, "continuous_actions": False})
    cfg = ExperimentConfig.get_from_yaml()
    cfg.sampling_device = cfg.train_device = cfg.buffer_device = "cpu"
    cfg.prefer_continuous_actions = False          # discrete actions, as rlox's runs
    cfg.max_n_frames = frames
    cfg.on_policy_collected_frames_per_batch = min(cfg.on_policy_collected_frames_per_batch, frames)
    cfg.on_policy_n_envs_per_worker = min(cfg.on_policy_n_envs_per_worker, 10)
    cfg.evaluation = False
    cfg.loggers = []
    cfg.create_json = False
    cfg.checkpoint_interval = 0
    cfg.render = False
    exp = Experiment(task=task, algorithm_config=MappoConfig.get_from_yaml(), model_config=MlpConfig.get_from_yaml(),
                     critic_model_config=MlpConfig.get_from_yaml(), seed=seed, config=cfg)
    t0 = time.perf_counter()
    exp.run()
    wall = time.perf_counter() - t0
    print("RESULT " + json.dumps({"frames": exp.total_frames, "seconds": wall,
                                  "mean_return": float(exp.mean_return)}))
''')


def setup_peer() -> Path:
    """Create the peer's venv (once) and return its python."""
    py = PEER_VENV / "bin" / "python"
    marker = PEER_VENV / ".ready"
    if marker.exists():
        return py
    CACHE.mkdir(parents=True, exist_ok=True)
    if not py.exists():
        subprocess.run([sys.executable, "-m", "venv", str(PEER_VENV)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), *PEER_PACKAGES],
                   check=True)
    marker.write_text(" ".join(PEER_PACKAGES))
    return py


def run_peer(py: Path, frames: int, seed: int, timeout: float) -> dict:
    script = CACHE / "benchmarl_mappo.py"
    script.write_text(PEER_SCRIPT)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=CACHE) as run_dir:     # BenchMARL writes its run folder in the cwd
        proc = subprocess.run([str(py), str(script), str(frames), str(seed)], capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=run_dir)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"BenchMARL run failed (exit {proc.returncode}): {proc.stderr[-2000:]}")
    r = json.loads(lines[-1][len("RESULT "):])
    r["wall_with_startup"] = time.perf_counter() - t0
    r["fps"] = r["frames"] / r["seconds"]
    r["train_return"] = r["mean_return"]
    return r


def iqm_ci(x: list[float]) -> tuple[float, float, float]:
    from rlox.evaluation import interquartile_mean, stratified_bootstrap_ci

    arr = np.asarray(x, dtype=np.float64)
    lo, hi = stratified_bootstrap_ci(arr, n_bootstrap=2000, seed=0) if arr.size > 1 else (arr[0], arr[0])
    return interquartile_mean(arr), float(lo), float(hi)


RUNS = RESULTS / "marl_runs.json"     # every finished training run, written as it finishes


def _store_runs(frames: int, ours: list, theirs: list, peer_err: str | None, note: str | None = None) -> None:
    RESULTS.mkdir(exist_ok=True)
    old = json.loads(RUNS.read_text()) if RUNS.exists() else {}
    new = {"envs": old.get("envs", []), "frames": frames, "rlox": ours, "benchmarl": theirs, "peer_error": peer_err}
    if note or old.get("note"):
        new["note"] = note or old["note"]
    RUNS.write_text(json.dumps(new, indent=1))


def _stored_for_append(frames: int, seeds: range) -> tuple[list, list, str | None]:
    """The stored runs that ``--append`` extends; refuses a different budget or a seed run twice."""
    if not RUNS.exists():
        raise SystemExit(f"--append: no stored runs at {RUNS}; run without --append first")
    old = json.loads(RUNS.read_text())
    if old.get("frames") != frames:
        raise SystemExit(f"--append: stored runs are at --frames {old.get('frames')}, got --frames {frames}; "
                         "append only runs of the same budget")
    ours, theirs = list(old.get("rlox", [])), list(old.get("benchmarl", []))
    for runs in (ours, theirs):
        for i, r in enumerate(runs):
            r.setdefault("seed", i)          # runs stored before seeds were recorded ran seeds 0, 1, ... in order
    done = {r["seed"] for r in ours} | {r["seed"] for r in theirs}
    twice = sorted(done & set(seeds))
    if twice:
        raise SystemExit(f"--append: seeds {twice} are already stored in {RUNS}; pick --seed-start "
                         f"{max(done) + 1}")
    return ours, theirs, old.get("peer_error")


# ============================================================================ report
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", choices=["envs", "train"], default=None)
    ap.add_argument("--frames", type=int, default=12_000, help="env frames per training run (both libraries)")
    quick = os.environ.get("RLOX_BENCH_QUICK", "0") not in ("", "0")
    ap.add_argument("--seeds", type=int, default=1 if quick else 5, help="seeds per library (RLOX_BENCH_QUICK: 1)")
    ap.add_argument("--seed-start", type=int, default=0, help="first seed (runs seeds seed-start .. +seeds-1)")
    ap.add_argument("--append", action="store_true",
                    help="add the new runs to the stored ones (benchmarks/results/marl_runs.json, same --frames) "
                         "and make the table from all of them")
    ap.add_argument("--note", default=None, help="a line about the runs, stored with them and printed in the table")
    ap.add_argument("--peer-timeout", type=float, default=900.0, help="seconds per BenchMARL run")
    ap.add_argument("--setup-peer", action="store_true", help="only create the BenchMARL venv")
    ap.add_argument("--report", action="store_true",
                    help="training table from the stored runs (benchmarks/results/marl_runs.json), no new runs")
    args = ap.parse_args()
    if args.setup_peer:
        print(setup_peer())
        return
    out: dict = {"machine": f"{os.cpu_count()} CPUs, loaded (shared with other jobs)", "frames": args.frames}
    lines = ["# Multi-agent: rlox MAPPO vs BenchMARL, native MPE vs mpe2", ""]
    stored = json.loads(RUNS.read_text()) if args.report else None
    if args.append and (args.report or args.only == "envs"):
        raise SystemExit("--append adds new training runs: it cannot go with --report or --only envs")
    if args.only in (None, "envs"):
        if args.append:          # the env table comes from the stored runs; only training runs are added
            rows = json.loads(RUNS.read_text()).get("envs", []) if RUNS.exists() else []
        else:
            rows = stored.get("envs", []) if stored is not None else bench_envs()
        if stored is None and args.only is None and not args.append:
            RESULTS.mkdir(exist_ok=True)
            RUNS.write_text(json.dumps({"envs": rows}, indent=1))
        out["envs"] = rows
        lines += ["## Env throughput (env steps/s, one step = a joint action of 3 agents, random actions, "
                  "1 thread, median of 3 interleaved rounds)", "",
                  "| case | rlox native | peer | peer steps/s | ratio | goal |", "|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['case']} | {r['rlox']:,.0f} | {r['peer_name']} | {r['peer']:,.0f} | "
                         f"{r['ratio']:.1f}x | {str(r.get('goal', '')) + 'x' if r.get('goal') else ''} |")
            print(lines[-1], flush=True)
        lines.append("")
    if args.only in (None, "train"):
        if stored is not None:
            args.frames, ours, theirs, peer_err = (stored["frames"], stored["rlox"], stored["benchmarl"],
                                                   stored["peer_error"])
            args.seeds = len(ours)
        else:
            seeds = range(args.seed_start, args.seed_start + args.seeds)
            ours, theirs, peer_err = [], [], None
            if args.append:          # checked before the peer's venv is made: fails fast on a wrong budget/seed
                ours, theirs, peer_err = _stored_for_append(args.frames, seeds)
            peer_py = None
            try:
                peer_py = setup_peer()
            except Exception as exc:  # noqa: BLE001 - reported in the table
                peer_err = f"BenchMARL venv could not be created: {exc}"
            for seed in seeds:
                ours.append({"seed": seed, **run_rlox(args.frames, seed)})
                print("rlox", seed, ours[-1], flush=True)
                if peer_py is not None and peer_err is None:
                    try:
                        theirs.append({"seed": seed, **run_peer(peer_py, args.frames, seed, args.peer_timeout)})
                        print("benchmarl", seed, theirs[-1], flush=True)
                    except Exception as exc:  # noqa: BLE001
                        peer_err = str(exc)[-600:]
                _store_runs(args.frames, ours, theirs, peer_err, args.note)
            args.seeds = len(ours)
            stored = json.loads(RUNS.read_text())
        out["rlox"], out["benchmarl"], out["peer_error"] = ours, theirs, peer_err
        lines += [f"## Training: MAPPO on simple_spread (N=3, 25 cycles), {args.frames:,} frames, "
                  f"{args.seeds} seeds, CPU, 1 torch thread", "",
                  "Returns are mean per-agent episode returns (random policy -27.3, hand heuristic -12.7); "
                  "IQM over seeds with a 95% stratified bootstrap CI.", "",
                  "| library | frames/s (median) | train return IQM [CI] | eval return IQM [CI] |", "|---|---|---|---|"]
        for name, runs, ev in (("rlox MAPPO (Trainer defaults, native env)", ours, True),
                               ("BenchMARL 1.5.2 MAPPO (defaults)", theirs, False)):
            if not runs:
                continue
            fps = float(np.median([r["fps"] for r in runs]))
            tr = iqm_ci([r["train_return"] for r in runs])
            evs = iqm_ci([r["eval_return"] for r in runs]) if ev else None
            lines.append(f"| {name} | {fps:,.0f} | {tr[0]:.2f} [{tr[1]:.2f}, {tr[2]:.2f}] | "
                         + (f"{evs[0]:.2f} [{evs[1]:.2f}, {evs[2]:.2f}] |" if evs else "- |"))
        if ours and theirs:
            ratio = np.median([r["fps"] for r in ours]) / np.median([r["fps"] for r in theirs])
            lines += ["", f"Training throughput ratio rlox / BenchMARL: {ratio:.1f}x (goal 30x)."]
            out["fps_ratio"] = float(ratio)
            by_seed = {r.get("seed", i): r["fps"] for i, r in enumerate(theirs)}
            paired = [r["fps"] / by_seed[r.get("seed", i)] for i, r in enumerate(ours)
                      if r.get("seed", i) in by_seed]
            if paired:      # each rlox run against the BenchMARL run of its seed, run next to it (same load)
                lines.append(f"Paired by seed (each rlox run / the BenchMARL run beside it): median "
                             f"{float(np.median(paired)):.1f}x, range {min(paired):.1f}x-{max(paired):.1f}x.")
                out["fps_ratio_paired_median"] = float(np.median(paired))
        if peer_err:
            lines += ["", f"Peer not run: {peer_err}"]
        lines += ["", "The machine (2 cores) was shared with other jobs: absolute speeds are noisy, the runs "
                  "alternate rlox / BenchMARL seed by seed. Frames/s is training wall time only (BenchMARL's "
                  "process start-up and rlox's evaluation excluded)."]
        if stored is not None and stored.get("note"):
            lines += ["", f"Runs: {stored['note']}."]
        lines.append("")
    RESULTS.mkdir(exist_ok=True)
    suffix = "" if args.only is None else f"_{args.only}"
    (RESULTS / f"marl{suffix}.md").write_text("\n".join(lines))
    (RESULTS / f"marl{suffix}.json").write_text(json.dumps(out, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
