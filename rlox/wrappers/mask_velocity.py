"""Partially observable classic-control tasks: the velocities masked out of the observation.

The ids and the masking are RL Baselines3 Zoo's (its ``MaskVelocityWrapper`` and the
``{name}NoVel-v{version}`` ids it registers, the tasks sb3-contrib benchmarks RecurrentPPO on):
the velocity entries of the observation are set to 0, so the observation keeps its shape and
bounds but an agent must infer the velocities from what it remembers.

    from rlox import Trainer
    Trainer("recurrent_ppo", env="CartPoleNoVel-v1")       # x, theta only (x_dot, theta_dot = 0)

=============================  =========================  =================
id                             base                       masked entries
=============================  =========================  =================
CartPoleNoVel-v1               CartPole-v1                1, 3 (x_dot, theta_dot)
PendulumNoVel-v1               Pendulum-v1                2 (theta_dot)
MountainCarNoVel-v0            MountainCar-v0             1 (velocity)
MountainCarContinuousNoVel-v0  MountainCarContinuous-v0   1 (velocity)
LunarLanderNoVel-v3            LunarLander-v3             2, 3, 5 (box2d extra)
LunarLanderContinuousNoVel-v3  LunarLanderContinuous-v3   2, 3, 5 (box2d extra)
=============================  =========================  =================

They are registered in ``rlox.plugins.ENV_REGISTRY`` (entry points of the ``rlox`` package).
Where the base env is native (``rlox.envs.NATIVE_ENV_IDS``), training steps the native
``VecEnv`` and masks its arrays (``MaskVelocityVecEnv``); elsewhere (and for evaluation) the
gymnasium env is wrapped in ``MaskVelocity``.
"""
from __future__ import annotations

from typing import Any, Sequence

import gymnasium as gym
import numpy as np

from rlox.envs import env_label

__all__ = ["MaskVelocity", "MaskVelocityVecEnv", "MaskedEnv", "VELOCITY_INDICES", "MASKED_ENVS",
           "CartPoleNoVel", "PendulumNoVel", "MountainCarNoVel", "MountainCarContinuousNoVel",
           "LunarLanderNoVel", "LunarLanderContinuousNoVel"]

#: base env id -> the observation entries that are velocities (RL Zoo's table).
VELOCITY_INDICES: dict[str, tuple[int, ...]] = {
    "CartPole-v1": (1, 3),
    "Pendulum-v1": (2,),
    "MountainCar-v0": (1,),
    "MountainCarContinuous-v0": (1,),
    "LunarLander-v3": (2, 3, 5),
    "LunarLanderContinuous-v3": (2, 3, 5),
}


def _mask_for(env_id: str, obs_dim: int, indices: Sequence[int] | None) -> np.ndarray:
    idx = VELOCITY_INDICES.get(env_id) if indices is None else tuple(indices)
    if idx is None:
        raise ValueError(f"no velocity indices are known for {env_id!r}; pass indices= (known: "
                         f"{', '.join(VELOCITY_INDICES)})")
    bad = [i for i in idx if not (isinstance(i, (int, np.integer)) and 0 <= i < obs_dim)]
    if bad:
        raise ValueError(f"velocity indices {bad} are out of range for {env_id!r}'s {obs_dim}-entry observation")
    keep = np.ones(obs_dim, dtype=np.float32)
    keep[list(idx)] = 0.0
    return keep


class MaskVelocity(gym.ObservationWrapper):
    """Set the velocity entries of a gymnasium env's observation to 0 (shape kept).

    Args:
        env: a gymnasium env with a flat Box observation.
        indices: the entries to mask; default: ``VELOCITY_INDICES[env.spec.id]``.
    """

    def __init__(self, env: gym.Env, indices: Sequence[int] | None = None) -> None:
        super().__init__(env)
        space = env.observation_space
        if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
            raise TypeError(f"MaskVelocity needs a flat Box observation space, got {space}")
        self.keep = _mask_for(env_label(env), space.shape[0], indices).astype(space.dtype)

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return observation * self.keep


class MaskVelocityVecEnv:
    """``MaskVelocity`` over an rlox vector env (``VecEnv`` / ``GymVecEnv`` dict interface):
    ``obs`` and ``terminal_obs`` come back with the velocity entries set to 0."""

    def __init__(self, venv: Any, indices: Sequence[int] | None = None) -> None:
        self.venv = venv
        space = venv.single_observation_space
        self.keep = _mask_for(getattr(venv, "env_id", ""), int(np.prod(space.shape)), indices)

    def reset_all(self, seed: int | None = None) -> np.ndarray:
        return self.venv.reset_all(seed=seed) * self.keep

    def step_all(self, actions: Any) -> dict[str, Any]:
        out = dict(self.venv.step_all(actions))
        out["obs"] = out["obs"] * self.keep
        out["terminal_obs"] = out["terminal_obs"] * self.keep
        return out

    def __getattr__(self, name: str) -> Any:
        # Spaces, num_envs, get_state/set_state, close: the wrapped env's.
        venv = self.__dict__.get("venv")
        if venv is None:
            raise AttributeError(name)
        return getattr(venv, name)

    def __repr__(self) -> str:
        return f"MaskVelocityVecEnv({self.venv!r})"


class MaskedEnv:
    """An ``ENV_REGISTRY`` entry for a masked task: calling it makes the gymnasium env
    (``MaskVelocity(gym.make(base))``); ``make_vec_env`` steps the native ``VecEnv`` where the
    base is native."""

    def __init__(self, env_id: str, base: str) -> None:
        self.env_id, self.base = env_id, base

    def __call__(self, **kwargs: Any) -> gym.Env:
        return MaskVelocity(gym.make(self.base, **kwargs))

    def make_vec_env(self, n_envs: int, seed: int | None) -> Any:
        from rlox.envs import VecEnv, is_native, make_vec_env

        venv = VecEnv(n=n_envs, seed=seed, env_id=self.base) if is_native(self.base) else \
            make_vec_env(self.base, n_envs, seed)
        masked = MaskVelocityVecEnv(venv, VELOCITY_INDICES[self.base])
        return masked

    def __repr__(self) -> str:
        return f"MaskedEnv({self.env_id!r}, base={self.base!r})"


CartPoleNoVel = MaskedEnv("CartPoleNoVel-v1", "CartPole-v1")
PendulumNoVel = MaskedEnv("PendulumNoVel-v1", "Pendulum-v1")
MountainCarNoVel = MaskedEnv("MountainCarNoVel-v0", "MountainCar-v0")
MountainCarContinuousNoVel = MaskedEnv("MountainCarContinuousNoVel-v0", "MountainCarContinuous-v0")
LunarLanderNoVel = MaskedEnv("LunarLanderNoVel-v3", "LunarLander-v3")
LunarLanderContinuousNoVel = MaskedEnv("LunarLanderContinuousNoVel-v3", "LunarLanderContinuous-v3")

#: masked id -> its registry entry.
MASKED_ENVS: dict[str, MaskedEnv] = {e.env_id: e for e in (
    CartPoleNoVel, PendulumNoVel, MountainCarNoVel, MountainCarContinuousNoVel, LunarLanderNoVel,
    LunarLanderContinuousNoVel)}
