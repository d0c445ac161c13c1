"""`make demo`: a short showcase of rlox's kernels (until the training stack lands).

Steps 1024 native CartPole envs with random actions, computes GAE over the whole rollout in one
call, normalises the observations with running statistics, and prints the throughput next to
gymnasium's own numpy-vectorised CartPole measured in the same run.
"""
import time

import gymnasium as gym
import numpy as np

import rlox


def rollout_rlox(n_envs: int, n_steps: int, seed: int = 0):
    vec = rlox.VecEnv(n=n_envs, seed=seed, env_id="CartPole-v1")
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, size=(n_steps, n_envs))
    obs = np.empty((n_steps, n_envs, 4), dtype=np.float32)
    rewards = np.empty((n_steps, n_envs), dtype=np.float64)
    dones = np.empty((n_steps, n_envs), dtype=np.float64)
    vec.reset_all()
    t0 = time.perf_counter()               # pure stepping, timed like gymnasium below
    for t in range(n_steps):
        vec.step_all(actions[t])
    dt = time.perf_counter() - t0
    o = vec.reset_all()
    for t in range(n_steps):               # the same again, recording the rollout
        obs[t] = o
        out = vec.step_all(actions[t])
        o = out["obs"]
        rewards[t] = out["rewards"]
        dones[t] = out["terminated"] | out["truncated"]
    return obs, rewards, dones, dt


def rollout_gymnasium(n_envs: int, n_steps: int, seed: int = 0) -> float:
    env = gym.make_vec("CartPole-v1", num_envs=n_envs, vectorization_mode="vector_entry_point")
    env.reset(seed=seed)
    actions = np.random.default_rng(seed).integers(0, 2, size=(n_steps, n_envs))
    t0 = time.perf_counter()
    for t in range(n_steps):
        env.step(actions[t])
    dt = time.perf_counter() - t0
    env.close()
    return dt


def main() -> None:
    n_envs, n_steps = 1024, 500
    print(f"rlox {rlox.__version__}: {rlox.get_num_threads()} kernel threads, "
          f"OpenMP {'on' if rlox.openmp_enabled() else 'off'}")
    obs, rewards, dones, dt = rollout_rlox(n_envs, n_steps)
    total = n_envs * n_steps
    dt_gym = rollout_gymnasium(n_envs, n_steps)
    print(f"VecEnv CartPole-v1, {n_envs} envs x {n_steps} steps: {total / dt / 1e6:.2f} M steps/s "
          f"(gymnasium vector env: {total / dt_gym / 1e6:.2f} M steps/s, {dt_gym / dt:.1f}x)")
    episodes = int(dones.sum())
    print(f"  {episodes} episodes finished, mean length {total / max(episodes, 1):.1f} "
          f"(random actions)")

    # GAE for every env in one call: env-major [N, T] arrays, a constant value estimate.
    values = np.full((n_envs, n_steps), 0.5)
    rewards_env_major, dones_env_major = rewards.T.copy(), dones.T.copy()
    t0 = time.perf_counter()
    adv, ret = rlox.compute_gae_batched(rewards_env_major, values, dones_env_major,
                                        np.full(n_envs, 0.5), n_steps=n_steps, gamma=0.99, lam=0.95)
    dt_gae = time.perf_counter() - t0
    print(f"compute_gae_batched over {total:,} steps: {dt_gae * 1e3:.2f} ms, "
          f"mean advantage {adv.mean():.3f}, returns == advantages + values: "
          f"{np.allclose(ret, adv + values)}")

    stats = rlox.RunningStatsVec(4)
    stats.update(obs.reshape(-1, 4))
    z = stats.normalize(obs.reshape(-1, 4), clip=10.0)
    print(f"RunningStatsVec over {stats.count():,} observations: std {np.round(stats.std(), 3)}, "
          f"normalised std {np.round(z.std(0), 3)}")


if __name__ == "__main__":
    main()
