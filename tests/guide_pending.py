"""Guide samples waiting for their features (moved into test_guide.py as they land).

Not collected by pytest (the file name does not start with test_).
"""
import numpy as np
import pytest


# ---------------------------------------------------------------- Using rlox with Non-CartPole Environments
def test_guide_non_cartpole_environments():
    import gymnasium
    import numpy as np
    import rlox

    # Gymnasium for stepping
    vec_env = gymnasium.vector.SyncVectorEnv(
        [lambda: gymnasium.make("Acrobot-v1") for _ in range(8)]
    )
    obs, _ = vec_env.reset(seed=42)

    # rlox for storage
    buffer = rlox.ExperienceTable(obs_dim=6, act_dim=1)

    # rlox for GAE
    rewards = np.ones(128, dtype=np.float64)
    values = np.ones(128, dtype=np.float64) * 0.5
    dones = np.zeros(128, dtype=np.float64)
    advantages, returns = rlox.compute_gae(
        rewards, values, dones,
        last_value=0.5, gamma=0.99, lam=0.95,
    )
    assert advantages.shape == (128,)
    vec_env.close()


# ---------------------------------------------------------------- Low-Level: Replay Buffers
def test_guide_replay_buffers(tmp_path):
    import rlox

    # Uniform replay buffer (zero-copy push via Rust push_slices)
    buf = rlox.ReplayBuffer(capacity=100_000, obs_dim=4, act_dim=1)
    obs = np.zeros(4, dtype=np.float32)
    next_obs = np.ones(4, dtype=np.float32)
    buf.push(obs, action=np.array([0.5], dtype=np.float32), reward=1.0,
             terminated=False, truncated=False, next_obs=next_obs)
    batch = buf.sample(batch_size=32, seed=0)
    # batch keys: "obs", "next_obs", "actions", "rewards", "terminated", "truncated"
    assert {"obs", "next_obs", "actions", "rewards", "terminated", "truncated"} <= set(batch)

    # Prioritized replay buffer (O(1) min via augmented min-tree)
    pbuf = rlox.PrioritizedReplayBuffer(
        capacity=100_000, obs_dim=4, act_dim=1, alpha=0.6, beta=0.4
    )
    pbuf.push(obs, action=np.array([0.5], dtype=np.float32), reward=1.0,
              terminated=False, truncated=False, next_obs=next_obs, priority=1.0)
    batch = pbuf.sample(batch_size=32, seed=0)
    # Additional keys: "weights" (IS weights), "indices" (for priority update)
    new_td_errors = np.abs(np.random.randn(32)) + 1e-6   # (the guide leaves this to the user)
    pbuf.update_priorities(batch["indices"], new_td_errors)
    pbuf.set_beta(0.7)  # anneal toward 1.0
    assert "weights" in batch and "indices" in batch

    # Memory-mapped buffer (for Atari-scale observations); budget: total_capacity 1_000_000 -> 64
    mmap_buf = rlox.MmapReplayBuffer(
        hot_capacity=16,           # kept in memory
        total_capacity=64,         # overflow spills to disk
        obs_dim=84*84*4,
        act_dim=1,
        cold_path=str(tmp_path / "replay_cold.bin"),
    )
    # Same push/sample API as ReplayBuffer
    frame = np.zeros(84 * 84 * 4, dtype=np.float32)
    for i in range(40):
        mmap_buf.push(frame, action=np.array([0.0], dtype=np.float32), reward=float(i),
                      terminated=False, truncated=False, next_obs=frame)
    assert len(mmap_buf) == 40
    assert mmap_buf.sample(batch_size=8, seed=0)["obs"].shape == (8, 84 * 84 * 4)


# Samples that wait for later issues (added here as their features land):
#   issue 6: Callbacks, Logging, LoggerCallback, Config-Driven Training, VecNormalize, Dashboard, Model Zoo
#   issue 7: Trainer sac/dqn/td3, Off-Policy, Multi-Environment Collection, Custom Environments, predict for
#            SAC/TD3/DQN, Continuous / Discrete Q-networks, torch.compile, CLI sac line
#   later:   MAPPO, DreamerV3, IMPALA, Offline RL, GRPO/DPO algorithms, visual/language wrappers, deploy
