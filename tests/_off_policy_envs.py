"""Hand-made envs for the off-policy tests: every quantity is known, so stored transitions and
TD targets can be checked by hand."""
import gymnasium as gym
import numpy as np
from gymnasium import spaces

COUNTER_ID = "RloxTestCounter-v0"          # time limit 5, never terminates
COUNTER_TERM_ID = "RloxTestCounterTerm-v0"  # terminates after 4 steps (before the limit of 5)
COUNTER_BOX_ID = "RloxTestCounterBox-v0"    # continuous actions in [-3, 5], time limit 5


class CounterEnv(gym.Env):
    """obs = (t, episode): t counts steps in the episode, episode counts resets.

    Reward of step t is ``t + 1`` (plus the action for the continuous version), so every
    transition of an episode has a distinct, known reward. ``terminate_at``: the step count at
    which the env terminates (None: never; the time limit truncates).
    """

    def __init__(self, terminate_at=None, continuous=False):
        self.observation_space = spaces.Box(-1e6, 1e6, shape=(2,), dtype=np.float32)
        self.action_space = (spaces.Box(-3.0, 5.0, shape=(1,), dtype=np.float32) if continuous
                             else spaces.Discrete(2))
        self.terminate_at = terminate_at
        self.continuous = continuous
        self.t = 0
        self.episode = -1
        self.actions = []

    def _obs(self):
        return np.array([self.t, self.episode], dtype=np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.episode += 1
        return self._obs(), {}

    def step(self, action):
        self.actions.append(np.array(action, dtype=np.float64).copy())
        reward = float(self.t + 1)
        self.t += 1
        terminated = self.terminate_at is not None and self.t >= self.terminate_at
        return self._obs(), reward, terminated, False, {}


def register():
    for env_id, kwargs in ((COUNTER_ID, {}), (COUNTER_TERM_ID, {"terminate_at": 4}),
                           (COUNTER_BOX_ID, {"continuous": True})):
        if env_id not in gym.registry:
            gym.register(env_id, entry_point=CounterEnv, kwargs=kwargs, max_episode_steps=5,
                         disable_env_checker=True)


register()
