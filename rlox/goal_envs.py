"""Goal-conditioned envs that need no download, for hindsight experience replay (``rlox.her``).

* ``BitFlipping-v0`` (``BitFlippingEnv``, Andrychowicz et al., 2017, sec. 3.1): flip one of
  ``n_bits`` bits per step until the bits equal a random target; reward -1 per step, 0 on
  success (which ends the episode); at most ``n_bits`` steps. Discrete actions (DQN).
* ``PointReach-v0`` (``PointReachEnv``): move a point in the square [-1, 1]^2 by up to
  ``max_speed`` per step towards a random target; sparse reward -1 until within ``distance_threshold``,
  0 there; 50 steps. Continuous actions (SAC, TD3).

Both follow gymnasium's goal-env convention: Dict observations ``observation``,
``achieved_goal``, ``desired_goal``; ``compute_reward(achieved, desired, info)`` vectorised over
leading batch dimensions; ``info["is_success"]``. Both are registered in
``rlox.plugins.ENV_REGISTRY`` (entry points) and with gymnasium (``gym.make("rlox/BitFlipping-v0")``).
"""
from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["BitFlippingEnv", "PointReachEnv", "make_bit_flipping", "make_point_reach"]


class BitFlippingEnv(gym.Env):
    """Bit flipping with ``n_bits`` bits (observations as float32 0/1 vectors)."""

    metadata = {"render_modes": []}

    def __init__(self, n_bits: int = 10) -> None:
        if isinstance(n_bits, bool) or not isinstance(n_bits, int) or n_bits < 1:
            raise ValueError(f"n_bits must be an int >= 1, got {n_bits!r}")
        self.n_bits = n_bits
        bits = spaces.Box(0.0, 1.0, (n_bits,), np.float32)
        self.observation_space = spaces.Dict({"observation": bits, "achieved_goal": bits, "desired_goal": bits})
        self.action_space = spaces.Discrete(n_bits)
        self.state = np.zeros(n_bits, np.float32)
        self.goal = np.zeros(n_bits, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.state.copy(), "achieved_goal": self.state.copy(), "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> Any:
        """0 where every bit matches, -1 elsewhere; over any leading batch dimensions."""
        different = np.any(np.asarray(achieved_goal) != np.asarray(desired_goal), axis=-1)
        return -different.astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.state = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        self.goal = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        while np.array_equal(self.state, self.goal):
            self.goal = self.np_random.integers(0, 2, self.n_bits).astype(np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        a = int(action)
        if not 0 <= a < self.n_bits:
            raise ValueError(f"action {action!r} is out of range; expected an int in [0, {self.n_bits})")
        self.state[a] = 1.0 - self.state[a]
        reward = float(self.compute_reward(self.state, self.goal))
        success = reward == 0.0
        return self._obs(), reward, success, False, {"is_success": success}


class PointReachEnv(gym.Env):
    """A point in [-1, 1]^2 reaching a random target with a sparse reward."""

    metadata = {"render_modes": []}

    def __init__(self, distance_threshold: float = 0.1, max_speed: float = 0.1) -> None:
        if not distance_threshold > 0 or not max_speed > 0:
            raise ValueError(f"distance_threshold and max_speed must be > 0, got {distance_threshold!r} and "
                             f"{max_speed!r}")
        self.distance_threshold = float(distance_threshold)
        self.max_speed = float(max_speed)
        pos = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.observation_space = spaces.Dict({"observation": pos, "achieved_goal": pos, "desired_goal": pos})
        self.action_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.pos = np.zeros(2, np.float32)
        self.goal = np.zeros(2, np.float32)

    def _obs(self) -> dict[str, np.ndarray]:
        return {"observation": self.pos.copy(), "achieved_goal": self.pos.copy(), "desired_goal": self.goal.copy()}

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any = None) -> Any:
        """0 within ``distance_threshold`` of the goal, -1 elsewhere; over leading batch dimensions."""
        d = np.linalg.norm(np.asarray(achieved_goal, np.float32) - np.asarray(desired_goal, np.float32), axis=-1)
        return -(d > self.distance_threshold).astype(np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[dict, dict]:
        super().reset(seed=seed)
        self.pos = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        self.goal = self.np_random.uniform(-1.0, 1.0, 2).astype(np.float32)
        return self._obs(), {"is_success": False}

    def step(self, action: Any) -> tuple[dict, float, bool, bool, dict]:
        a = np.clip(np.asarray(action, np.float32).reshape(2), -1.0, 1.0)
        self.pos = np.clip(self.pos + self.max_speed * a, -1.0, 1.0).astype(np.float32)
        reward = float(self.compute_reward(self.pos, self.goal))
        return self._obs(), reward, False, False, {"is_success": reward == 0.0}


def make_bit_flipping(n_bits: int = 10, max_episode_steps: int | None = None) -> gym.Env:
    """``BitFlippingEnv(n_bits)`` with a time limit of ``n_bits`` steps (or ``max_episode_steps``)."""
    return gym.wrappers.TimeLimit(BitFlippingEnv(n_bits), max_episode_steps or n_bits)


def make_point_reach(max_episode_steps: int = 50, **kwargs: Any) -> gym.Env:
    """``PointReachEnv(**kwargs)`` with a time limit of ``max_episode_steps`` (default 50)."""
    return gym.wrappers.TimeLimit(PointReachEnv(**kwargs), max_episode_steps)


# gymnasium ids too (gym.make("rlox/BitFlipping-v0")); registering on import is idempotent.
for _id, _entry, _steps, _kwargs in (("rlox/BitFlipping-v0", "rlox.goal_envs:BitFlippingEnv", 10, {"n_bits": 10}),
                                     ("rlox/PointReach-v0", "rlox.goal_envs:PointReachEnv", 50, {})):
    if _id not in gym.registry:
        gym.register(_id, entry_point=_entry, max_episode_steps=_steps, kwargs=_kwargs)
