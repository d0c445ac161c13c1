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


class HangOnce(gym.Wrapper):
    """CartPole whose ``step`` blocks forever after ``after`` steps, once per ``marker`` file: the
    first process to get there creates the marker (atomically), writes the time into it and
    hangs; every other one, and every later one, runs normally."""

    def __init__(self, marker: str, after: int = 100):
        super().__init__(gym.make("CartPole-v1"))
        self.marker, self.after, self.steps = marker, after, 0

    def step(self, action):
        self.steps += 1
        if self.steps >= self.after and not os.path.exists(self.marker):
            import time

            try:
                fd = os.open(self.marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                return self.env.step(action)
            os.write(fd, repr(time.time()).encode())
            os.close(fd)
            while True:              # hung: alive, but no step ever returns
                time.sleep(3600)
        return self.env.step(action)
