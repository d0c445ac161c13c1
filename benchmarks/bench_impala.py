"""IMPALA: rlox (local and Ray backends) vs RLlib's IMPALA, side by side in one run.

    .venv/bin/python benchmarks/bench_impala.py                  # throughput + learning
    .venv/bin/python benchmarks/bench_impala.py --only throughput --seconds 20
    .venv/bin/python benchmarks/bench_impala.py --no-rllib       # rlox rows only
    # the learning rows at the guide's budget, RLlib first (slow: it runs on its own)
    .venv/bin/python benchmarks/bench_impala.py --only rllib-learning --rllib-steps 1000000
    .venv/bin/python benchmarks/bench_impala.py --only learning --steps 1000000 --seeds 5 --no-ppo

Peer: RLlib's IMPALA (``ray[rllib]``, new API stack). RLlib pins gymnasium 1.2.2, so it runs
in a venv this script creates under ``benchmarks/.cache/rllib-venv`` (git-ignored; it sees this
interpreter's packages through a ``.pth`` file, so torch and ray are reused and pip adds only
what is missing, gymnasium 1.2.2 among them) and is driven through a subprocess, while rlox runs
here. Both use CartPole-v1 with the same actors (RLlib: env runners), envs per actor, unroll
length (rollout_fragment_length) and learner batch (train_batch_size_per_learner).

Throughput: env steps per second *consumed by the learner* (trained on), measured between the
first and the last update after a warm-up (actor start-up excluded for both). Learning: the mean
of 10 deterministic (greedy) episodes at the step budget, IQM over seeds, for rlox's
``IMPALAConfig`` defaults, RLlib's IMPALA at the same sizes (its learning settings otherwise)
and, unless ``--no-ppo``, rlox PPO. Tables: ``benchmarks/results/impala.md`` / ``.json``.
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
    t_script = time.perf_counter()
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
    if args.get("evaluate"):
        # The same deterministic check as rlox's row: 10 greedy episodes (explore=False) at the end.
        cfg = cfg.evaluation(evaluation_interval=None, evaluation_num_env_runners=1, evaluation_duration=10,
                             evaluation_duration_unit="episodes",
                             evaluation_config=IMPALAConfig.overrides(explore=False))
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
    last = t0
    while True:
        res = algo.train()
        now = time.perf_counter()
        steps = trained(res)
        sampled = find(res, "num_env_steps_sampled_lifetime") or 0
        if now - last >= 60:
            last = now
            print(f"PROGRESS {sampled:.0f} steps, {now - t_start:.0f} s, return {find(res, 'episode_return_mean')}",
                  file=sys.stderr, flush=True)
        if args["seconds"] and now - t0 >= args["seconds"]:
            break
        if args["steps"] and sampled >= args["steps"]:
            break
        if args.get("max_seconds") and now - t_script >= args["max_seconds"]:
            break                                        # the wall-time cap: report the budget reached
    out.update(trained_sps=(steps - s0) / (now - t0), trained=steps, counter=counter["name"],
               sampled=float(find(res, "num_env_steps_sampled_lifetime") or 0),
               episode_return_mean=find(res, "episode_return_mean"), wall_s=now - t_script)
    if args.get("evaluate"):
        ev = algo.evaluate()
        out["eval_return_mean"] = find(ev, "episode_return_mean")
    print("RESULT " + json.dumps(out), flush=True)
    algo.stop()
    ray.shutdown()
''')


def ensure_rllib_venv() -> Path | None:
    """The RLlib venv's python (created on first use); None when it cannot be built."""
    py = RLLIB_VENV / "bin" / "python"
    if py.exists() and subprocess.run([str(py), "-c", "import ray.rllib, torch"], capture_output=True).returncode == 0:
        return py
    print(f"creating {RLLIB_VENV} (ray[rllib]=={RAY_VERSION}; what this interpreter lacks)", flush=True)
    CACHE.mkdir(parents=True, exist_ok=True)
    base = getattr(sys, "_base_executable", sys.executable)
    if subprocess.run([base, "-m", "venv", str(RLLIB_VENV)]).returncode != 0:
        return None
    # This interpreter's site-packages (torch, ray) after the venv's own: pip installs only what
    # is missing or pinned differently (gymnasium) into the venv.
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True).stdout.strip()
    if site:
        parents = [p for p in sys.path if p.endswith("site-packages")]
        (Path(site) / "zz_parent_env.pth").write_text("".join(p + "\n" for p in parents))
    constraints = Path(__file__).resolve().parent.parent / "constraints.txt"
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", f"ray[rllib]=={RAY_VERSION}", "torch",
                        "-c", str(constraints)])
    return py if r.returncode == 0 else None


