"""vec_env="sync" vs "async" for Python envs: PPO training steps/s on slow gymnasium envs.

Two kinds of slow env, each CartPole-v1 with extra work per step:
* "latency": the step waits (``time.sleep``), like a simulator behind a socket;
* "compute": the step spins the CPU (a Python busy loop), like a heavy pure-Python physics step.
Async runs each env in its own subprocess (gymnasium's AsyncVectorEnv), so waits overlap
fully and compute overlaps up to the free cores. Interleaved in one process; one torch thread.

    .venv/bin/python benchmarks/bench_vec_env.py --steps 2048 --n-envs 4 --ms 1

Writes benchmarks/results/vec_env.md and .json.
"""
from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import gymnasium as gym
import torch

RESULTS = Path(__file__).resolve().parent / "results"
DELAY_S = 0.001


class _Slow(gym.Wrapper):
    kind = "latency"

    def step(self, action):
        if self.kind == "latency":
            time.sleep(DELAY_S)
        else:
            end = time.perf_counter() + DELAY_S
            while time.perf_counter() < end:
                pass
        return self.env.step(action)


class _Compute(_Slow):
    kind = "compute"


def latency_env():
    return _Slow(gym.make("CartPole-v1"))


def compute_env():
    return _Compute(gym.make("CartPole-v1"))


def run(env_name: str, vec_env: str, steps: int, n_envs: int) -> float:
    from rlox.algorithms.ppo import PPO

    algo = PPO(env_name, seed=0, vec_env=vec_env, n_envs=n_envs, n_steps=128, batch_size=256, n_epochs=4)
    try:
        t0 = time.perf_counter()
        algo.train(steps)
        return steps / (time.perf_counter() - t0)
    finally:
        algo.collector.close()


def main() -> None:
    global DELAY_S
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2048)
    ap.add_argument("--n-envs", type=int, default=4)
    ap.add_argument("--ms", type=float, default=1.0, help="extra milliseconds per env step")
    args = ap.parse_args()
    DELAY_S = args.ms / 1000
    torch.set_num_threads(1)
    from rlox.plugins import ENV_REGISTRY

    ENV_REGISTRY.register("SlowCartPole-latency", latency_env, override=True)
    ENV_REGISTRY.register("SlowCartPole-compute", compute_env, override=True)
    rows = []
    for env_name in ("SlowCartPole-latency", "SlowCartPole-compute"):
        sps = {mode: run(env_name, mode, args.steps, args.n_envs) for mode in ("sync", "async")}
        rows.append({"env": env_name, **sps, "ratio": sps["async"] / sps["sync"]})
        print(rows[-1], flush=True)
    lines = ["# vec_env='async' vs 'sync' on slow Python envs (PPO training steps/s)", "",
             f"PPO, {args.n_envs} envs, n_steps 128, batch 256, 4 epochs, {args.steps} steps per run; each env step "
             f"adds {args.ms} ms of waiting ('latency') or of Python busy work ('compute'). One torch thread, "
             f"{os.cpu_count()} cores shared with other jobs (loaded machine: compute overlap is capped by "
             f"the free cores).", "",
             "| env | sync steps/s | async steps/s | async / sync |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['env']} | {r['sync']:.0f} | {r['async']:.0f} | {r['ratio']:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "vec_env.md").write_text(text)
    (RESULTS / "vec_env.json").write_text(json.dumps({"args": vars(args), "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
