"""IMPALA: rlox (local and Ray backends) vs RLlib's IMPALA, side by side in one run.

    .venv/bin/python benchmarks/bench_impala.py                  # throughput + learning
    .venv/bin/python benchmarks/bench_impala.py --only throughput --seconds 20
    .venv/bin/python benchmarks/bench_impala.py --no-rllib       # rlox rows only

Peer: RLlib's IMPALA (``ray[rllib]``, new API stack). RLlib pins gymnasium 1.2.2, so it runs
in a venv this script creates under ``benchmarks/.cache/rllib-venv`` (git-ignored; ray[rllib]
and torch from the package registry) and is driven through a subprocess, while rlox runs here.
Both use CartPole-v1 with the same actors (RLlib: env runners), envs per actor, unroll length
(rollout_fragment_length) and learner batch (train_batch_size_per_learner).

Throughput: env steps per second *consumed by the learner* (trained on), measured between the
first and the last update after a warm-up (actor start-up excluded for both). Learning: mean
training return at the step budget (rlox: IQM over seeds), beside RLlib's and rlox PPO's.
Tables: ``benchmarks/results/impala.md`` / ``.json``.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, RESULTS, Table, header  # noqa: E402

CACHE = Path(__file__).resolve().parent / ".cache"
RLLIB_VENV = CACHE / "rllib-venv"
RAY_VERSION = "2.60.0"

RLLIB_SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    args = json.loads(sys.argv[1])
    import ray
    from ray.rllib.algorithms.impala import IMPALAConfig
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    cfg = (IMPALAConfig().environment("CartPole-v1")
           .env_runners(num_env_runners=args["actors"], num_envs_per_env_runner=args["envs"],
                        rollout_fragment_length=args["unroll"],
                        num_cpus_per_env_runner=min(1.0, max(0.1, (os.cpu_count() - 1) / args["actors"])))
           .learners(num_learners=0)
           .training(train_batch_size_per_learner=args["batch"])
           .reporting(min_time_s_per_iteration=1)
           .debugging(seed=args["seed"]))
    algo = cfg.build_algo()

    def find(d, key):
        if isinstance(d, dict):
            if key in d and not isinstance(d[key], dict):
                return d[key]
            for v in d.values():
                r = find(v, key)
                if r is not None:
                    return r
        return None

    counter = {"name": "trained"}

    def trained(res):
        for k in ("num_env_steps_trained_lifetime", "num_module_steps_trained_lifetime"):
            v = find(res, k)
            if v:
                return float(v)
        # Not reported by this RLlib: its sampled steps, at least what its learner consumed.
        counter["name"] = "sampled"
        return float(find(res, "num_env_steps_sampled_lifetime") or 0)

    t_start = time.perf_counter()
    res = algo.train()                                   # warm-up: runners up and the learner training
    while trained(res) == 0 and time.perf_counter() - t_start < 600:
        res = algo.train()
    res = algo.train()
    t0, s0 = time.perf_counter(), trained(res)
    out = {"warmup_s": t0 - t_start}
    while True:
        res = algo.train()
        now = time.perf_counter()
        steps = trained(res)
        if args["seconds"] and now - t0 >= args["seconds"]:
            break
        if args["steps"] and find(res, "num_env_steps_sampled_lifetime") >= args["steps"]:
            break
    out.update(trained_sps=(steps - s0) / (now - t0), trained=steps, counter=counter["name"],
               sampled=float(find(res, "num_env_steps_sampled_lifetime") or 0),
               episode_return_mean=find(res, "episode_return_mean"))
    print("RESULT " + json.dumps(out), flush=True)
    algo.stop()
    ray.shutdown()
''')


def ensure_rllib_venv() -> Path | None:
    """The RLlib venv's python (created on first use); None when it cannot be built."""
    py = RLLIB_VENV / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import ray.rllib, torch"], capture_output=True).returncode == 0:
        return py
    print(f"creating {RLLIB_VENV} (ray[rllib]=={RAY_VERSION}, torch; a few minutes once)", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    if subprocess.run([base, "-m", "venv", str(RLLIB_VENV)]).returncode != 0:
        return None
    constraints = Path(__file__).resolve().parent.parent / "constraints.txt"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", f"ray[rllib]=={RAY_VERSION}", "torch",
                        "-c", str(constraints)])
    return py if r.returncode == 0 else None