def run_rllib(py: Path, *, actors: int, envs: int, unroll: int, batch: int, seconds: float = 0, steps: int = 0,
              seed: int = 0, timeout: float = 900, max_seconds: float = 0, evaluate: bool = False,
              log: Path | None = None) -> dict | None:
    """One RLlib run in its venv; ``max_seconds`` caps its wall time (it then reports the steps it
    reached), ``log`` receives its progress lines."""
    args = dict(actors=actors, envs=envs, unroll=unroll, batch=batch, seconds=seconds, steps=steps, seed=seed,
                max_seconds=max_seconds, evaluate=evaluate)
    if max_seconds:
        timeout = max(timeout, max_seconds + 900)
    elif steps:
        # A learning run without a wall-time cap: allow it ~100 sampled steps/s (RLlib samples
        # 450-1,400 steps/s here) plus set-up and the final evaluation.
        timeout = max(timeout, steps / 100 + 900)
    with tempfile.TemporaryDirectory(prefix="rlox-rllib-", dir="/tmp") as tmp:
        env = dict(os.environ, RAY_TMPDIR=tmp, PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1")
        script = Path(tmp) / "run_rllib.py"
        script.write_text(RLLIB_SCRIPT)
        err = open(log, "w") if log is not None else subprocess.PIPE
        try:
            proc = subprocess.run([str(py), str(script), json.dumps(args)], stdout=subprocess.PIPE, stderr=err,
                                  text=True, env=env, timeout=timeout, cwd=tmp)
        except subprocess.TimeoutExpired:
            print("  RLlib run timed out", flush=True)
            return None
        finally:
            if log is not None:
                err.close()
    if log is not None:
        proc.stderr = log.read_text()[-3000:]
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


RLLIB_LEARNING = RESULTS / "impala_rllib_learning.json"


def rllib_learning(py: Path, steps: int, seeds: int, max_seconds: float) -> list[dict]:
    """RLlib's IMPALA on CartPole-v1 with the sizes of rlox's ``IMPALAConfig`` defaults (env
    runners = actors, envs per runner, rollout fragment = unroll, learner batch; RLlib's own
    learning settings otherwise), ``steps`` sampled steps or ``max_seconds`` of wall time per seed,
    whichever comes first; each run ends with 10 greedy episodes. Saved to
    ``impala_rllib_learning.json`` for ``learning`` (RLlib samples a few hundred steps/s here)."""
    from rlox.config import IMPALAConfig

    d = IMPALAConfig()
    header(f"RLlib learning: CartPole-v1, {steps:,} env steps (cap {max_seconds:g} s), {seeds} seed(s), "
           f"{d.n_actors} runners x {d.envs_per_actor} envs, fragment {d.unroll_length}, batch {d.batch_size}")
    runs = []
    for seed in range(seeds):
        log = CACHE / f"impala_rllib_seed{seed}.log"
        CACHE.mkdir(parents=True, exist_ok=True)
        res = run_rllib(py, actors=d.n_actors, envs=d.envs_per_actor, unroll=d.unroll_length, batch=d.batch_size,
                        steps=steps, seed=seed, evaluate=True, max_seconds=max_seconds, log=log)
        print(f"  RLlib IMPALA seed {seed}: {res}", flush=True)
        if res:
            runs.append(res | {"seed": seed, "budget": steps, "max_seconds": max_seconds, "batch": d.batch_size})
    RLLIB_LEARNING.write_text(json.dumps(runs, indent=2))
    return runs


RLOX_LEARNING = RESULTS / "impala_rlox_learning.json"


def learning(table: Table, steps: int, seeds: int, ppo_too: bool, saved: bool = False) -> None:
    """rlox's learning rows (``saved``: reuse the per-seed returns of the last run at this budget,
    e.g. to add RLlib's row once its slower run has finished)."""
    header(f"learning: CartPole-v1, {steps:,} env steps, IMPALA defaults, {seeds} seed(s); "
           f"mean of 10 deterministic episodes per seed")
    import torch

    from rlox import PPOTrainer
    from rlox.algorithms.impala import IMPALA
    from rlox.evaluation import evaluate_policy

    torch.set_num_threads(1)

    returns, ppo = [], []
    if saved:
        last = json.loads(RLOX_LEARNING.read_text()) if RLOX_LEARNING.exists() else {}
        if (last.get("steps"), last.get("seeds")) != (steps, seeds):
            raise SystemExit(f"--saved: {RLOX_LEARNING.name} holds no run at {steps:,} steps x {seeds} seeds")
        returns, ppo = last["impala"], last["ppo"]
        print(f"  rlox IMPALA per seed (saved run): {returns}", flush=True)
    for seed in range(0 if saved else seeds):
        algo = IMPALA("CartPole-v1", seed=seed)                      # the defaults (local backend)
        algo.train(total_timesteps=steps)
        returns.append(evaluate_policy(algo, "CartPole-v1", n_episodes=10, seed=1000 + seed)["mean_reward"])
        print(f"  rlox IMPALA seed {seed}: {returns[-1]:.1f} (training return {algo.mean_reward:.1f})", flush=True)
        if ppo_too:
            trainer = PPOTrainer(env="CartPole-v1", seed=seed)
            trainer.train(total_timesteps=steps)
            ppo.append(evaluate_policy(trainer, "CartPole-v1", n_episodes=10, seed=1000 + seed)["mean_reward"])
            print(f"  rlox PPO    seed {seed}: {ppo[-1]:.1f}", flush=True)
    if not saved:
        RLOX_LEARNING.write_text(json.dumps(dict(steps=steps, seeds=seeds, impala=returns, ppo=ppo), indent=2))
    peer, peer_name, note = None, "RLlib IMPALA", ""
    runs = json.loads(RLLIB_LEARNING.read_text()) if RLLIB_LEARNING.exists() else []
    if runs:
        # RLlib's own runs (``--only rllib-learning``), at the budget they reached.
        evals = [r.get("eval_return_mean") or 0.0 for r in runs]
        reached = min(int(r["sampled"]) for r in runs)
        peer = iqm(evals) if len(runs) > 1 else evals[0]
        peer_name = f"RLlib IMPALA @ {reached:,} steps, {len(runs)} seed(s)"
        note = ("; RLlib per seed (greedy 10 episodes / its training return): " +
                ", ".join(f"{r.get('eval_return_mean') or 0:.0f} / {r['episode_return_mean']:.0f} at {r['sampled']:,.0f} "
                          f"steps (learner batch {r.get('batch', '?')}"
                          + (f", stopped by the {r['max_seconds']:g} s cap" if r["sampled"] < r["budget"] else "")
                          + ")" for r in runs))
    table.add(f"IMPALA return at {steps:,} steps (IQM of {seeds})", rlox=iqm(returns), peer=peer,
              peer_name=peer_name, unit="return",
              note="per seed: " + ", ".join(f"{r:.0f}" for r in returns) + note)
    if ppo:
        table.add(f"IMPALA vs rlox PPO at {steps:,} steps (IQM)", rlox=iqm(returns), peer=iqm(ppo),
                  peer_name="rlox PPO", unit="return", note="PPO per seed: " + ", ".join(f"{r:.0f}" for r in ppo))


def keep_previous(table: Table, prefix: str) -> None:
    """Rows of the last table whose case does not start with ``prefix`` (a partial run keeps them)."""
    old = RESULTS / "impala.json"
    if not old.exists():
        return
    from _harness import Row

    for r in json.loads(old.read_text()):
        if not r["case"].startswith(prefix):
            table.rows.append(Row(r["case"], r["rlox"], r["peer"], r["peer_name"], r["goal"], r["unit"], r["note"]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["throughput", "learning", "rllib-learning"],
                   help="throughput or learning rows (the other rows of the last table are kept); "
                        "rllib-learning: RLlib's learning runs only, saved for a later --only learning")
    p.add_argument("--seconds", type=float, default=5.0 if QUICK else 20.0, help="timed seconds per throughput row")
    p.add_argument("--steps", type=int, default=200_000 if QUICK else 1_000_000, help="learning budget (rlox)")
    p.add_argument("--rllib-steps", type=int, default=50_000 if QUICK else 1_000_000, help="learning budget (RLlib)")
    p.add_argument("--rllib-max-seconds", type=float, default=0,
                   help="wall-time cap per RLlib learning seed (0: none); the row states the steps reached")
    p.add_argument("--rllib-seeds", type=int, default=1)
    p.add_argument("--seeds", type=int, default=2 if QUICK else 5)
    p.add_argument("--no-ppo", action="store_true", help="learning: skip the rlox PPO row")
    p.add_argument("--saved", action="store_true",
                   help="learning: reuse rlox's per-seed returns from the last run at this budget")
    p.add_argument("--no-rllib", action="store_true")
    args = p.parse_args()
    py = None if args.no_rllib else ensure_rllib_venv()
    if args.only == "rllib-learning":
        if py is None:
            raise SystemExit("--only rllib-learning needs the RLlib venv (drop --no-rllib)")
        rllib_learning(py, args.rllib_steps, args.rllib_seeds, args.rllib_max_seconds)
        return
    table = Table("impala", "IMPALA: rlox (local / Ray backends) vs RLlib IMPALA, CartPole-v1")
    if args.only in (None, "throughput"):
        throughput(table, py, args.seconds)
    else:
        keep_previous(table, "IMPALA ")
    if args.only in (None, "learning"):
        if args.only is None and py is not None:
            rllib_learning(py, args.rllib_steps, args.rllib_seeds, args.rllib_max_seconds)
        learning(table, args.steps, args.seeds, not args.no_ppo, args.saved)
    else:
        keep_previous(table, ("local", "ray"))
    table.finish()
    (RESULTS / "impala_args.json").write_text(json.dumps(vars(args) | {"machine_load": os.getloadavg()}, indent=2))


if __name__ == "__main__":
    main()
