"""An example rlox plugin: a corridor env and a progress-shaping reward.

rlox finds it through the ``rlox.plugins`` entry point in this package's pyproject.toml and
calls ``register()`` once; nothing here imports rlox at module level, so a broken rlox install
cannot break the import of the plugin (and vice versa).
"""
from __future__ import annotations

import gymnasium as gym
import numpy as np

__all__ = ["CorridorEnv", "progress_reward", "register", "ENV_ID", "REWARD_ID"]

ENV_ID = "example/Corridor-v0"
REWARD_ID = "example/progress"


class CorridorEnv(gym.Env):
    """Walk right along a corridor of ``length`` cells from cell 0 to the last one.

    Observation: ``[position / (length - 1)]`` (float32 in [0, 1]). Actions: 0 left, 1 right.
    Reward: +1 on reaching the goal (terminated), -0.01 per other step; truncated after
    ``max_steps`` steps. The optimum return is ``1 - 0.01 * (length - 2)``.
    """

    metadata = {"render_modes": []}

    def __init__(self, length: int = 8, max_steps: int = 50):
        if length < 2:
            raise ValueError(f"length must be >= 2, got {length}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.length = int(length)
        self.max_steps = int(max_steps)
        self.observation_space = gym.spaces.Box(0.0, 1.0, shape=(1,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._pos = 0
        self._steps = 0

    def _obs(self) -> np.ndarray:
        return np.array([self._pos / (self.length - 1)], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._pos = 0
        self._steps = 0
        return self._obs(), {}

    def step(self, action):
        if not self.action_space.contains(int(action)):
            raise ValueError(f"action must be 0 or 1, got {action!r}")
        self._pos = min(self.length - 1, max(0, self._pos + (1 if int(action) == 1 else -1)))
        self._steps += 1
        terminated = self._pos == self.length - 1
        truncated = not terminated and self._steps >= self.max_steps
        reward = 1.0 if terminated else -0.01
        return self._obs(), reward, terminated, truncated, {}


def progress_reward(obs, action, reward, next_obs) -> float:
    """Potential-based shaping: the reward plus the progress made along the corridor."""
    return float(reward) + float(np.asarray(next_obs).reshape(-1)[0] - np.asarray(obs).reshape(-1)[0])


def register() -> None:
    """Called by ``rlox.plugins.discover_plugins()``: register the env and the reward."""
    from rlox.plugins import ENV_REGISTRY, REWARD_REGISTRY

    ENV_REGISTRY.register(ENV_ID, CorridorEnv, override=True)
    REWARD_REGISTRY.register(REWARD_ID, progress_reward, override=True)
