"""The compiled collection's rollout kernel alone (``rlox._ext.hybrid.RolloutKernel``), steps/s.

The default CartPole policy of PPO (64-64 Tanh actor and critic), read in place from the torch
parameters; each iteration is what an on-policy algorithm does per rollout without GAE and the
batch layout: ``CompiledCollection.sync_weights`` (a pointer check) + ``kernel.collect(T)``.
Best of 5 repetitions per (n_envs, n_steps). Issue 18's "one network" change measured with it
(float64 loops + weight copy before, shared float32 MLP after): see CHANGELOG.md.

    RLOX_NUM_THREADS=1 OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_collection.py
"""
from __future__ import annotations

import time

import torch

from rlox.algorithms import PPO

CASES = ((8, 5), (8, 128), (16, 128), (64, 128))    # (n_envs, n_steps): A2C's and PPO's guide calls, more envs


def main() -> None:
    torch.set_num_threads(1)
    for n_envs, n_steps in CASES:
        algo = PPO("CartPole-v1", seed=0, n_envs=n_envs, n_steps=n_steps, compiled_update=False)
        cc = algo.compiled_collector
        iters = max(1, 40_000 // (n_envs * n_steps))
        best = 0.0
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(iters):
                cc.sync_weights(algo.policy)
                cc.kernel.collect(n_steps, 0.99)
            best = max(best, n_envs * n_steps * iters / (time.perf_counter() - t0))
        print(f"n_envs={n_envs:3d} n_steps={n_steps:4d}: {best:>10,.0f} steps/s", flush=True)


if __name__ == "__main__":
    main()
