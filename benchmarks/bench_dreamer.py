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

The peer, sheeprl's DreamerV3 (``sheeprl==0.8.4``), pins its own lightning/hydra/opencv
versions, so it runs in a venv this script creates on first use under
``benchmarks/.cache/sheeprl-venv`` (git-ignored; torch 2.13.0 CPU, under ``constraints.txt``), one
subprocess per run (``_sheeprl_worker.py``): the same env steps, model size (rlox's ``--size``
preset), batch, sequence length, train ratio (as sheeprl's ``replay_ratio`` = gradient steps per
env step), learning rates and evaluation (the episodes of ``evaluate`` below). Per seed it runs
sheeprl, then rlox, so both see the same machine load. ``--no-peer`` skips it; where the venv
cannot be built the table says why. The return rows put sheeprl's return beside rlox's (ratio of
costs, |sheeprl| / |rlox|, when both are negative); the wall rows compare the train wall time to
the budget (ratio: sheeprl / rlox, > 1 when rlox is faster).

    .venv/bin/python benchmarks/bench_dreamer.py --steps 20000 --seeds 1 [--train-ratio 512] [--size XS]
    .venv/bin/python benchmarks/bench_dreamer.py --keep --first-seed 1 --only peer --train-ratio 96 \
        --set model_lr=3e-4 --set actor_lr=8e-5 --set critic_lr=8e-5         # sheeprl seed 1 only
    .venv/bin/python benchmarks/bench_dreamer.py --time-updates 5 --compare-with /path/to/old/checkout
    .venv/bin/python benchmarks/bench_dreamer.py --time-updates 3 --pixels --compare-with /path/to/old/checkout
    RLOX_BENCH_QUICK=1 .venv/bin/python benchmarks/bench_dreamer.py     # 5k steps, train_ratio 64
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, RESULTS, Row, Table, header, venv_python  # noqa: E402

SHEEPRL = "sheeprl==0.8.4"
SHEEPRL_VENV = Path(__file__).resolve().parent / ".cache" / "sheeprl-venv"
SHEEPRL_WORKER = Path(__file__).resolve().parent / "_sheeprl_worker.py"


def evaluate(algo, n_episodes: int = 10, seed: int = 10_000) -> float:
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

    # preset=False: the run's config is the defaults plus ``config`` (what the table's label and
    # the sheeprl job say), not the Pendulum preset under it.
    trainer = Trainer("dreamer", env="Pendulum-v1", seed=seed, config=config, preset=False)
    run = {"seed": seed, "curve": [], "wall": 0.0, "date": time.strftime("%Y-%m-%d")}
    t0, done, train_time = time.perf_counter(), 0, 0.0
    while done < steps:
        chunk = min(eval_every, steps - done)
        t = time.perf_counter()
        trainer.train(total_timesteps=chunk)
        train_time += time.perf_counter() - t
        done += chunk
        # (steps, return, train wall, load average at the evaluation)
        run["curve"].append((done, evaluate(trainer.algo, n_episodes), train_time, os.getloadavg()[0]))
        run["wall"] = time.perf_counter() - t0
        print(f"  seed {seed}: {done} steps, return {run['curve'][-1][1]:.1f}, train {train_time:.0f} s, "
              f"{trainer.algo.updates} updates", flush=True)
        if on_eval is not None:
            on_eval(run)
    return run


def sheeprl_job(seed: int, steps: int, eval_every: int, config: dict, n_episodes: int) -> dict:
    """The worker's job: rlox's config (its size preset resolved) in the terms of sheeprl's."""
    from rlox.algorithms.dreamer_v3 import MODEL_SIZES
    from rlox.config import DreamerV3Config

    cfg = DreamerV3Config(**config)
    given = (cfg.deter, cfg.hidden, cfg.layers, cfg.groups, cfg.classes)
    deter, hidden, layers, groups, classes = (g if g is not None else b for g, b in zip(given, MODEL_SIZES[cfg.size]))
    if cfg.n_envs != 1:
        raise SystemExit(f"the sheeprl peer runs 1 env; got n_envs={cfg.n_envs} (drop it or pass --no-peer)")
    return dict(env="Pendulum-v1", seed=seed, steps=steps, eval_every=eval_every, eval_episodes=n_episodes,
                deter=deter, hidden=hidden, layers=layers, groups=groups, classes=classes,
                batch_size=cfg.batch_size, batch_length=cfg.batch_length, train_ratio=cfg.train_ratio,
                learning_starts=cfg.learning_starts, model_lr=cfg.model_lr, actor_lr=cfg.actor_lr,
                critic_lr=cfg.critic_lr)


