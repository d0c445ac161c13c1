"""Exploration strategies for off-policy collection, each with its own seedable generator.

    from rlox.exploration import GaussianNoise, OrnsteinUhlenbeckNoise, EpsilonGreedy
    noise = GaussianNoise(sigma=0.1, seed=0)
    actions = noise.select(policy, obs, progress)          # policy(obs) + N(0, 0.1^2), clipped

All three share one small interface, which ``OffPolicyCollector`` calls once per vector step:

* ``bind(action_space, n_envs)``: size the strategy for the env (done by the collector);
* ``select(policy, obs, progress) -> actions``: the actions to take, where ``policy(obs)``
  gives the greedy actions (normalised to ``[-1, 1]`` for continuous spaces, ints for discrete
  ones) and ``progress`` runs from 0 to 1 over the training run (for schedules);
* ``reset(done)``: episode boundaries (``done`` [n_envs] bool; resets OU state);
* ``state_dict()`` / ``load_state_dict()``: generator and internal state, so training resumes
  exactly.

Noise is in the normalised action space: ``sigma=0.1`` is 10% of the half-range of each action
dimension (SB3's ``NormalActionNoise`` on a ``[-1, 1]`` box).
"""
from __future__ import annotations

import abc
import json
import math
from typing import Any, Callable, Mapping

import numpy as np
from gymnasium import spaces

__all__ = ["Exploration", "GaussianNoise", "OrnsteinUhlenbeckNoise", "EpsilonGreedy", "linear_schedule"]


def linear_schedule(start: float, end: float, fraction: float, progress: float) -> float:
    """``start`` -> ``end`` linearly over the first ``fraction`` of progress, then ``end``."""
    if progress >= fraction:
        return float(end)
    return float(start + (end - start) * progress / fraction)


