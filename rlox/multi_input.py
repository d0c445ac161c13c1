"""Dict observation spaces (goal envs, language envs) for every algorithm: the multi-input extractor.

An env whose observation space is a ``gymnasium.spaces.Dict`` is wrapped, where the vector envs
are made (``rlox.envs.GymVecEnv``, the off-policy collector's single env), in
``FlattenDictObservation``: each key's value is flattened (Box: reshaped to a vector; Discrete and
MultiDiscrete: one-hot; MultiBinary: 0/1 floats) and the keys are concatenated in the space's
order into one float32 vector. That is SB3's ``MultiInputPolicy`` / ``CombinedExtractor`` for
vector inputs (flatten each key, concatenate), done once at the env boundary, so the replay and
rollout storage, the Cython kernels and the shared MLP policies are used unchanged, and so is
every algorithm (PPO, A2C, SAC, TD3, DQN, ...).

``DictLayout`` keeps where each key lives in the flat vector (``layout.slices["desired_goal"]``),
which hindsight relabelling (``rlox.her``) uses to rewrite goals in place, and ``predict``
accepts the Dict observations themselves (``algo.predict({"observation": ..., ...})``).
Text spaces must be tokenised first (``LanguageWrapper(..., tokenizer=...)``).
"""
from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["DictLayout", "FlattenDictObservation", "flatten_if_dict", "find_dict_layout"]

_SUPPORTED = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class DictLayout:
    """Where each key of a Dict observation space lives in the flat observation vector.

    Attributes:
        space: the Dict space; keys: its keys, in order; slices: key -> slice of the flat vector;
        flat_dim: the flat vector's length; flat_space: the flat Box space.
    """

    def __init__(self, space: spaces.Dict) -> None:
        if not isinstance(space, spaces.Dict):
            raise TypeError(f"DictLayout needs a gymnasium.spaces.Dict, got {space}")
        self.space = space
        self.keys = list(space.spaces)
        self.slices: dict[str, slice] = {}
        start = 0
        for key, sub in space.spaces.items():
            if not isinstance(sub, _SUPPORTED):
                hint = (" tokenise the text first (rlox.wrappers.language.LanguageWrapper(..., tokenizer=...))"
                        if isinstance(sub, spaces.Text) else "")
                raise ValueError(f"observation key {key!r} has space {sub}; Dict observations may hold Box, "
                                 f"Discrete, MultiDiscrete and MultiBinary spaces;{hint or ' flatten it yourself'}")
            dim = int(spaces.flatdim(sub))
            self.slices[key] = slice(start, start + dim)
            start += dim
        self.flat_dim = start
        self.flat_space = spaces.flatten_space(space)

    def flatten(self, obs: Mapping[str, Any]) -> np.ndarray:
        """One Dict observation -> float32 ``[flat_dim]``, or a batch (values ``[B, ...]``) ->
        ``[B, flat_dim]``."""
        missing = [k for k in self.keys if k not in obs]
        if missing:
            raise ValueError(f"the observation lacks keys {missing}; expected keys {self.keys}")
        first = self.keys[0]
        sub0 = self.space.spaces[first]
        v0 = np.asarray(obs[first])
        single_ndim = len(sub0.shape) if isinstance(sub0, (spaces.Box, spaces.MultiBinary, spaces.MultiDiscrete)) \
            else 0
        batched = v0.ndim == single_ndim + 1
        parts = []
        for key in self.keys:
            sub, v = self.space.spaces[key], np.asarray(obs[key])
            n = v.shape[0] if batched else 1
            if isinstance(sub, spaces.Discrete):
                idx = v.reshape(n).astype(np.int64) - int(sub.start)
                if (idx < 0).any() or (idx >= sub.n).any():
                    raise ValueError(f"observation key {key!r} holds {v.reshape(-1)[:4]}, outside {sub}")
                part = np.zeros((n, int(sub.n)), np.float32)
                part[np.arange(n), idx] = 1.0
            elif isinstance(sub, spaces.MultiDiscrete):
                nvec = np.asarray(sub.nvec).reshape(-1)
                vals = v.reshape(n, -1).astype(np.int64) - np.asarray(sub.start).reshape(-1)
                offsets = np.concatenate([[0], np.cumsum(nvec)[:-1]])
                part = np.zeros((n, int(nvec.sum())), np.float32)
                part[np.arange(n)[:, None], offsets + vals] = 1.0
            else:
                want = int(np.prod(sub.shape))
                if v.size != n * want:
                    raise ValueError(f"observation key {key!r} has shape {v.shape}, expected {sub.shape}"
                                     f"{' (or a batch [B, ...])' if not batched else ' per row'}")
                part = v.reshape(n, want).astype(np.float32, copy=False)
            parts.append(part)
        flat = np.concatenate(parts, axis=1)
        return flat if batched else flat[0]

    def unflatten(self, flat: np.ndarray) -> dict[str, np.ndarray]:
        """The Box keys' values of ``flat`` [..., flat_dim] (one-hot keys are returned as they are)."""
        flat = np.asarray(flat)
        out = {}
        for key, sl in self.slices.items():
            sub = self.space.spaces[key]
            part = flat[..., sl]
            if isinstance(sub, spaces.Box):
                part = part.reshape(*flat.shape[:-1], *sub.shape)
            out[key] = part
        return out

    def __repr__(self) -> str:
        return f"DictLayout({', '.join(f'{k}[{s.start}:{s.stop}]' for k, s in self.slices.items())})"


class FlattenDictObservation(gym.ObservationWrapper):
    """Flattens a Dict observation into float32 ``[flat_dim]`` (see the module docstring).

    ``layout`` and ``dict_observation_space`` keep the structure; ``compute_reward`` of a goal env
    underneath stays reachable (``env.get_wrapper_attr("compute_reward")``).
    """

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.layout = DictLayout(env.observation_space)
        self.dict_observation_space = env.observation_space
        self.observation_space = spaces.Box(-np.inf, np.inf, (self.layout.flat_dim,), np.float32)

    def observation(self, observation: Mapping[str, Any]) -> np.ndarray:
        return self.layout.flatten(observation)


def flatten_if_dict(env: gym.Env) -> gym.Env:
    """``env`` wrapped in ``FlattenDictObservation`` when its observations are a Dict."""
    if isinstance(env.observation_space, spaces.Dict):
        return FlattenDictObservation(env)
    return env


def find_dict_layout(obj: Any) -> DictLayout | None:
    """The ``DictLayout`` of an algorithm's, collector's or vector env's Dict observations, or None."""
    for cand in (obj, getattr(obj, "collector", None), getattr(obj, "env", None)):
        layout = getattr(cand, "dict_layout", None) if cand is not None else None
        if isinstance(layout, DictLayout):
            return layout
    return None