def run_sheeprl(py: Path, seed: int, steps: int, eval_every: int, config: dict, n_episodes: int,
                on_eval=None) -> dict:
    """One sheeprl run in its venv (``_sheeprl_worker.py``): its curve as rlox's (steps, return,
    train wall), read from the worker's ``EVAL`` lines as they come; its log goes to
    ``benchmarks/.cache/sheeprl_seed<seed>.log``."""
    job = sheeprl_job(seed, steps, eval_every, config, n_episodes)
    log = SHEEPRL_VENV.parent / f"sheeprl_seed{seed}.log"
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    run = {"seed": seed, "curve": [], "wall": 0.0, "updates": 0, "date": time.strftime("%Y-%m-%d")}
    t0 = time.perf_counter()
    with open(log, "w") as err, tempfile.TemporaryDirectory(prefix="rlox-sheeprl-") as tmp:
        proc = subprocess.Popen([str(py), str(SHEEPRL_WORKER), json.dumps(job)], stdout=subprocess.PIPE,
                                stderr=err, text=True, env=env, cwd=tmp)
        for line in proc.stdout:
            if line.startswith("EVAL "):
                point = json.loads(line[5:])
                run["curve"].append((point["steps"], point["return"], point["train_wall"], os.getloadavg()[0]))
                run["updates"], run["wall"] = point["updates"], time.perf_counter() - t0
                print(f"  sheeprl seed {seed}: {point['steps']} steps, return {point['return']:.1f}, "
                      f"train {point['train_wall']:.0f} s, {point['updates']} updates", flush=True)
                if on_eval is not None:
                    on_eval(run)
            elif line.startswith("RESULT "):
                run["replay_ratio"] = json.loads(line[7:])["replay_ratio"]
        rc = proc.wait()
    if rc != 0:
        tail = log.read_text().strip().splitlines()[-5:]
        print(f"  sheeprl seed {seed} failed (exit {rc}, log {log}):\n    " + "\n    ".join(tail), flush=True)
    return run


class _RandomFrames(gym.Env):
    """64x64 RGB uint8 frames of noise, one continuous action, episodes of 500 steps: an image env
    that costs nothing to step, for timing the convolutional model's update (its cost does not
    depend on what the frames show). DMC's software-rendered frames take 60-90 ms each here."""

    observation_space = gym.spaces.Box(0, 255, (3, 64, 64), np.uint8)
    action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.np_random.integers(0, 256, (3, 64, 64), dtype=np.uint8), {}

    def step(self, action):
        self.t += 1
        frame = self.np_random.integers(0, 256, (3, 64, 64), dtype=np.uint8)
        return frame, float(self.np_random.random()), False, self.t >= 500, {}


