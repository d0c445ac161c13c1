"""Off-policy collection: step a vector env with a policy and an exploration strategy, and insert
every vector step into a replay buffer with one ``push_batch``.

    import rlox
    from rlox.off_policy_collector import OffPolicyCollector
    from rlox.exploration import GaussianNoise

    buf = rlox.ReplayBuffer(100_000, obs_dim=3, act_dim=1)
    collector = OffPolicyCollector(env_id="Pendulum-v1", n_envs=4, buffer=buf,
                                   exploration=GaussianNoise(sigma=0.1))
    sac = SAC(env_id="Pendulum-v1", buffer=buf, collector=collector)

The env is the native ``rlox.VecEnv`` for native ids (CartPole, Pendulum, MountainCar(Continuous),
Acrobot), ``rlox.GymVecEnv`` for other gymnasium ids and ``rlox.plugins.ENV_REGISTRY`` names, and
for ``n_envs=1`` with a gymnasium env *object* that object itself, stepped directly with no vector
wrapper in between.

What goes into the buffer, per env and step: ``obs``, the action in the policy's space (continuous
actions normalised to ``[-1, 1]``, discrete ones as a float index), the reward, ``terminated``,
``truncated`` and ``next_obs``, which is the observation the action led to: on the last step of an
episode that is the true final observation (``terminal_obs``), never the first observation of the
next episode, so a truncated step can be bootstrapped from it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlox.envs import VecEnv, env_label, is_native, make_vec_env
from rlox.exploration import Exploration

__all__ = ["OffPolicyCollector", "CollectResult", "make_off_policy_env"]


class _SingleGymEnv:
    """One gymnasium env with the vector dict interface (``reset_all`` / ``step_all``), resetting
    itself when an episode ends; the fast path for ``n_envs=1`` over gymnasium."""

    num_envs = 1

    def __init__(self, env: gym.Env, seed: int | None) -> None:
        from rlox.multi_input import flatten_structured

        env = flatten_structured(env)   # Dict, Discrete, Tuple, ... observations: one float vector
        self.dict_layout = getattr(env, "layout", None)   # (rlox.multi_input)
        self.obs_layout = getattr(env, "obs_layout", None)
        self.env = env
        self.seed = seed
        self._seeded = False
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.env_id = env_label(env)
        self._discrete = isinstance(env.action_space, spaces.Discrete)

    def reset_all(self, seed: int | None = None) -> np.ndarray:
        if seed is None and not self._seeded:
            seed = self.seed
        self._seeded = True
        obs, _ = self.env.reset(seed=seed)
        return np.asarray(obs, dtype=np.float32)[None]

    def step_all(self, actions: np.ndarray) -> dict[str, np.ndarray]:
        action = int(actions[0]) if self._discrete else actions[0]
        obs, reward, terminated, truncated, _ = self.env.step(action)
        obs = np.asarray(obs, dtype=np.float32)[None]
        terminal_obs = obs
        if terminated or truncated:
            first, _ = self.env.reset()
            obs = np.asarray(first, dtype=np.float32)[None]
        return {"obs": obs, "rewards": np.array([reward], dtype=np.float64),
                "terminated": np.array([terminated], dtype=bool),
                "truncated": np.array([truncated], dtype=bool), "terminal_obs": terminal_obs}

    def close(self) -> None:
        self.env.close()

    def __repr__(self) -> str:
        return f"_SingleGymEnv({self.env_id})"


def make_off_policy_env(env_id: Any, n_envs: int = 1, seed: int | None = 0) -> Any:
    """The vector env the collector steps (see the module docstring for the choice)."""
    if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
        raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
    if isinstance(env_id, gym.Env):
        if n_envs == 1:
            return _SingleGymEnv(env_id, seed)
        return make_vec_env(env_id, n_envs, seed)
    if is_native(env_id):
        return VecEnv(n=int(n_envs), seed=seed, env_id=env_id)
    return make_vec_env(env_id, int(n_envs), seed)


@dataclass
class CollectResult:
    """What one ``collect`` call did: vector steps taken, finished episodes' returns and lengths,
    and whether a callback asked to stop."""

    steps: int = 0
    episode_returns: list[float] = field(default_factory=list)
    episode_lengths: list[int] = field(default_factory=list)
    stopped: bool = False


class OffPolicyCollector:
    """Steps ``n_envs`` envs and fills ``buffer`` (one ``push_batch`` per vector step).

    Args:
        env_id: a gymnasium id, an ``rlox.plugins.ENV_REGISTRY`` name or a gymnasium env object.
        n_envs: parallel envs (env i is seeded with ``seed + i``).
        buffer: the replay buffer (anything with ``push_batch``); may be set later
            (``collector.buffer = buf``), as the algorithms do when they make their own.
        exploration: an ``rlox.exploration`` strategy applied to the policy's actions; None for
            none (SAC's stochastic policy explores by itself). An unseeded strategy is seeded from
            ``seed``.
        seed: seed of the envs, of the warm-up (uniform random) actions and of an unseeded
            exploration strategy.

    Attributes:
        env, n_envs, observation_space / action_space (single env), obs_dim, act_dim (1 for
        discrete actions, whose count is ``n_actions``), discrete, and ``obs`` [n_envs, obs_dim]:
        the observation the next step acts on.
    """

    def __init__(self, env_id: Any = "Pendulum-v1", n_envs: int = 1, buffer: Any = None,
                 exploration: Exploration | None = None, seed: int = 0) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.env_id = env_id
        self.seed = int(seed)
        self.env = make_off_policy_env(env_id, n_envs, self.seed)
        self.n_envs = int(self.env.num_envs)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self.dict_layout = getattr(self.env, "dict_layout", None)   # Dict observations (rlox.multi_input)
        self.obs_layout = getattr(self.env, "obs_layout", None)     # Discrete, Tuple, ... observations
        if not isinstance(self.observation_space, spaces.Box):
            raise ValueError(f"off-policy collection needs a Box observation space, got "
                             f"{self.observation_space} for {env_label(env_id)}")
        self.obs_shape = tuple(self.observation_space.shape)
        self.obs_dim = int(np.prod(self.obs_shape))
        from rlox.wrappers.visual import is_image_space

        # Images stay uint8 on their way to the replay buffer (4x less memory than float32).
        self.obs_dtype = np.uint8 if is_image_space(self.observation_space) else np.float32
        self.discrete = isinstance(self.action_space, spaces.Discrete)
        if self.discrete:
            self.act_dim, self.n_actions = 1, int(self.action_space.n)
        elif isinstance(self.action_space, spaces.Box):
            self.act_dim, self.n_actions = int(np.prod(self.action_space.shape)), 0
            low = np.asarray(self.action_space.low, dtype=np.float64).reshape(-1)
            high = np.asarray(self.action_space.high, dtype=np.float64).reshape(-1)
            self.bounded = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
            # env action = bias + scale * a for a in [-1, 1]
            self._scale = ((high - low) / 2.0).astype(np.float32) if self.bounded else None
            self._bias = ((high + low) / 2.0).astype(np.float32) if self.bounded else None
        else:
            raise ValueError(f"off-policy collection supports Box and Discrete action spaces, got "
                             f"{self.action_space} for {env_label(env_id)}")
        self.buffer = buffer
        self.exploration: Exploration | None = None
        if exploration is not None:
            self.set_exploration(exploration)
        # The warm-up action stream (its own generator, so it never shifts the policy's samples).
        self.rng = np.random.default_rng([self.seed, 0x0FF])
        self.obs: np.ndarray | None = None
        self.episode_returns = np.zeros(self.n_envs, dtype=np.float64)
        self.episode_lengths = np.zeros(self.n_envs, dtype=np.int64)

    # ------------------------------------------------------------------ set-up
    def set_exploration(self, exploration: Exploration | None) -> None:
        """Use ``exploration`` (bound to this env, seeded from ``seed`` if it has no seed)."""
        if exploration is not None:
            if not isinstance(exploration, Exploration):
                raise TypeError(f"exploration must be an rlox.exploration strategy, got "
                                f"{type(exploration).__name__}")
            exploration.bind(self.action_space, self.n_envs)
            if not exploration.seeded:
                exploration.seed(int(np.random.SeedSequence([self.seed, 0xE8]).generate_state(1)[0]))
        self.exploration = exploration

    def reset(self) -> np.ndarray:
        """Reset every env (the first reset uses ``seed``) and the episode counters."""
        self.obs = self._flat(self.env.reset_all())
        self.episode_returns[:] = 0.0
        self.episode_lengths[:] = 0
        if self.exploration is not None:
            self.exploration.reset()
        return self.obs

    def _flat(self, obs: Any) -> np.ndarray:
        arr = np.asarray(obs, dtype=self.obs_dtype)
        return arr.reshape(self.n_envs, self.obs_dim)

    def to_env_actions(self, actions: np.ndarray) -> np.ndarray:
        """Policy-space actions -> the env's (rescaled from [-1, 1] to the bounds, continuous)."""
        if self.discrete or self._scale is None:
            return actions
        return (self._bias + self._scale * actions).reshape(self.n_envs, *self.action_space.shape)

    def random_actions(self) -> np.ndarray:
        """Uniform random policy-space actions for every env (warm-up before learning starts)."""
        if self.discrete:
            return self.rng.integers(0, self.n_actions, size=self.n_envs)
        return self.rng.uniform(-1.0, 1.0, size=(self.n_envs, self.act_dim)).astype(np.float32)

    # ------------------------------------------------------------------ the loop
    def collect(self, policy: Callable[[np.ndarray], np.ndarray] | None, n_steps: int, *,
                random: bool = False, random_steps: int = 0, progress: float = 0.0,
                progress_step: float = 0.0, on_step: Callable[[], Any] | None = None) -> CollectResult:
        """Take ``n_steps`` vector steps and push each into the buffer.

        Args:
            policy: obs [n_envs, obs_dim] float32 -> actions in policy space ([n_envs, act_dim]
                floats in [-1, 1], or [n_envs] ints); unused for random steps.
            n_steps: vector steps (each is ``n_envs`` env steps).
            random: every step takes uniform random actions (warm-up).
            random_steps: the first ``random_steps`` steps take uniform random actions.
            progress: fraction of the training run done at the first step (exploration schedules);
                it advances by ``progress_step`` per vector step.
            on_step: called after each vector step; returning False stops early.
        """
        if self.buffer is None:
            raise RuntimeError("OffPolicyCollector has no buffer; pass buffer= or set collector.buffer")
        if self.obs is None:
            self.reset()
        result = CollectResult()
        env, buffer, exploration, discrete = self.env, self.buffer, self.exploration, self.discrete
        n = self.n_envs
        n_random = int(n_steps) if random else int(random_steps)
        for step in range(int(n_steps)):
            obs = self.obs
            if step < n_random:
                actions = self.random_actions()
            elif exploration is not None:
                actions = exploration.select(policy, obs, progress + step * progress_step)
            else:
                actions = policy(obs)
            if discrete:
                actions = np.asarray(actions, dtype=np.int64).reshape(n)
                out = env.step_all(actions)
                stored = actions.astype(np.float32).reshape(n, 1)
            else:
                stored = np.asarray(actions, dtype=np.float32).reshape(n, self.act_dim)
                out = env.step_all(self.to_env_actions(stored))
            rewards, terminated, truncated = out["rewards"], out["terminated"], out["truncated"]
            next_obs = self._flat(out["obs"])
            buffer.push_batch(obs, stored, rewards, terminated, truncated, self._flat(out["terminal_obs"]))
            self.episode_returns += rewards
            self.episode_lengths += 1
            done = terminated | truncated
            if done.any():
                idx = np.flatnonzero(done)
                result.episode_returns.extend(self.episode_returns[idx].tolist())
                result.episode_lengths.extend(self.episode_lengths[idx].tolist())
                self.episode_returns[idx] = 0.0
                self.episode_lengths[idx] = 0
                if exploration is not None:
                    exploration.reset(done)
            self.obs = next_obs
            result.steps += 1
            if on_step is not None and on_step() is False:
                result.stopped = True
                break
        return result

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Env state (native envs: exact physics and RNG; gymnasium envs cannot be snapshotted and
        are reset on load), current observations, episode counters and generators."""
        state: dict[str, Any] = {
            "rng": json.dumps(self.rng.bit_generator.state),
            "episode_returns": self.episode_returns.copy(),
            "episode_lengths": self.episode_lengths.copy(),
            "obs": None if self.obs is None else self.obs.copy(),
            "env_state": None,
            "exploration": None if self.exploration is None else self.exploration.state_dict(),
        }
        get_state = getattr(self.env, "get_state", None)
        if callable(get_state) and self.obs is not None:
            state["env_state"] = get_state()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.rng.bit_generator.state = json.loads(state["rng"])
        if self.exploration is not None and state.get("exploration") is not None:
            self.exploration.load_state_dict(state["exploration"])
        env_state = state.get("env_state")
        set_state = getattr(self.env, "set_state", None)
        if env_state is not None and callable(set_state) and state.get("obs") is not None:
            set_state(np.asarray(env_state, dtype=np.uint8))
            self.obs = np.asarray(state["obs"], dtype=np.float32).reshape(self.n_envs, self.obs_dim).copy()
            self.episode_returns[:] = np.asarray(state["episode_returns"], dtype=np.float64)
            self.episode_lengths[:] = np.asarray(state["episode_lengths"], dtype=np.int64)
        else:
            # The env could not be restored: start fresh episodes on the next collect.
            self.obs = None

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()

    def __repr__(self) -> str:
        return (f"OffPolicyCollector({env_label(self.env_id)!r}, n_envs={self.n_envs}, "
                f"exploration={self.exploration!r})")
