"""VecNormalize: running normalisation of observations and rewards of a vector env.

    from rlox.wrappers import VecNormalize
    trainer = PPOTrainer(env="Pendulum-v1", wrappers=[VecNormalize(norm_obs=True, norm_reward=True)])

Observations are normalised per dimension with running mean/std (``RunningStatsVec``, a Cython
kernel) and clipped to ``[-clip_obs, clip_obs]``. Rewards are divided by the running std of the
discounted return ``R_t = gamma * R_{t-1} + r_t`` (reset at episode ends), as in SB3 and the
PPO implementation details, and clipped to ``[-clip_reward, clip_reward]``; they are not
centred. Statistics update only while ``training`` is True: algorithms freeze them for
evaluation and ``predict``, and save and restore them with the model (``state_dict``).

The wrapper speaks the rlox vector-env interface (``reset_all`` / ``step_all`` returning a dict),
over ``rlox.VecEnv`` or ``rlox.GymVecEnv``. ``step_all`` adds ``raw_obs`` and ``raw_rewards``
(unnormalised), and normalises ``terminal_obs`` too, so truncation bootstrapping sees the same
scale as the policy.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from rlox.stats import RunningStatsVec

__all__ = ["VecNormalize"]


class VecNormalize:
    """Normalise a vector env's observations and rewards with running statistics.

    Args:
        venv: the vector env to wrap; None to bind it later (``wrappers=[VecNormalize(...)]``:
            the algorithm calls ``wrap(venv)``).
        norm_obs: normalise observations.
        norm_reward: scale rewards by the std of the discounted return.
        clip_obs: clip normalised observations to ``[-clip_obs, clip_obs]``.
        clip_reward: clip scaled rewards to ``[-clip_reward, clip_reward]``.
        gamma: discount of the return whose std scales rewards (use the algorithm's gamma).
        epsilon: added to the variance before the square root.
        training: update the statistics on each step (False: frozen).
    """

    def __init__(self, venv: Any = None, *, norm_obs: bool = True, norm_reward: bool = True,
                 clip_obs: float = 10.0, clip_reward: float = 10.0, gamma: float = 0.99,
                 epsilon: float = 1e-8, training: bool = True) -> None:
        for name, v in (("clip_obs", clip_obs), ("clip_reward", clip_reward)):
            if isinstance(v, bool) or not (isinstance(v, (int, float, np.floating, np.integer))
                                           and math.isfinite(v) and v > 0):
                raise ValueError(f"VecNormalize {name} must be a finite number > 0, got {v!r}")
        if isinstance(gamma, bool) or not (isinstance(gamma, (int, float, np.floating)) and 0.0 <= gamma <= 1.0):
            raise ValueError(f"VecNormalize gamma must be in [0, 1], got {gamma!r}")
        if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon >= 0):
            raise ValueError(f"VecNormalize epsilon must be a finite number >= 0, got {epsilon!r}")
        self.norm_obs = bool(norm_obs)
        self.norm_reward = bool(norm_reward)
        self.clip_obs = float(clip_obs)
        self.clip_reward = float(clip_reward)
        self.gamma = float(gamma)
        self.epsilon = float(epsilon)
        self.training = bool(training)
        self.venv: Any = None
        self.obs_rms: RunningStatsVec | None = None
        self.ret_rms = RunningStatsVec(1)
        self._returns: np.ndarray | None = None
        if venv is not None:
            self.wrap(venv)

    # ------------------------------------------------------------------ binding
    def wrap(self, venv: Any) -> "VecNormalize":
        """Bind to ``venv`` (once); returns self, which is now the vector env to step."""
        if self.venv is not None and self.venv is not venv:
            raise RuntimeError("this VecNormalize already wraps another env; create one per env")
        space = getattr(venv, "single_observation_space", None)
        shape = getattr(space, "shape", None)
        if self.norm_obs and (shape is None or len(shape) == 0):
            raise TypeError(f"VecNormalize(norm_obs=True) needs a Box observation space, got {space}")
        self.venv = venv
        self.num_envs = venv.num_envs
        self.single_observation_space = venv.single_observation_space
        self.single_action_space = venv.single_action_space
        self.observation_space = getattr(venv, "observation_space", None)
        self.action_space = getattr(venv, "action_space", None)
        self.env_id = getattr(venv, "env_id", None)
        if self.norm_obs and self.obs_rms is None:
            self.obs_rms = RunningStatsVec(int(np.prod(shape)))
        elif self.obs_rms is not None and self.obs_rms.dim != int(np.prod(shape)):
            raise ValueError(f"this VecNormalize holds statistics of {self.obs_rms.dim} observation dims; "
                             f"the env's observations have {int(np.prod(shape))}")
        if self._returns is None or self._returns.size != self.num_envs:
            self._returns = np.zeros(self.num_envs, dtype=np.float64)
        return self

    def _require(self) -> None:
        if self.venv is None:
            raise RuntimeError("VecNormalize is not bound to an env; pass it in wrappers=[...] or "
                               "call wrap(venv)")

    # ------------------------------------------------------------------ normalisation
    def normalize_obs(self, obs: np.ndarray) -> np.ndarray:
        """``obs`` [*obs] or [B, *obs] normalised with the current statistics (no update)."""
        if not self.norm_obs or self.obs_rms is None:
            return obs
        arr = np.asarray(obs)
        flat = arr.reshape(-1, self.obs_rms.dim) if arr.ndim > 1 else arr.reshape(1, -1)
        out = self.obs_rms.normalize(flat.astype(np.float32, copy=False), clip=self.clip_obs,
                                     eps=self.epsilon)
        return out.reshape(arr.shape)

    def normalize_reward(self, rewards: np.ndarray) -> np.ndarray:
        """Rewards scaled by the return's std and clipped (no update)."""
        if not self.norm_reward:
            return rewards
        std = math.sqrt(float(self.ret_rms.var()[0]) + self.epsilon) if self.ret_rms.count() else 1.0
        return np.clip(rewards / std, -self.clip_reward, self.clip_reward)

    # ------------------------------------------------------------------ env interface
    def reset_all(self, seed: int | None = None) -> np.ndarray:
        self._require()
        obs = self.venv.reset_all(seed=seed)
        self._returns[:] = 0.0
        if self.norm_obs and self.training:
            self.obs_rms.update(obs.reshape(self.num_envs, -1))
        return self.normalize_obs(obs)

    def step_all(self, actions: Any) -> dict[str, Any]:
        self._require()
        out = dict(self.venv.step_all(actions))
        obs, rewards = out["obs"], out["rewards"]
        done = np.logical_or(out["terminated"], out["truncated"])
        out["raw_obs"], out["raw_rewards"] = obs, rewards
        if self.norm_obs:
            if self.training:
                # Statistics follow what the policy sees next (after an automatic reset, the
                # new episode's first observation), as SB3's VecNormalize does; terminal_obs
                # is normalised with them but not folded in.
                self.obs_rms.update(obs.reshape(self.num_envs, -1))
            out["obs"] = self.normalize_obs(obs)
            out["terminal_obs"] = self.normalize_obs(out["terminal_obs"])
        if self.norm_reward:
            self._returns = self._returns * self.gamma + rewards
            if self.training:
                self.ret_rms.update(self._returns.reshape(-1, 1))
            out["rewards"] = self.normalize_reward(rewards)
            self._returns[done] = 0.0
        return out

    def close(self) -> None:
        if self.venv is not None:
            self.venv.close()

    def __getattr__(self, name: str) -> Any:
        # Everything else (get_state, envs, ...) comes from the wrapped env.
        venv = self.__dict__.get("venv")
        if venv is None:
            raise AttributeError(name)
        return getattr(venv, name)

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Statistics and settings as arrays and numbers (saved with the model, no pickle)."""
        state: dict[str, Any] = {
            "norm_obs": self.norm_obs, "norm_reward": self.norm_reward, "clip_obs": self.clip_obs,
            "clip_reward": self.clip_reward, "gamma": self.gamma, "epsilon": self.epsilon,
            "ret_rms": self.ret_rms.state_dict(),
            "returns": None if self._returns is None else self._returns.copy(),
        }
        if self.obs_rms is not None:
            state["obs_rms"] = self.obs_rms.state_dict()
        return state

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> "VecNormalize":
        """An unbound VecNormalize with the settings and statistics of ``state_dict()`` (how a
        model trained with ``wrappers=[VecNormalize(...)]`` gets its statistics back on load)."""
        vn = cls(**{k: state[k] for k in ("norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon")
                    if k in state})
        vn.load_state_dict(state)
        return vn

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``; the observation size must match."""
        for key in ("norm_obs", "norm_reward", "clip_obs", "clip_reward", "gamma", "epsilon"):
            if key in state:
                setattr(self, key, type(getattr(self, key))(state[key]))
        self.ret_rms.load_state_dict(state["ret_rms"])
        if state.get("obs_rms") is not None:
            dim = int(np.asarray(state["obs_rms"]["mean"]).size)
            if self.obs_rms is None:
                self.obs_rms = RunningStatsVec(dim)
            elif self.obs_rms.dim != dim:
                raise ValueError(f"saved observation statistics have {dim} dims; this env's "
                                 f"observations have {self.obs_rms.dim}")
            self.obs_rms.load_state_dict(state["obs_rms"])
        returns = state.get("returns")
        if returns is not None and self._returns is not None and np.size(returns) == self._returns.size:
            self._returns = np.asarray(returns, dtype=np.float64).copy()

    def __repr__(self) -> str:
        return (f"VecNormalize(norm_obs={self.norm_obs}, norm_reward={self.norm_reward}, "
                f"clip_obs={self.clip_obs}, gamma={self.gamma}, training={self.training})")