def time_updates(n: int, size: str, pixels: bool = False) -> float:
    """CPU seconds per gradient update of the ``size`` model on Pendulum, or with ``pixels`` on
    ``_RandomFrames`` (the CNN encoder and decoder); replay of 1000 random steps, 2 warm-up
    updates first."""
    from rlox.algorithms.dreamer_v3 import DreamerV3

    env = _RandomFrames() if pixels else "Pendulum-v1"
    algo = DreamerV3(env, seed=0, size=size, learning_starts=1000, train_ratio=1e-9)
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
    cmd = [sys.executable, __file__, "--time-updates", str(args.time_updates), "--size", args.size,
           *(["--pixels"] if args.pixels else [])]
    times: dict[str, list[float]] = {"old": [], "new": []}
    for r in range(args.rounds):
        for key, path in (("old", args.compare_with), ("new", here)):
            out = subprocess.run(cmd, env=dict(env, PYTHONPATH=path), capture_output=True, text=True, check=True)
            times[key].append(float(out.stdout.strip().splitlines()[-1].split()[0]))
            print(f"  round {r}: {key} {times[key][-1]:.3f} cpu-s/update", flush=True)
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    load = os.getloadavg()[0]
    table = Table("dreamer_update", "DreamerV3 gradient update: CPU seconds per update (rlox, before/after)")
    what = "64x64 RGB frames (CNN depth 16)" if args.pixels else "Pendulum"
    case = f"{args.size} update on {what} (B=16, T=64, H=15), median of {args.rounds} interleaved rounds"
    # rows of the other observation kind (or size) stay in the table
    saved = RESULTS / "dreamer_update.json"
    table.rows = [Row(r["case"], r["rlox"], r["peer"], r["peer_name"], r["goal"], r["unit"], r["note"])
                  for r in (json.loads(saved.read_text()) if saved.exists() else [])
                  if r["case"].split(" (B=")[0] != case.split(" (B=")[0]]
    table.add(case,
              rlox=new, peer=old, peer_name=f"rlox at {args.compare_with}", unit="time",
              note=f"old {[round(t, 3) for t in times['old']]}, new {[round(t, 3) for t in times['new']]}; "
                   f"{args.time_updates} updates a round, 1 torch thread, load average {load:.1f} on "
                   f"{os.cpu_count()} cores")
    table.finish()


def _dates(runs: list[dict], seeds) -> str:
    """The day each seed's run was made (``date``, kept since 2026-12-07), seed by seed."""
    by_seed = {r["seed"]: r.get("date", "not kept") for r in runs}
    return str([by_seed.get(s, "not kept") for s in seeds])


