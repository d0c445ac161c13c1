"""Hindsight Experience Replay: rlox vs Stable-Baselines3, side by side.

    .venv/bin/python benchmarks/bench_her.py [--n-bits 8] [--timesteps 5000] [--seeds 0]

1. Sampling speed: both HER buffers hold the same bit-flipping transitions (``--fill``); time
   ``sample(256)`` (future strategy, k = 4) of rlox's ``HerReplayBuffer`` (Cython ring + NumPy
   relabelling) and SB3's ``HerReplayBuffer`` (``sample`` returns torch tensors, as SB3's
   algorithms consume them). Goal: rlox >= 5x faster.
2. Success rate at the same budget: DQN + HER (future, k = 4) on ``BitFlippingEnv(n_bits)`` with
   the same hyperparameters in both libraries, evaluated greedily on 100 episodes. Goal: rlox's
   success rate >= SB3's.

Writes ``benchmarks/results/her.md`` and ``her.json``. Needs the bench extra (stable-baselines3).
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
RESULTS = Path(__file__).resolve().parent / "results"

# One set of DQN hyperparameters for both libraries (SB3's names; rlox's mean the same).
DQN_KW = dict(learning_rate=1e-3, buffer_size=50_000, learning_starts=200, batch_size=64, gamma=0.95,
              train_freq=1, gradient_steps=1, target_update_interval=250, exploration_fraction=0.2,
              exploration_final_eps=0.05)
HER_KW = dict(n_sampled_goal=4, goal_selection_strategy="future")


def fill_transitions(n_bits: int, n: int, seed: int = 0) -> list[tuple]:
    """``n`` random-policy transitions of BitFlippingEnv as (obs, next_obs, action, reward, done, info)."""
    from rlox.goal_envs import make_bit_flipping

    env = make_bit_flipping(n_bits)
    rng = np.random.default_rng(seed)
    out = []
    obs, _ = env.reset(seed=seed)
    for _ in range(n):
        a = int(rng.integers(n_bits))
        nxt, r, term, trunc, info = env.step(a)
        out.append((obs, nxt, a, r, term, trunc, info))
        obs = nxt if not (term or trunc) else env.reset()[0]
    return out


def bench_sampling(n_bits: int, n_fill: int, repeats: int) -> dict:
    import torch
    from stable_baselines3 import HerReplayBuffer as SB3Her
    from stable_baselines3.common.vec_env import DummyVecEnv

    from rlox.goal_envs import BitFlippingEnv, make_bit_flipping
    from rlox.her import HerReplayBuffer
    from rlox.multi_input import DictLayout

    data = fill_transitions(n_bits, n_fill)
    env = BitFlippingEnv(n_bits)
    layout = DictLayout(env.observation_space)
    ours = HerReplayBuffer(n_fill, act_dim=1, layout=layout, compute_reward=env.compute_reward, seed=0, **HER_KW)
    for obs, nxt, a, r, term, trunc, _ in data:
        ours.push(layout.flatten(obs), [float(a)], r, term, trunc, layout.flatten(nxt))
    venv = DummyVecEnv([lambda: make_bit_flipping(n_bits)])
    theirs = SB3Her(n_fill, env.observation_space, env.action_space, env=venv, device="cpu", **HER_KW)
    for obs, nxt, a, r, term, trunc, info in data:
        theirs.add({k: v[None] for k, v in obs.items()}, {k: v[None] for k, v in nxt.items()}, np.array([[a]]),
                   np.array([r]), np.array([term or trunc]), [dict(info, **({"TimeLimit.truncated": True}
                                                                             if trunc else {}))])

    def run(fn, n):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        return (time.perf_counter() - t0) / n

    torch.manual_seed(0)
    ours_s, theirs_s = [], []
    for _ in range(repeats):   # interleaved, so both see the same machine load
        ours_s.append(run(lambda: ours.sample(256), 200))
        theirs_s.append(run(lambda: theirs.sample(256), 50))
    t_ours, t_theirs = float(np.median(ours_s)), float(np.median(theirs_s))
    return {"fill": n_fill, "batch": 256, "rlox_us": t_ours * 1e6, "sb3_us": t_theirs * 1e6,
            "ratio": t_theirs / t_ours}


def success_rate(predict, n_bits: int, episodes: int = 100) -> float:
    from rlox.goal_envs import make_bit_flipping

    env = make_bit_flipping(n_bits)
    wins = 0
    for ep in range(episodes):
        obs, _ = env.reset(seed=10_000 + ep)
        while True:
            obs, _, term, trunc, info = env.step(int(predict(obs)))
            if term or trunc:
                wins += bool(info["is_success"])
                break
    return wins / episodes


def learn_rlox(n_bits: int, timesteps: int, seed: int) -> tuple[float, float]:
    from rlox.algorithms.dqn import DQN
    from rlox.goal_envs import make_bit_flipping
    from rlox.her import HerReplayBuffer

    algo = DQN(make_bit_flipping(n_bits), seed=seed, replay_buffer_class=HerReplayBuffer,
               replay_buffer_kwargs=HER_KW, hidden=[256, 256], **DQN_KW)
    t0 = time.perf_counter()
    algo.train(timesteps)
    wall = time.perf_counter() - t0
    return success_rate(lambda o: algo.predict(o, deterministic=True), n_bits), wall


def learn_sb3(n_bits: int, timesteps: int, seed: int) -> tuple[float, float]:
    from stable_baselines3 import DQN, HerReplayBuffer

    from rlox.goal_envs import make_bit_flipping

    model = DQN("MultiInputPolicy", make_bit_flipping(n_bits), seed=seed, replay_buffer_class=HerReplayBuffer,
                replay_buffer_kwargs=HER_KW, device="cpu", **DQN_KW)
    t0 = time.perf_counter()
    model.learn(timesteps)
    wall = time.perf_counter() - t0
    return success_rate(lambda o: model.predict(o, deterministic=True)[0], n_bits), wall


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n-bits", type=int, default=8)
    ap.add_argument("--timesteps", type=int, default=5000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--fill", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    import torch

    torch.set_num_threads(1)
    import rlox

    rlox.set_num_threads(1)
    samp = bench_sampling(args.n_bits, args.fill, args.repeats)
    print(f"sample(256) over {args.fill} transitions: rlox {samp['rlox_us']:.0f} us, SB3 {samp['sb3_us']:.0f} us, "
          f"{samp['ratio']:.1f}x")
    runs = []
    for seed in args.seeds:   # interleaved per seed
        s_ours, w_ours = learn_rlox(args.n_bits, args.timesteps, seed)
        s_sb3, w_sb3 = learn_sb3(args.n_bits, args.timesteps, seed)
        runs.append({"seed": seed, "rlox_success": s_ours, "sb3_success": s_sb3, "rlox_s": w_ours, "sb3_s": w_sb3})
        print(f"seed {seed}: success rlox {s_ours:.2f} ({w_ours:.0f} s), SB3 {s_sb3:.2f} ({w_sb3:.0f} s)")
    mean_ours = float(np.mean([r["rlox_success"] for r in runs]))
    mean_sb3 = float(np.mean([r["sb3_success"] for r in runs]))
    stamp = time.strftime("%Y-%m-%d %H:%M")
    lines = [
        "# Hindsight Experience Replay: rlox vs Stable-Baselines3",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores shared with other jobs (load average "
        f"{os.getloadavg()[0]:.1f}), torch threads 1, {stamp}. SB3 {__import__('stable_baselines3').__version__}.",
        f"Env: BitFlippingEnv({args.n_bits}) (rlox.goal_envs), DQN + HER (future, k = 4), hyperparameters "
        f"{DQN_KW}, rlox hidden [256, 256] (SB3's default MultiInputPolicy net), {args.timesteps} env steps per run, "
        f"seeds {args.seeds}; success = greedy policy on 100 held-out episodes.",
        "",
        "| case | rlox | SB3 | ratio | goal | met |",
        "|---|---|---|---|---|---|",
        f"| sample(256), {args.fill} transitions | {samp['rlox_us']:.0f} us | {samp['sb3_us']:.0f} us | "
        f"{samp['ratio']:.1f}x faster | >= 5x | {'yes' if samp['ratio'] >= 5 else 'NO'} |",
        f"| success rate, mean of {len(runs)} seed(s) | {mean_ours:.2f} | {mean_sb3:.2f} | "
        f"{mean_ours - mean_sb3:+.2f} | >= SB3 | {'yes' if mean_ours >= mean_sb3 else 'NO'} |",
    ]
    for r in runs:
        lines.append(f"| seed {r['seed']}: success (train wall time) | {r['rlox_success']:.2f} ({r['rlox_s']:.0f} s) | "
                     f"{r['sb3_success']:.2f} ({r['sb3_s']:.0f} s) | | | |")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "her.md").write_text("\n".join(lines) + "\n")
    (RESULTS / "her.json").write_text(json.dumps({"date": stamp, "args": vars(args), "sampling": samp,
                                                  "runs": runs}, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
