"""Sequence replay for world models: one ring per env of DreamerV3's step records.

A step record is ``(obs_t, prev_action a_{t-1}, reward r_{t-1 -> t}, is_first_t, is_terminal_t)``:
an episode's reset observation is its own record (``is_first``, zero action and reward), and an
episode's last observation is recorded too (``is_terminal`` when the env terminated, not when it
was truncated). Sampled windows may cross episode boundaries; the RSSM resets where ``is_first``.

    replay = SequenceReplay(capacity=1_000_000, n_envs=4, obs_shape=(3, 64, 64), obs_dtype=np.uint8, act_dim=1)
    replay.add(obs [4, 3, 64, 64], prev_action [4, 1], reward [4], is_first [4], is_terminal [4])
    batch = replay.sample(batch_size=16, length=64, rng=np.random.default_rng(0))   # dict of [16, 64, ...]

Observations keep their dtype: uint8 images cost ``C*H*W`` bytes a step (64x64 RGB: 12 KiB;
1M steps: 12 GiB), float vectors ``4 * dim`` bytes.
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["SequenceReplay"]


class SequenceReplay:
    """Per-env ring buffers of step records with uniform sampling of fixed-length windows.

    Args:
        capacity: step records held in all (split evenly across the envs).
        n_envs: number of parallel envs (each gets its own ring so windows stay contiguous in time).
        obs_shape, obs_dtype: one observation's shape and storage dtype (uint8 for images).
        act_dim: action width (discrete actions are stored one-hot).
    """

    def __init__(self, capacity: int, n_envs: int, obs_shape: tuple[int, ...], obs_dtype: Any = np.float32,
                 act_dim: int = 1) -> None:
        for name, v in (("capacity", capacity), ("n_envs", n_envs), ("act_dim", act_dim)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"SequenceReplay: {name} must be an int >= 1, got {v!r}")
        self.n_envs = int(n_envs)
        self.per_env = max(1, int(capacity) // self.n_envs)
        self.obs_shape, self.obs_dtype, self.act_dim = tuple(obs_shape), np.dtype(obs_dtype), int(act_dim)
        E, C = self.n_envs, self.per_env
        self.obs = np.zeros((E, C, *self.obs_shape), dtype=self.obs_dtype)
        self.prev_action = np.zeros((E, C, self.act_dim), dtype=np.float32)
        self.reward = np.zeros((E, C), dtype=np.float32)
        self.is_first = np.zeros((E, C), dtype=bool)
        self.is_terminal = np.zeros((E, C), dtype=bool)
        self.pos = np.zeros(E, dtype=np.int64)     # each env's next slot
        self.sizes = np.zeros(E, dtype=np.int64)   # each env's records

    def __len__(self) -> int:
        return int(self.sizes.sum())

    def add(self, obs: np.ndarray, prev_action: np.ndarray, reward: np.ndarray, is_first: np.ndarray,
            is_terminal: np.ndarray, env_ids: np.ndarray | None = None) -> None:
        """One record for each env in ``env_ids`` (default: all), arrays ``[len(env_ids), ...]``.
        The collector adds the reset records of finished episodes for those envs only."""
        envs = np.arange(self.n_envs) if env_ids is None else np.asarray(env_ids, dtype=np.int64).reshape(-1)
        obs = np.asarray(obs)
        if obs.shape != (len(envs), *self.obs_shape):
            raise ValueError(f"SequenceReplay.add: obs has shape {obs.shape}, expected "
                             f"{(len(envs), *self.obs_shape)}")
        slots = self.pos[envs]
        self.obs[envs, slots] = obs
        self.prev_action[envs, slots] = np.asarray(prev_action, dtype=np.float32).reshape(len(envs), self.act_dim)
        self.reward[envs, slots] = reward
        self.is_first[envs, slots] = is_first
        self.is_terminal[envs, slots] = is_terminal
        self.pos[envs] = (slots + 1) % self.per_env
        self.sizes[envs] = np.minimum(self.sizes[envs] + 1, self.per_env)

    def can_sample(self, length: int) -> bool:
        return bool((self.sizes >= length).any())

    def sample(self, batch_size: int, length: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
        """``batch_size`` windows of ``length`` consecutive records of one env each: a dict of
        ``[B, T, ...]`` arrays. The first record of every window is marked ``is_first`` (the
        model starts from a fresh state there, as in DreamerV3)."""
        ready = np.flatnonzero(self.sizes >= length)
        if ready.size == 0:
            raise ValueError(f"SequenceReplay.sample: no env holds length={length} records yet "
                             f"(most: {int(self.sizes.max())})")
        envs = ready[rng.integers(0, ready.size, batch_size)]
        sizes = self.sizes[envs]
        # Windows must not wrap over the write position: offsets counted from each env's oldest record.
        oldest = np.where(sizes == self.per_env, self.pos[envs], 0)
        starts = (rng.random(batch_size) * (sizes - length + 1)).astype(np.int64)
        slots = (oldest[:, None] + starts[:, None] + np.arange(length)[None, :]) % self.per_env     # [B, T]
        e = envs[:, None]
        out = {"obs": self.obs[e, slots], "prev_action": self.prev_action[e, slots],
               "reward": self.reward[e, slots], "is_first": self.is_first[e, slots].copy(),
               "is_terminal": self.is_terminal[e, slots]}
        out["is_first"][:, 0] = True
        return out

    _FIELDS = ("obs", "prev_action", "reward", "is_first", "is_terminal")

    def state_dict(self) -> dict[str, Any]:
        """The arrays (as stored) and each env's position and size."""
        n = int(self.sizes.max())       # only the filled part (a 1M-step image buffer is mostly empty early)
        out = {name: getattr(self, name)[:, :n] for name in self._FIELDS}
        out.update(pos=self.pos.copy(), sizes=self.sizes.copy())
        return out

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        e, n = np.asarray(state["reward"]).shape
        if e != self.n_envs or n > self.per_env:
            raise ValueError(f"SequenceReplay: the saved replay holds {n} records for each of {e} envs; this "
                             f"one has room for {self.per_env} for {self.n_envs} envs; load with the same "
                             f"buffer_size and n_envs")
        for name in self._FIELDS:
            getattr(self, name)[:, :n] = np.asarray(state[name])
        self.pos[...] = np.asarray(state["pos"])
        self.sizes[...] = np.asarray(state["sizes"])