def _loads(points: dict) -> str:
    """The load averages saved with curve points (runs saved before they were kept have none)."""
    return str([round(p[3], 1) if len(p) > 3 else "not kept" for p in points.values()])


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
    ap.add_argument("--pixels", action="store_true",
                    help="with --time-updates: time the CNN model on 64x64 RGB frames instead of Pendulum")
    ap.add_argument("--compare-with", default=None, metavar="DIR",
                    help="with --time-updates: alternate with PYTHONPATH=DIR (another rlox checkout)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--first-seed", type=int, default=0, help="seeds run: first-seed .. first-seed + seeds - 1")
    ap.add_argument("--no-peer", action="store_true", help="skip sheeprl (no venv is built)")
    ap.add_argument("--only", choices=["both", "rlox", "peer"], default="both",
                    help="run only one side (with --keep, the other side's saved runs stay in the table)")
    ap.add_argument("--keep", action="store_true",
                    help="keep the table rows and saved curves of earlier runs with other settings")
    ap.add_argument("--report", action="store_true",
                    help="train nothing: rewrite the table from the saved runs of this config (all seeds, "
                         "e.g. after runs from two checkouts were merged into dreamer_runs.json)")
    args = ap.parse_args()
    args.keep = args.keep or args.report
    torch.set_num_threads(1)
    if args.time_updates:
        if args.compare_with:
            compare_updates(args)
        else:
            print(f"{time_updates(args.time_updates, args.size, args.pixels):.4f} cpu-s/update")
        return
    config = {"size": args.size, "train_ratio": args.train_ratio, **_parse_set(args.set)}
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    header(f"DreamerV3 Pendulum-v1: {args.steps} steps, seed(s) {seeds}, {config}")
    runs_file, table_file = RESULTS / "dreamer_runs.json", RESULTS / "dreamer.json"
    saved = json.loads(runs_file.read_text()) if args.keep and runs_file.exists() else []
    saved = [saved] if isinstance(saved, dict) else saved          # (the one-config format of before)
    same = [e for e in saved if e.get("config") == config]
    saved = [e for e in saved if e.get("config") != config]
    # --keep: the runs of this config with other seeds (or of the side not run now) stay.
    entry = {"config": config, "runs": [], "peer": SHEEPRL, "peer_runs": []}
    for e in same:
        for key in ("runs", "peer_runs"):
            runs_now = args.only in ("both", "rlox" if key == "runs" else "peer") and not (key == "peer_runs"
                                                                                        and args.no_peer)
            rerun = seeds if runs_now and not args.report else []
            entry[key] += [r for r in e.get(key, []) if r["seed"] not in rerun]
    kept = json.loads(table_file.read_text()) if args.keep and table_file.exists() else []
    py, why = None, "sheeprl not run (--no-peer)"
    if args.report:
        why = "sheeprl not run"
    elif not args.no_peer and args.only != "rlox":
        py, why = venv_python(SHEEPRL_VENV, ["torch==2.13.0", SHEEPRL], "import sheeprl, torch")
        why = why and f"sheeprl not run ({SHEEPRL} venv could not be built: {why})"
        if py is None:
            print(f"  {why}", flush=True)
    peer_name = f"sheeprl {SHEEPRL.split('==')[1]}"
    extra = "".join(f", {k} {v}" for k, v in config.items() if k not in ("size", "train_ratio"))
    label = f"{args.size}, train_ratio {args.train_ratio:g}{extra}"

    def write_table() -> None:
        table = Table("dreamer", "DreamerV3 on Pendulum-v1: return at a budget and wall time (rlox vs sheeprl)")
        ours, peers = entry["runs"], [r for r in entry["peer_runs"] if r["curve"]]
        budgets = sorted({p[0] for r in ours + peers for p in r["curve"]})
        for steps in budgets:
            mine = dict(sorted((r["seed"], p) for r in ours for p in r["curve"] if p[0] == steps))
            theirs = dict(sorted((r["seed"], p) for r in peers for p in r["curve"] if p[0] == steps))
            if not mine:
                continue
            note = (f"rlox seed(s) {sorted(mine)}: {[round(p[1], 1) for p in mine.values()]}, train wall "
                    f"{[round(p[2]) for p in mine.values()]} s (mean of {args.eval_episodes} deterministic episodes "
                    f"each, reset seeds 10000+)")
            note += (f"; sheeprl seed(s) {sorted(theirs)}: {[round(p[1], 1) for p in theirs.values()]}, train wall "
                     f"{[round(p[2]) for p in theirs.values()]} s" if theirs else f"; {why or 'sheeprl not run'}")
            peer = float(np.mean([p[1] for p in theirs.values()])) if theirs else None
            table.add(f"Pendulum return at {steps} steps ({label})", rlox=float(np.mean([p[1] for p in mine.values()])),
                      peer=peer, peer_name=peer_name if theirs else "", unit="return", note=note)
            if theirs:
                table.add(f"Train wall to {steps} steps ({label})", rlox=float(np.mean([p[2] for p in mine.values()])),
                          peer=float(np.mean([p[2] for p in theirs.values()])), peer_name=peer_name, goal=1.0,
                          note=f"1 torch thread each; load average at the evaluation: rlox {_loads(mine)}, "
                               f"sheeprl {_loads(theirs)} ({os.cpu_count()} cores); run dates: rlox "
                               f"{_dates(ours, mine)}, sheeprl {_dates(peers, theirs)} (walls from different "
                               f"days are not like for like: this shared machine's speed varies between days)")
        new_cases = {r.case for r in table.rows}
        # --keep: the rows of earlier runs with other settings stay in the table, before these.
        old = [Row(r["case"], r["rlox"], r["peer"], r["peer_name"], r["goal"], r["unit"], r["note"])
               for r in kept if r["case"] not in new_cases]
        table.rows[:0] = old
        table.finish()

    def save(key: str):
        def on_eval(run: dict) -> None:   # after every evaluation: a killed run keeps its curve and rows
            entry[key] = [r for r in entry[key] if r["seed"] != run["seed"]] + [run]
            runs_file.write_text(json.dumps(saved + [entry], indent=2))
            if entry["runs"]:
                write_table()
        return on_eval

    if args.report:
        if not entry["runs"]:
            raise SystemExit(f"no saved rlox runs of {config} in {runs_file}: run them first (without --report)")
        write_table()
        return
    for s in seeds:
        if py is not None:
            run_sheeprl(py, s, args.steps, args.eval_every, config, args.eval_episodes, save("peer_runs"))
            print(f"  load average {os.getloadavg()[0]:.1f}", flush=True)
        if args.only != "peer":
            run_rlox(s, args.steps, args.eval_every, config, args.eval_episodes, save("runs"))
            print(f"  load average {os.getloadavg()[0]:.1f}", flush=True)
    if entry["runs"]:
        write_table()


if __name__ == "__main__":
    main()
