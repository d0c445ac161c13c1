"""Envs the IMPALA tests build inside actor processes (importable there by entry point)."""
import os

import gymnasium as gym


class CrashOnce(gym.Wrapper):
    """CartPole that raises in ``step`` after ``after`` steps, once per ``marker`` file: the
    first process to get there creates the marker and raises; every later one runs normally."""

    def __init__(self, marker: str, after: int = 40):
        super().__init__(gym.make("CartPole-v1"))
        self.marker, self.after, self.steps = marker, after, 0

    def step(self, action):
        self.steps += 1
        if self.steps >= self.after and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError("CrashOnce: simulated env failure")
        return self.env.step(action)
