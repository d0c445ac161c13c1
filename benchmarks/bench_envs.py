"""Native VecEnv step throughput vs gymnasium (numpy-vectorised and SyncVectorEnv) and envpool.

    RLOX_BENCH_QUICK=1 .venv/bin/python benchmarks/bench_envs.py
"""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import gymnasium as gym
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _harness import QUICK, Table, header, measure  # noqa: E402

import rlox  # noqa: E402

try:
    import envpool
except ImportError:  # envpool is optional
    envpool = None


def _actions(space, n, rng, k=16):
    """k pre-drawn action batches (cycling through them keeps policy cost out of the timing)."""
    if isinstance(space, gym.spaces.Discrete):
        return [rng.integers(space.n, size=n) for _ in range(k)]
    return [rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(np.float32)
            for _ in range(k)]


def _rate(step, batches, n):
    it = iter(range(1 << 62))

    def call():
        step(batches[next(it) % len(batches)])
    return n / measure(call)


def rlox_rate(env_id, n, rng):
    vec = rlox.VecEnv(n=n, seed=0, env_id=env_id)
    vec.reset_all()
    acts = _actions(vec.single_action_space, n, rng)
    if env_id == "MountainCarContinuous-v0" or env_id == "Pendulum-v1":
        acts = [a.reshape(n) for a in acts]
    return _rate(vec.step_all, acts, n)


def gym_rate(env_id, n, rng, mode):
    envs = gym.make_vec(env_id, num_envs=n, vectorization_mode=mode)
    envs.reset(seed=0)
    acts = _actions(envs.single_action_space, n, rng)
    rate = _rate(envs.step, acts, n)
    envs.close()
    return rate


def envpool_rate(n, rng):
    envs = envpool.make_gym("CartPole-v1", num_envs=n)
    envs.reset()
    acts = [a.astype(np.int32) for a in _actions(gym.spaces.Discrete(2), n, rng)]
    rate = _rate(envs.step, acts, n)
    envs.close()  # its worker threads would otherwise compete with later measurements
    del envs
    return rate


def main() -> None:
    warnings.filterwarnings("ignore", category=UserWarning)
    rng = np.random.default_rng(0)
    table = Table("envs", f"Native VecEnv steps/s ({rlox.get_num_threads()} threads)")
    header("CartPole-v1")
    sizes = [1, 16, 64, 256, 1024]
    # All rlox figures first: envpool's thread pool can linger and share the cores.
    ours_by_n = {n: rlox_rate("CartPole-v1", n, rng) for n in sizes}
    threads = rlox.get_num_threads()
    rlox.set_num_threads(1)  # the serial figure, robust when other processes share the cores
    serial_by_n = {n: rlox_rate("CartPole-v1", n, rng) for n in (256, 1024)}
    rlox.set_num_threads(threads)
    others = ["Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1"]
    others_ours = {(e, n): rlox_rate(e, n, rng) for e in others for n in (16, 256)}
    for n in sizes:
        ours = ours_by_n[n]
        vec_goal = {64: 10, 1024: 5}.get(n)
        gym_vec = gym_rate("CartPole-v1", n, rng, "vector_entry_point")
        table.add(f"CartPole n={n} vs gym vector", rlox=ours, unit="steps/s",
                  peer=gym_vec, peer_name="gym vector_entry_point", goal=vec_goal)
        if n in serial_by_n:
            table.add(f"CartPole n={n} (1 thread) vs gym vector", rlox=serial_by_n[n],
                      unit="steps/s", peer=gym_vec, peer_name="gym vector_entry_point",
                      goal=vec_goal)
        if n <= 256 or not QUICK:
            table.add(f"CartPole n={n} vs gym sync", rlox=ours, unit="steps/s",
                      peer=gym_rate("CartPole-v1", n, rng, "sync"), peer_name="gym SyncVectorEnv",
                      goal=100 if n == 64 else None)
        if envpool is not None:
            table.add(f"CartPole n={n} vs envpool", rlox=ours, unit="steps/s",
                      peer=envpool_rate(n, rng), peer_name=f"envpool {envpool.__version__}", goal=1)
    header("other native envs (gymnasium's vector env where it has one, else sync)")
    for env_id in others:
        spec = gym.spec(env_id)
        mode = "vector_entry_point" if spec.vector_entry_point is not None else "sync"
        for n in (16, 256):
            table.add(f"{env_id} n={n}", rlox=others_ours[env_id, n], unit="steps/s",
                      peer=gym_rate(env_id, n, rng, mode), peer_name=f"gym {mode}", goal=1)
    table.finish()


if __name__ == "__main__":
    main()
