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

The other structured spaces get the same treatment (``FlattenStructuredObservation``, ``ObsLayout``):
Discrete and MultiDiscrete observations (FrozenLake, Taxi, CliffWalking) become one-hot vectors,
MultiBinary 0/1 floats, and a Tuple (Blackjack) the concatenation of its parts, as SB3's
``preprocess_obs`` does for the first three. ``predict`` then takes the raw observation (an int,
an int array, a tuple) or a batch of them, and the flat float vector as well.
"""
from __future__ import annotations

from typing import Any, Mapping

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rlox.inference import RawObservationEncoder

__all__ = ["DictLayout", "FlattenDictObservation", "find_dict_layout", "ObsLayout",
           "FlattenStructuredObservation", "flatten_structured", "find_obs_layout", "raw_space_spec"]

_SUPPORTED = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def _single_ndim(spec: Mapping[str, Any]) -> int:
    """The number of dimensions of one (unbatched) value of a part (``raw_space_spec``)."""
    return RawObservationEncoder.part_ndim(spec)


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
        self._specs: dict[str, dict[str, Any]] = {}      # each key's encoding (RawObservationEncoder)
        start = 0
        for key, sub in space.spaces.items():
            if not isinstance(sub, _SUPPORTED):
                hint = (" tokenise the text first (rlox.wrappers.language.LanguageWrapper(..., tokenizer=...))"
                        if isinstance(sub, spaces.Text) else "")
                raise ValueError(f"observation key {key!r} has space {sub}; Dict observations may hold Box, "
                                 f"Discrete, MultiDiscrete and MultiBinary spaces;{hint or ' flatten it yourself'}")
            self._specs[key] = raw_space_spec(sub)
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
        batched = np.asarray(obs[first]).ndim == _single_ndim(self._specs[first]) + 1
        parts = []
        for key in self.keys:
            v = np.asarray(obs[key])
            parts.append(RawObservationEncoder.encode_part(self._specs[key], v, v.shape[0] if batched else 1,
                                                           f"observation key {key!r}", batched))
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


def find_dict_layout(obj: Any) -> DictLayout | None:
    """The ``DictLayout`` of an algorithm's, collector's or vector env's Dict observations, or None."""
    for cand in (obj, getattr(obj, "collector", None), getattr(obj, "env", None)):
        layout = getattr(cand, "dict_layout", None) if cand is not None else None
        if isinstance(layout, DictLayout):
            return layout
    return None


# ------------------------------------------------------------------ other structured spaces
_STRUCTURED = (spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary, spaces.Tuple)


class ObsLayout:
    """How a Discrete, MultiDiscrete, MultiBinary or Tuple observation space maps to one float32
    vector (one-hot for the integer spaces, 0/1 for MultiBinary, parts concatenated for a Tuple
    of Box/Discrete/MultiDiscrete/MultiBinary).

    Attributes: space (the original space), flat_dim, flat_space (float32 Box).
    """

    def __init__(self, space: spaces.Space) -> None:
        if not isinstance(space, _STRUCTURED):
            raise TypeError(f"ObsLayout needs a Discrete, MultiDiscrete, MultiBinary or Tuple space, got {space}")
        parts = space.spaces if isinstance(space, spaces.Tuple) else (space,)
        for i, sub in enumerate(parts):
            if not isinstance(sub, _SUPPORTED):
                raise ValueError(f"observation part {i} has space {sub}; Tuple observations may hold Box, "
                                 f"Discrete, MultiDiscrete and MultiBinary spaces; flatten it yourself")
        self.space = space
        self.parts = tuple(parts)
        self._encoder = RawObservationEncoder(raw_space_spec(space))   # the encoding, shared with deployment
        self.flat_dim = self._encoder.flat_dim
        flat = [spaces.flatten_space(p) for p in self.parts]
        low = np.concatenate([np.asarray(f.low, np.float32).reshape(-1) for f in flat])
        high = np.concatenate([np.asarray(f.high, np.float32).reshape(-1) for f in flat])
        self.flat_space = spaces.Box(low, high, (self.flat_dim,), np.float32)

    def is_raw(self, obs: Any) -> bool:
        """Whether ``obs`` is in the space's own form (ints, tuples) rather than already flat floats."""
        return self._encoder.is_raw(obs)

    def flatten(self, obs: Any) -> np.ndarray:
        """One raw observation -> float32 ``[flat_dim]``; a batch (Discrete: ints ``[B]``; Multi*:
        ``[B, ...]``; Tuple: a tuple of batched parts) -> ``[B, flat_dim]``."""
        return self._encoder.flatten(obs)

    def __repr__(self) -> str:
        return f"ObsLayout({self.space} -> {self.flat_dim} floats)"


