"""SAC, TD3 and DQN side by side with Stable-Baselines3: learning (IQM + bootstrap CI) and throughput.

Learning: rlox with its presets (RL Baselines3 Zoo hyperparameters) and SB3 with the same
hyperparameters, several seeds each, scored by the mean return of 10 deterministic episodes
after training (``rlox.evaluation.evaluate_policy`` for both, reset seeds 10_000 + seed).
Goals (issue 7): SAC and TD3 Pendulum-v1 IQM >= -200 at 20k steps, DQN CartPole-v1 >= 475 at
100k, SAC MountainCarContinuous-v0 >= 90 at 50k. ``--mujoco``: SAC HalfCheetah-v5 at 100k, one
seed per library (long: about 15-30 minutes per run on 2 cores).

Each finished run is appended to ``benchmarks/results/offpolicy_runs.json`` and skipped when the
script runs again (``--fresh`` starts over), so the long learning part can be run in pieces.

Throughput: env steps per second of SAC Pendulum-v1 and DQN CartPole-v1 with their presets, rlox
vs SB3 on the same hyperparameters, both with one torch thread, interleaved in one process in
chunks so that the (shared, noisy) machine's load falls on both alike. Reported on wall time and
on process CPU time (the CPU-time ratio is the one load from other processes barely moves), and
against SB3 with two torch threads (its default on 2 cores). Goal: >= 1.5x SB3.

    .venv/bin/python benchmarks/bench_offpolicy.py                      # learning (resumable) + throughput
    .venv/bin/python benchmarks/bench_offpolicy.py --only throughput
    .venv/bin/python benchmarks/bench_offpolicy.py --only learning --cases sac:Pendulum-v1 --seeds 5
    .venv/bin/python benchmarks/bench_offpolicy.py --mujoco             # adds HalfCheetah-v5 (1 seed)
    .venv/bin/python benchmarks/bench_offpolicy.py --report             # the table from stored runs only

The last full throughput run's rows are kept in ``offpolicy_throughput.json`` and added (with
their date) to tables written without a throughput part.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, RESULTS, Table, header, store_run as _store_run  # noqa: E402

from rlox.evaluation import evaluate_policy, interquartile_mean, stratified_bootstrap_ci  # noqa: E402
from rlox.algorithms.off_policy import _cpu_has_fast_bf16  # noqa: E402
from rlox.presets import get_preset  # noqa: E402

# Finished runs; RLOX_BENCH_RUNS names another file for a second process running other cases at
# the same time (every offpolicy_runs*.json is read back).
RUNS = RESULTS / os.environ.get("RLOX_BENCH_RUNS", "offpolicy_runs.json")

# (algo, env) -> (budget, goal on the IQM or None)
LEARNING: dict[tuple[str, str], tuple[int, float | None]] = {
    ("sac", "Pendulum-v1"): (20_000, -200.0),
    ("td3", "Pendulum-v1"): (20_000, -200.0),
    ("dqn", "CartPole-v1"): (100_000, 475.0),
    ("sac", "MountainCarContinuous-v0"): (50_000, 90.0),
}
MUJOCO: dict[tuple[str, str], tuple[int, float | None]] = {("sac", "HalfCheetah-v5"): (100_000, None)}
# rlox-only variants: (algo, env, name) -> (budget, goal, config overrides); SB3 has no equivalent.
VARIANTS: dict[tuple[str, str, str], tuple[int, float | None, dict[str, Any]]] = {
    ("sac", "Pendulum-v1", "bfloat16"): (20_000, -200.0, {"precision": "bfloat16"}),
    ("td3", "Pendulum-v1", "bfloat16"): (20_000, -200.0, {"precision": "bfloat16"}),
}


# ---------------------------------------------------------------------- SB3 with rlox's hyperparameters
def sb3_model(algo: str, env_id: str, seed: int, cfg: dict[str, Any]):
    """An SB3 model with the hyperparameters rlox runs with: ``cfg`` (a preset) over the rlox
    config's defaults, every field translated to SB3's argument (so the two see the same values
    even where a preset is silent)."""
    import stable_baselines3 as sb3
    from stable_baselines3.common.noise import NormalActionNoise, OrnsteinUhlenbeckActionNoise

    from rlox.config import config_for

    c = config_for(algo)(**cfg)
    hidden = c.hidden
    net_arch = [hidden, hidden] if isinstance(hidden, int) else list(hidden)
    lr: Any = (lambda progress, x=c.learning_rate: x * progress) if c.anneal_lr else c.learning_rate
    common = dict(learning_rate=lr, buffer_size=c.buffer_size, learning_starts=c.learning_starts,
                  batch_size=c.batch_size, tau=c.tau, gamma=c.gamma, train_freq=c.train_freq,
                  gradient_steps=c.gradient_steps, seed=seed, verbose=0, device="cpu")
    if algo == "sac":
        ent: Any = ("auto" if c.ent_coef == 1.0 else f"auto_{c.ent_coef}") if c.auto_entropy else c.ent_coef
        return sb3.SAC("MlpPolicy", env_id, ent_coef=ent, target_update_interval=c.target_update_interval,
                       target_entropy="auto" if c.target_entropy is None else c.target_entropy,
                       use_sde=c.use_sde, sde_sample_freq=c.sde_sample_freq,
                       policy_kwargs=dict(net_arch=net_arch, log_std_init=c.log_std_init), **common)
    if algo == "td3":
        import gymnasium as gym

        act_dim = int(np.prod(gym.make(env_id).action_space.shape))
        sigma = c.exploration_noise * np.ones(act_dim)
        noise = (OrnsteinUhlenbeckActionNoise(np.zeros(act_dim), sigma) if c.noise_type == "ornstein-uhlenbeck"
                 else NormalActionNoise(np.zeros(act_dim), sigma))
        return sb3.TD3("MlpPolicy", env_id, action_noise=noise, policy_delay=c.policy_delay,
                       target_policy_noise=c.target_noise, target_noise_clip=c.noise_clip,
                       policy_kwargs=dict(net_arch=net_arch), **common)
    if c.double_dqn or c.dueling or c.prioritized:
        raise ValueError("SB3's DQN has no Double DQN, dueling heads or prioritized replay")
    return sb3.DQN("MlpPolicy", env_id, target_update_interval=c.target_update_interval,
                   exploration_fraction=c.exploration_fraction, exploration_initial_eps=c.exploration_initial_eps,
                   exploration_final_eps=c.exploration_final_eps, max_grad_norm=c.max_grad_norm, n_steps=c.n_step,
                   policy_kwargs=dict(net_arch=net_arch), **common)


def score(agent_predict, env_id: str, seed: int) -> float:
    return evaluate_policy(agent_predict, env_id, n_episodes=10, deterministic=True,
                           seed=10_000 + seed)["mean_reward"]


# ---------------------------------------------------------------------- learning runs (stored as they finish)
def load_runs() -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for path in sorted(RESULTS.glob("offpolicy_runs*.json")):
        runs += [r for r in json.loads(path.read_text()) if not any(_same(r, q) for q in runs)]
    return runs


def store_run(run: dict[str, Any]) -> None:
    _store_run(run, RUNS, _same)


def _same(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return (all(a[k] == b[k] for k in ("algo", "env", "lib", "seed", "steps"))
            and a.get("variant", "") == b.get("variant", ""))


def run_one(algo: str, env_id: str, lib: str, seed: int, steps: int, variant: str = "",
            overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    cfg = {**get_preset(algo, env_id), **(overrides or {})}
    t0 = time.perf_counter()
    if lib == "rlox":
        from rlox import Trainer

        trainer = Trainer(algo, env=env_id, seed=seed, config=cfg)
        trainer.train(total_timesteps=steps)
        dt = time.perf_counter() - t0
        value = score(lambda o: trainer.predict(o, deterministic=True), env_id, seed)
    else:
        model = sb3_model(algo, env_id, seed, cfg)
        model.learn(total_timesteps=steps)
        dt = time.perf_counter() - t0
        value = score(lambda o: model.predict(o, deterministic=True)[0], env_id, seed)
    return dict(algo=algo, env=env_id, lib=lib, seed=seed, steps=steps, variant=variant, score=float(value),
                seconds=dt, when=time.strftime("%Y-%m-%d %H:%M"))


def learning(cases: dict[tuple, tuple], n_seeds: int, quick: bool, run_missing: bool = True) -> list[tuple]:
    """Run (or read back) the learning cases: keys (algo, env) for rlox and SB3, or (algo, env,
    variant) for rlox-only variants whose values carry config overrides."""
    header(f"learning: presets (RL Zoo hyperparameters), {n_seeds} seeds, IQM of 10-episode deterministic returns")
    rows = []
    for key, value in cases.items():
        algo, env_id = key[0], key[1]
        variant = key[2] if len(key) > 2 else ""
        budget, goal = value[0], value[1]
        overrides = value[2] if len(value) > 2 else {}
        libs = ("rlox",) if variant else ("rlox", "sb3")
        steps = budget // 4 if quick else budget
        done = load_runs()
        for seed in range(n_seeds):
            for lib in libs:
                probe = dict(algo=algo, env=env_id, lib=lib, seed=seed, steps=steps, variant=variant)
                if any(_same(r, probe) for r in done) or not run_missing:
                    continue
                run = run_one(algo, env_id, lib, seed, steps, variant, overrides)
                store_run(run)
                print(f"    {algo} {env_id} {variant or ''} {lib} seed {seed}: {run['score']:9.1f} "
                      f"({run['seconds']:.0f}s)", flush=True)
        runs = [r for r in load_runs() if r["algo"] == algo and r["env"] == env_id and r["steps"] == steps
                and r.get("variant", "") == variant and r["seed"] < n_seeds]
        ours = [r["score"] for r in runs if r["lib"] == "rlox"]
        theirs = [r["score"] for r in runs if r["lib"] == "sb3"]
        if ours:
            rows.append((algo, env_id + (f" ({variant})" if variant else ""), steps, goal, ours, theirs,
                         sum(r["seconds"] for r in runs if r["lib"] == "rlox"),
                         sum(r["seconds"] for r in runs if r["lib"] == "sb3")))
    return rows


def learning_table(table: Table, rows: list[tuple], quick: bool) -> None:
    for algo, env_id, steps, goal, ours, theirs, t_ours, t_theirs in rows:
        iqm_r = interquartile_mean(ours)
        ci_r = stratified_bootstrap_ci(ours, n_bootstrap=2000) if len(ours) > 1 else (iqm_r, iqm_r)
        parts = [f"{len(ours)} seeds: " + ", ".join(f"{s:.1f}" for s in ours), f"rlox CI [{ci_r[0]:.1f}, {ci_r[1]:.1f}]"]
        if theirs:
            iqm_s = interquartile_mean(theirs)
            ci_s = stratified_bootstrap_ci(theirs, n_bootstrap=2000) if len(theirs) > 1 else (iqm_s, iqm_s)
            parts.append(f"SB3 IQM {iqm_s:.1f} CI [{ci_s[0]:.1f}, {ci_s[1]:.1f}] ({len(theirs)} seeds: "
                         + ", ".join(f"{s:.1f}" for s in theirs) + ")")
            parts.append(f">= SB3: {'yes' if iqm_r >= iqm_s else 'NO'}")
        if goal is not None and not quick:
            parts.append(f"goal >= {goal:g}: {'yes' if iqm_r >= goal else 'NO'}")
        parts.append(f"wall rlox {t_ours:.0f}s" + (f" vs SB3 {t_theirs:.0f}s" if theirs else ""))
        table.add(f"{algo.upper()} {env_id} {steps // 1000}k IQM", rlox=iqm_r, unit="return", note="; ".join(parts))


# ---------------------------------------------------------------------- throughput (interleaved chunks)
def _clock() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def throughput_pair(algo: str, env_id: str, steps: int, chunk: int, seed: int, sb3_threads: int,
                    rlox_overrides: dict[str, Any] | None = None) -> dict[str, float]:
    """Train rlox and SB3 side by side for ``steps`` env steps each, alternating every ``chunk``
    steps. SB3 runs one uninterrupted ``learn`` call; a callback of it runs the next rlox chunk
    (rlox resumes its own run, so its schedules are those of one run too). Returns seconds of
    wall and CPU time spent in each library."""
    import torch
    from stable_baselines3.common.callbacks import BaseCallback

    from rlox import Trainer
    from rlox.callbacks import Callback

    cfg = get_preset(algo, env_id)
    boundary = {"at": chunk}

    class Pause(Callback):
        def on_update(self, metrics):
            return self.num_timesteps < boundary["at"]

    trainer = Trainer(algo, env=env_id, seed=seed, config={**cfg, "steps_per_iteration": chunk, **(rlox_overrides or {})},
                      callbacks=[Pause()])
    model = sb3_model(algo, env_id, seed, cfg)
    spent = {"rlox_wall": 0.0, "rlox_cpu": 0.0}

    def rlox_chunk() -> None:
        w, c = _clock()
        if trainer.algo.num_timesteps == 0:
            trainer.algo.train(steps)
        elif trainer.algo.num_timesteps < steps:
            trainer.algo.train(resume=True)
        w2, c2 = _clock()
        spent["rlox_wall"] += w2 - w
        spent["rlox_cpu"] += c2 - c
        boundary["at"] += chunk

    class Interleave(BaseCallback):
        def _on_step(self) -> bool:
            if self.num_timesteps % chunk == 0:
                rlox_chunk()
            return True

    torch.set_num_threads(sb3_threads)
    w, c = _clock()
    model.learn(total_timesteps=steps, callback=Interleave())
    w2, c2 = _clock()
    torch.set_num_threads(1)
    while trainer.algo.num_timesteps < steps:      # (only if SB3's last callback came before the end)
        rlox_chunk()
    spent["sb3_wall"] = (w2 - w) - spent["rlox_wall"]
    spent["sb3_cpu"] = (c2 - c) - spent["rlox_cpu"]
    assert trainer.algo.num_timesteps == steps and model.num_timesteps == steps
    return spent


THROUGHPUT = RESULTS / "offpolicy_throughput.json"   # the last throughput rows, for --report


def stored_throughput(table: Table) -> None:
    """Add the rows of the last throughput run (when this run measures none)."""
    if THROUGHPUT.is_file():
        for row in json.loads(THROUGHPUT.read_text()):
            row["note"] += f" (measured {row.pop('when')})"
            table.add(**row)


def throughput(table: Table, quick: bool, rounds: int) -> None:
    import torch

    torch.set_num_threads(1)
    stored: list[dict[str, Any]] = []
    cases = {("sac", "Pendulum-v1"): (1_500 if quick else 4_000, 500),
             ("dqn", "CartPole-v1"): (8_192 if quick else 30_720, 2_048)}
    for (algo, env_id), (steps, chunk) in cases.items():
        settings = [(1, {}), (2, {})]
        if algo == "sac" and _cpu_has_fast_bf16():   # (without bfloat16 matmuls rlox warns and runs slower)
            settings.append((1, {"precision": "bfloat16"}))
        for threads, overrides in settings:
            what = "rlox bfloat16" if overrides else "rlox"
            header(f"throughput: {algo.upper()} {env_id} preset, {steps} steps, {what} (1 thread) vs SB3 {threads} "
                   f"thread(s), interleaved every {chunk} steps, {rounds} rounds")
            wall, cpu, rates = [], [], []
            for rnd in range(rounds):
                s = throughput_pair(algo, env_id, steps, chunk, seed=rnd, sb3_threads=threads, rlox_overrides=overrides)
                wall.append(s["sb3_wall"] / s["rlox_wall"])
                cpu.append(s["sb3_cpu"] / s["rlox_cpu"])
                rates.append((steps / s["rlox_wall"], steps / s["sb3_wall"]))
                print(f"    round {rnd}: rlox {rates[-1][0]:,.0f} steps/s, SB3 {rates[-1][1]:,.0f} steps/s (wall); "
                      f"ratio wall {wall[-1]:.2f}x, CPU time {cpu[-1]:.2f}x", flush=True)
            note = (f"wall-time ratio {min(wall):.2f}-{max(wall):.2f}x over {rounds} rounds; CPU-time ratio "
                    f"{min(cpu):.2f}-{max(cpu):.2f}x" + ("" if threads == 1 else " (SB3's CPU time counts both threads)"))
            r_rlox = float(np.median([r[0] for r in rates]))
            r_sb3 = float(np.median([r[1] for r in rates]))
            label = f"{algo.upper()} {env_id} steps/s{' (rlox bfloat16)' if overrides else ''}, SB3 {threads} thread"
            row = dict(case=label + ("s" if threads > 1 else ""), rlox=r_rlox, peer=r_sb3,
                       peer_name=f"SB3 {algo.upper()}", goal=1.5, unit="steps/s", note=note)
            table.add(**row)
            if not quick:
                stored.append({**row, "when": time.strftime("%Y-%m-%d %H:%M")})
                tmp = THROUGHPUT.with_suffix(".json.tmp")
                tmp.write_text(json.dumps(stored, indent=1))
                os.replace(tmp, THROUGHPUT)


# ---------------------------------------------------------------------- main
def _parse_cases(items: list[str] | None) -> dict[tuple[str, str], tuple[int, float | None]]:
    if not items:
        return dict(LEARNING)
    out = {}
    for item in items:
        algo, env_id = item.split(":", 1)
        key = (algo, env_id)
        out[key] = LEARNING.get(key) or MUJOCO.get(key) or (50_000, None)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a quarter of the budgets, 2 seeds, short throughput")
    parser.add_argument("--only", choices=["learning", "throughput"], help="run one part")
    parser.add_argument("--seeds", type=int, help="seeds per case (default 5, quick 2)")
    parser.add_argument("--cases", nargs="*", help="learning cases as algo:env (default: the four goal cases)")
    parser.add_argument("--mujoco", action="store_true", help="also SAC HalfCheetah-v5 at 100k, 1 seed per library")
    parser.add_argument("--rounds", type=int, default=2, help="throughput rounds (default 2)")
    parser.add_argument("--variants-only", action="store_true", help="learning: only the rlox-only variants "
                        "(bfloat16), e.g. in a second process")
    parser.add_argument("--report", action="store_true", help="write the table from stored runs, run nothing")
    parser.add_argument("--fresh", action="store_true", help="forget stored learning runs first")
    args = parser.parse_args()
    quick = args.quick or QUICK
    import torch

    torch.set_num_threads(1)
    if args.fresh:
        for path in RESULTS.glob("offpolicy_runs*.json"):
            path.unlink()
    table = Table("offpolicy", "SAC, TD3, DQN: rlox vs Stable-Baselines3 (learning and throughput)")
    if args.only in (None, "throughput") and not args.report:
        throughput(table, quick, args.rounds)
    else:
        stored_throughput(table)
    if args.only in (None, "learning") or args.report:
        seeds = args.seeds or (2 if quick else 5)
        rows = [] if args.variants_only else learning(_parse_cases(args.cases), seeds, quick,
                                                       run_missing=not args.report)
        if not args.cases:
            rows += learning(VARIANTS, seeds, quick, run_missing=not args.report)
        if args.mujoco or args.report:
            rows += learning(MUJOCO, 1, quick, run_missing=args.mujoco and not args.report)
        learning_table(table, rows, quick)
    table.finish()


if __name__ == "__main__":
    main()