def run_rllib(py: Path, *, actors: int, envs: int, unroll: int, batch: int, seconds: float = 0, steps: int = 0,
              seed: int = 0, timeout: float = 900) -> dict | None:
    args = dict(actors=actors, envs=envs, unroll=unroll, batch=batch, seconds=seconds, steps=steps, seed=seed)
    with tempfile.TemporaryDirectory(prefix="rlox-rllib-", dir="/tmp") as tmp:
        env = dict(os.environ, RAY_TMPDIR=tmp, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
        script = Path(tmp) / "run_rllib.py"
        script.write_text(RLLIB_SCRIPT)
        try:
            proc = subprocess.run([str(py), str(script), json.dumps(args)], capture_output=True, text=True,
                                  env=env, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            print("  RLlib run timed out", flush=True)
            return None
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    print("  RLlib run failed:\n" + (proc.stderr or proc.stdout)[-3000:], flush=True)
    return None


class _Rate:
    """Logger: (time, timesteps) at every update, for the learner's consumed steps/s."""

    def __init__(self):
        self.points: list[tuple[float, int]] = []

    def on_train_step(self, step, metrics):
        self.points.append((time.perf_counter(), int(step)))

    def sps(self, skip: int = 3) -> float:
        pts = self.points[skip:] if len(self.points) > skip + 2 else self.points
        (t0, s0), (t1, s1) = pts[0], pts[-1]
        return (s1 - s0) / max(t1 - t0, 1e-9)


def run_rlox(*, backend: str, actors: int, envs: int, unroll: int, batch: int, seconds: float, seed: int = 0,
             **extra) -> tuple[float, dict]:
    import torch

    from rlox.algorithms.impala import IMPALA
    from rlox.callbacks import Callback

    torch.set_num_threads(1)
    rate = _Rate()

    class Stop(Callback):
        def on_update(self, metrics):
            return not (len(rate.points) > 1 and time.perf_counter() - rate.points[0][0] >= seconds)

    algo = IMPALA("CartPole-v1", seed=seed, backend=backend, n_actors=actors, envs_per_actor=envs,
                  unroll_length=unroll, batch_size=batch, logger=rate, callbacks=[Stop()], **extra)
    m = algo.train(total_timesteps=10**9)
    return rate.sps(), m


def iqm(x: list[float]) -> float:
    x = np.sort(np.asarray(x, dtype=float))
    n = len(x)
    lo, hi = int(np.floor(n * 0.25)), int(np.ceil(n * 0.75))
    return float(x[lo:hi].mean()) if hi > lo else float(x.mean())


def throughput(table: Table, py: Path | None, seconds: float) -> None:
    header("throughput: env steps/s consumed by the learner, CartPole-v1")
    unroll = 50
    for actors, envs in ((1, 1), (2, 1), (2, 8)):
        batch = unroll * envs * actors * 2 if envs > 1 else 500
        batch -= batch % (unroll * envs)
        local, _ = run_rlox(backend="local", actors=actors, envs=envs, unroll=unroll, batch=batch, seconds=seconds)
        peer, note = None, f"unroll {unroll}, batch {batch}"
        if py is not None:
            res = run_rllib(py, actors=actors, envs=envs, unroll=unroll, batch=batch, seconds=seconds)
            peer = res["trained_sps"] if res else None
            if res and res.get("counter") == "sampled":
                note += "; RLlib: its sampled steps/s (no trained counter reported), >= what its learner consumed"
        table.add(f"local, {actors} actor(s) x {envs} env(s)", rlox=local, peer=peer, peer_name="RLlib IMPALA",
                  goal=10, unit="steps/s", note=note)
        if actors == 2:
            ray_sps, _ = run_rlox(backend="ray", actors=actors, envs=envs, unroll=unroll, batch=batch,
                                  seconds=seconds)
            table.add(f"ray, {actors} actor(s) x {envs} env(s)", rlox=ray_sps, peer=peer,
                      peer_name="RLlib IMPALA", goal=10, unit="steps/s", note=note + "; rlox on a local Ray instance")


def learning(table: Table, py: Path | None, steps: int, seeds: int, rllib_steps: int) -> None:
    header(f"learning: CartPole-v1, {steps:,} env steps, IMPALA defaults, {seeds} seed(s); "
           f"rlox: mean of 10 deterministic episodes per seed, RLlib: its training episode_return_mean")
    import torch

    from rlox import PPOTrainer
    from rlox.algorithms.impala import IMPALA
    from rlox.evaluation import evaluate_policy

    torch.set_num_threads(1)

    returns, ppo = [], []
    for seed in range(seeds):
        algo = IMPALA("CartPole-v1", seed=seed)                      # the defaults (local backend)
        algo.train(total_timesteps=steps)
        returns.append(evaluate_policy(algo, "CartPole-v1", n_episodes=10, seed=1000 + seed)["mean_reward"])
        print(f"  rlox IMPALA seed {seed}: {returns[-1]:.1f} (training return {algo.mean_reward:.1f})", flush=True)
        trainer = PPOTrainer(env="CartPole-v1", seed=seed)
        trainer.train(total_timesteps=steps)
        ppo.append(evaluate_policy(trainer, "CartPole-v1", n_episodes=10, seed=1000 + seed)["mean_reward"])
        print(f"  rlox PPO    seed {seed}: {ppo[-1]:.1f}", flush=True)
    peer = None
    if py is not None:
        res = run_rllib(py, actors=8, envs=4, unroll=32, batch=2048, steps=rllib_steps)
        peer = res and res.get("episode_return_mean")
        print(f"  RLlib IMPALA ({rllib_steps:,} steps): {peer}", flush=True)
    table.add(f"IMPALA return at {steps:,} steps (IQM of {seeds})", rlox=iqm(returns), peer=peer,
              peer_name=f"RLlib IMPALA @ {rllib_steps:,}", unit="return",
              note="per seed: " + ", ".join(f"{r:.0f}" for r in returns))
    table.add(f"IMPALA vs rlox PPO at {steps:,} steps (IQM)", rlox=iqm(returns), peer=iqm(ppo),
              peer_name="rlox PPO", unit="return", note="PPO per seed: " + ", ".join(f"{r:.0f}" for r in ppo))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["throughput", "learning"])
    p.add_argument("--seconds", type=float, default=5.0 if QUICK else 20.0, help="timed seconds per throughput row")
    p.add_argument("--steps", type=int, default=200_000 if QUICK else 1_000_000, help="learning budget (rlox)")
    p.add_argument("--rllib-steps", type=int, default=50_000 if QUICK else 100_000, help="learning budget (RLlib)")
    p.add_argument("--seeds", type=int, default=2 if QUICK else 5)
    p.add_argument("--no-rllib", action="store_true")
    args = p.parse_args()
    py = None if args.no_rllib else ensure_rllib_venv()
    table = Table("impala", "IMPALA: rlox (local / Ray backends) vs RLlib IMPALA, CartPole-v1")
    if args.only in (None, "throughput"):
        throughput(table, py, args.seconds)
    if args.only in (None, "learning"):
        learning(table, py, args.steps, args.seeds, args.rllib_steps)
    table.finish()
    (RESULTS / "impala_args.json").write_text(json.dumps(vars(args) | {"machine_load": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