def raw_space_spec(space: spaces.Space) -> dict[str, Any]:
    """A plain (YAML / JSON) description of an observation space ``ObsLayout`` takes: what
    ``rlox.inference.RawObservationEncoder`` encodes from, and the inference artifacts record as
    ``raw_observation_space``. ``label`` is the space's repr, for messages."""
    if isinstance(space, spaces.Discrete):
        out: dict[str, Any] = {"type": "discrete", "n": int(space.n), "start": int(space.start)}
    elif isinstance(space, spaces.MultiDiscrete):
        out = {"type": "multi_discrete", "nvec": np.asarray(space.nvec).tolist(),
               "start": np.asarray(space.start).tolist()}
    elif isinstance(space, spaces.MultiBinary):
        out = {"type": "multi_binary", "shape": [int(s) for s in space.shape]}
    elif isinstance(space, spaces.Box):
        out = {"type": "box", "shape": [int(s) for s in space.shape]}
    elif isinstance(space, spaces.Tuple):
        out = {"type": "tuple", "spaces": [raw_space_spec(p) for p in space.spaces]}
    else:
        raise TypeError(f"no description for observation space {space}")
    out["label"] = str(space)
    return out


class FlattenStructuredObservation(gym.ObservationWrapper):
    """A Discrete / MultiDiscrete / MultiBinary / Tuple observation as one float32 vector
    (``ObsLayout``); ``obs_layout`` and ``raw_observation_space`` keep the original."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.obs_layout = ObsLayout(env.observation_space)
        self.raw_observation_space = env.observation_space
        self.observation_space = self.obs_layout.flat_space

    def observation(self, observation: Any) -> np.ndarray:
        return self.obs_layout.flatten(observation)


def missing_env_attributes(obj: Any) -> list[str]:
    """What ``obj`` lacks of a gymnasium env (checked by duck typing, as gymnasium's vector envs do)."""
    return [a for a in ("observation_space", "action_space", "reset", "step") if not hasattr(obj, a)]


def flatten_structured(env: gym.Env) -> gym.Env:
    """``env`` with its observations made one float vector where they are not already a Box:
    ``FlattenDictObservation`` for a Dict space, ``FlattenStructuredObservation`` for Discrete,
    MultiDiscrete, MultiBinary and Tuple spaces; Box envs are returned as they are."""
    missing = missing_env_attributes(env)
    if missing:
        raise TypeError(f"expected a gymnasium env, got {type(env).__name__} (no {', '.join(missing)}); "
                        "an env factory must return an env, e.g. lambda: gym.make('CartPole-v1')")
    if isinstance(env.observation_space, spaces.Dict):
        return FlattenDictObservation(env)
    if isinstance(env.observation_space, _STRUCTURED):
        return FlattenStructuredObservation(env)
    return env


def find_obs_layout(obj: Any) -> ObsLayout | None:
    """The ``ObsLayout`` of an algorithm's, collector's or vector env's observations, or None."""
    for cand in (obj, getattr(obj, "collector", None), getattr(obj, "env", None)):
        layout = getattr(cand, "obs_layout", None) if cand is not None else None
        if isinstance(layout, ObsLayout):
            return layout
    return None