def _check_nonneg(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def _check_prob(name: str, value: Any) -> float:
    v = _check_nonneg(name, value)
    if v > 1:
        raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    return v


class Exploration(abc.ABC):
    """Base class: a seeded NumPy generator plus the collector-facing interface."""

    #: whether the strategy acts on discrete (True) or continuous (False) action spaces
    discrete: bool = False

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seed
        self.rng = np.random.default_rng(seed)
        self.n_envs = 1
        self.act_dim = 1

    def seed(self, seed: int | None) -> None:
        """Restart the generator from ``seed``."""
        self._seed = seed
        self.rng = np.random.default_rng(seed)

    @property
    def seeded(self) -> bool:
        return self._seed is not None

    def bind(self, action_space: spaces.Space, n_envs: int) -> "Exploration":
        """Size the strategy for ``n_envs`` envs of ``action_space`` (checks it fits)."""
        if self.discrete and not isinstance(action_space, spaces.Discrete):
            raise ValueError(f"{type(self).__name__} explores discrete action spaces, got {action_space}; "
                             f"use GaussianNoise or OrnsteinUhlenbeckNoise for continuous actions")
        if not self.discrete and not isinstance(action_space, spaces.Box):
            raise ValueError(f"{type(self).__name__} perturbs continuous (Box) actions, got {action_space}; "
                             f"use EpsilonGreedy for discrete actions")
        self.n_envs = int(n_envs)
        self.act_dim = 1 if self.discrete else int(np.prod(action_space.shape))
        return self

    @abc.abstractmethod
    def select(self, policy: Callable[[np.ndarray], np.ndarray], obs: np.ndarray,
               progress: float) -> np.ndarray:
        """Actions for ``obs`` [n, *obs]: ``policy(obs)`` perturbed (or replaced) by the strategy."""

    def reset(self, done: np.ndarray | None = None) -> None:
        """Episode boundaries: ``done`` [n_envs] bool (None: every env)."""

    def state_dict(self) -> dict[str, Any]:
        return {"rng": json.dumps(self.rng.bit_generator.state)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = json.loads(state["rng"])


class GaussianNoise(Exploration):
    """Add ``N(mean, sigma^2)`` to each action and clip to ``[-1, 1]`` (TD3's exploration).

    Args:
        sigma: standard deviation, in units of the normalised action range.
        mean: mean of the noise (0 by default).
        seed: seed of the noise generator (None: the collector seeds it from its own seed).
    """

    def __init__(self, sigma: float = 0.1, mean: float = 0.0, *, seed: int | None = None) -> None:
        super().__init__(seed)
        self.sigma = _check_nonneg("GaussianNoise sigma", sigma)
        if isinstance(mean, bool) or not isinstance(mean, (int, float)) or not math.isfinite(mean):
            raise ValueError(f"GaussianNoise mean must be a finite number, got {mean!r}")
        self.mean = float(mean)

    def sample(self, n: int | None = None) -> np.ndarray:
        """Noise [n, act_dim] float32 (n defaults to the bound number of envs)."""
        n = self.n_envs if n is None else n
        return (self.mean + self.sigma * self.rng.standard_normal((n, self.act_dim))).astype(np.float32)

    def select(self, policy, obs, progress):
        actions = policy(obs)
        return np.clip(actions + self.sample(len(actions)), -1.0, 1.0, dtype=np.float32)

    def __repr__(self) -> str:
        return f"GaussianNoise(sigma={self.sigma}, mean={self.mean})"


class OrnsteinUhlenbeckNoise(Exploration):
    """Temporally correlated noise (Uhlenbeck & Ornstein, 1930; used by DDPG, Lillicrap et al.
    2016): ``x += theta * (mu - x) * dt + sigma * sqrt(dt) * N(0, 1)``, one process per env and
    action dimension, reset to ``x0`` at each episode end.

    Args:
        sigma: volatility, in units of the normalised action range.
        theta: mean-reversion rate.
        dt: time step.
        mu: long-run mean.
        x0: initial and reset value.
        seed: seed of the noise generator.
    """

    def __init__(self, sigma: float = 0.2, theta: float = 0.15, dt: float = 1e-2, mu: float = 0.0,
                 x0: float = 0.0, *, seed: int | None = None) -> None:
        super().__init__(seed)
        self.sigma = _check_nonneg("OrnsteinUhlenbeckNoise sigma", sigma)
        self.theta = _check_nonneg("OrnsteinUhlenbeckNoise theta", theta)
        self.dt = _check_nonneg("OrnsteinUhlenbeckNoise dt", dt)
        if self.dt == 0:
            raise ValueError("OrnsteinUhlenbeckNoise dt must be > 0")
        for name, v in (("mu", mu), ("x0", x0)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"OrnsteinUhlenbeckNoise {name} must be a finite number, got {v!r}")
        self.mu, self.x0 = float(mu), float(x0)
        self.x = np.full((1, 1), self.x0)

    def bind(self, action_space, n_envs):
        super().bind(action_space, n_envs)
        self.x = np.full((self.n_envs, self.act_dim), self.x0)
        return self

    def sample(self) -> np.ndarray:
        """Advance every process one step; the new values [n_envs, act_dim] float32."""
        self.x = (self.x + self.theta * (self.mu - self.x) * self.dt
                  + self.sigma * math.sqrt(self.dt) * self.rng.standard_normal(self.x.shape))
        return self.x.astype(np.float32)

    def select(self, policy, obs, progress):
        actions = policy(obs)
        return np.clip(actions + self.sample(), -1.0, 1.0, dtype=np.float32)

    def reset(self, done=None):
        if done is None:
            self.x[:] = self.x0
        else:
            self.x[np.asarray(done, dtype=bool)] = self.x0

    def state_dict(self):
        return {**super().state_dict(), "x": self.x.copy()}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.x = np.array(state["x"], dtype=np.float64).reshape(self.x.shape)

    def __repr__(self) -> str:
        return f"OrnsteinUhlenbeckNoise(sigma={self.sigma}, theta={self.theta}, dt={self.dt})"


class EpsilonGreedy(Exploration):
    """Take a uniformly random action with probability epsilon, else the greedy one; epsilon
    decays linearly from ``initial_eps`` to ``final_eps`` over the first ``fraction`` of the run
    (Mnih et al., 2015). When every env explores, the greedy policy is not evaluated at all.

    Args:
        initial_eps: epsilon at the start of the run.
        final_eps: epsilon after the decay.
        fraction: fraction of the run over which epsilon decays (in (0, 1]).
        seed: seed of the generator.
    """

    discrete = True

    def __init__(self, initial_eps: float = 1.0, final_eps: float = 0.05, fraction: float = 0.1,
                 *, seed: int | None = None) -> None:
        super().__init__(seed)
        self.initial_eps = _check_prob("EpsilonGreedy initial_eps", initial_eps)
        self.final_eps = _check_prob("EpsilonGreedy final_eps", final_eps)
        self.fraction = _check_prob("EpsilonGreedy fraction", fraction)
        if self.fraction == 0:
            raise ValueError("EpsilonGreedy fraction must be in (0, 1], got 0")
        self.n_actions = 2

    def bind(self, action_space, n_envs):
        super().bind(action_space, n_envs)
        self.n_actions = int(action_space.n)
        return self

    def epsilon(self, progress: float) -> float:
        """Epsilon at ``progress`` in [0, 1] of the run."""
        return linear_schedule(self.initial_eps, self.final_eps, self.fraction, progress)

    def select(self, policy, obs, progress):
        n = len(obs)
        explore = self.rng.random(n) < self.epsilon(progress)
        if explore.all():
            return self.rng.integers(0, self.n_actions, size=n)
        actions = np.asarray(policy(obs), dtype=np.int64)
        if explore.any():
            actions = actions.copy()
            actions[explore] = self.rng.integers(0, self.n_actions, size=int(explore.sum()))
        return actions

    def __repr__(self) -> str:
        return (f"EpsilonGreedy(initial_eps={self.initial_eps}, final_eps={self.final_eps}, "
                f"fraction={self.fraction})")
