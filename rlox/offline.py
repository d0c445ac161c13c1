"""Offline RL datasets: a fixed set of transitions, sampled like a replay buffer.

``OfflineDatasetBuffer`` stores the dataset once in a ``ReplayBuffer`` (the Cython ring of
``ext/buffers.pyx``) sized to the dataset, so sampling is the same kernel. Loaders read
Minari datasets, D4RL-style HDF5 files and ``.npz`` archives. See docs/buffers.md.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from rlox._ext.buffers import ReplayBuffer

__all__ = ["OfflineDatasetBuffer"]

# Added to the observation std before dividing (TD3+BC uses 1e-3), so constant features stay finite.
NORMALIZE_EPS = 1e-3


def _flat(x, name: str) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype.kind not in "biuf":
        raise TypeError(f"{name} must hold real numbers (bool, int or float), got dtype {arr.dtype}")
    return arr.reshape(-1)


def _per_row(arr: np.ndarray, n: int, name: str) -> int:
    """Row width of a flattened ``[n, d]`` array, with an error when ``n`` does not divide it."""
    if n == 0 or arr.size % n != 0 or arr.size == 0:
        raise ValueError(f"{name} has {arr.size} values, which is not a whole multiple of the "
                         f"{n} transitions (len(rewards)); pass {name} as [n, dim] or its "
                         f"ravel() with n * dim values")
    return arr.size // n


class OfflineDatasetBuffer:
    """A static dataset of transitions for offline RL (TD3+BC, IQL, CQL, BC).

    ``OfflineDatasetBuffer(obs, next_obs, actions, rewards, terminated, truncated,
    normalize=False, seed=None)``: ``rewards``, ``terminated``, ``truncated`` are ``[N]``;
    ``obs``/``next_obs`` ``[N, obs_dim]`` and ``actions`` ``[N, act_dim]``, or their flattened
    ``ravel()`` (the widths are inferred from N = len(rewards), with an error when N does not
    divide the length). Transitions are in time order; an episode ends at a terminated or
    truncated step (a trailing run without either counts as one more, unfinished, episode).

    ``normalize=True`` stores observations as ``(obs - obs_mean) / obs_std`` (statistics of the
    dataset's ``obs``; ``obs_std`` includes +1e-3); use ``normalize_obs(x)`` on observations at
    evaluation time. ``sample(batch_size, seed=None)`` returns the ReplayBuffer dict of arrays.
    ``stats()`` returns ``n_transitions``, ``n_episodes``, ``mean_return``, ``std_return``,
    ``min_return``, ``max_return``, ``obs_mean`` and ``obs_std``.

    Loaders: ``from_minari(dataset_id or dataset)``, ``from_d4rl_hdf5(path)``, ``from_npz(path)``.
    """

    def __init__(self, obs, next_obs, actions, rewards, terminated, truncated, normalize=False,
                 seed=None):
        rew = _flat(rewards, "rewards")
        n = rew.shape[0]
        if n == 0:
            raise ValueError("an OfflineDatasetBuffer needs at least one transition")
        obs_a, next_a, act_a = _flat(obs, "obs"), _flat(next_obs, "next_obs"), _flat(actions, "actions")
        self.obs_dim = _per_row(obs_a, n, "obs")
        if next_a.size != obs_a.size:
            raise ValueError(f"next_obs has {next_a.size} values, obs has {obs_a.size}; they "
                             f"must match ({n} transitions of {self.obs_dim})")
        self.act_dim = _per_row(act_a, n, "actions")
        term = _flat(terminated, "terminated")
        trunc = _flat(truncated, "truncated")
        for name, arr in (("terminated", term), ("truncated", trunc)):
            if arr.shape[0] != n:
                raise ValueError(f"{name} has {arr.shape[0]} entries, expected {n} (len(rewards))")
        if not np.isfinite(rew).all():
            raise ValueError("rewards must be finite")
        self.normalize = bool(normalize)
        obs2 = obs_a.reshape(n, self.obs_dim)
        next2 = next_a.reshape(n, self.obs_dim)
        raw64 = obs2.astype(np.float64)
        self.obs_mean = raw64.mean(axis=0).astype(np.float32)
        self.obs_std = (raw64.std(axis=0) + NORMALIZE_EPS).astype(np.float32)
        image = obs2.dtype == np.uint8 and not self.normalize
        dtype = np.uint8 if image else np.float32
        if self.normalize:
            obs2, next2 = self.normalize_obs(obs2), self.normalize_obs(next2)
        self._buf = ReplayBuffer(n, self.obs_dim, self.act_dim, obs_dtype=dtype, seed=seed)
        self._buf.push_batch(obs2, act_a.reshape(n, self.act_dim), rew, term, trunc, next2)
        self._stats = self._episode_stats(rew.astype(np.float64), term != 0, trunc != 0)

    # ------------------------------------------------------------------ access
    def __len__(self) -> int:
        return len(self._buf)

    def __repr__(self) -> str:
        return (f"OfflineDatasetBuffer(n_transitions={len(self)}, obs_dim={self.obs_dim}, "
                f"act_dim={self.act_dim}, normalize={self.normalize})")

    def sample(self, batch_size, seed=None) -> dict:
        """``batch_size`` transitions uniformly with replacement: ``obs``, ``next_obs``,
        ``actions``, ``rewards``, ``terminated``, ``truncated``, ``indices``."""
        return self._buf.sample(batch_size, seed)

    def gather(self, indices, fields=None) -> dict:
        """The transitions at ``indices`` (0 .. N-1, in dataset order)."""
        return self._buf.gather(indices, fields)

    def normalize_obs(self, obs) -> np.ndarray:
        """``(obs - obs_mean) / obs_std`` as float32, for any ``[..., obs_dim]`` array."""
        x = np.asarray(obs, dtype=np.float32)
        return ((x - self.obs_mean) / self.obs_std).astype(np.float32, copy=False)

    def stats(self) -> dict:
        return dict(self._stats, obs_mean=self.obs_mean.copy(), obs_std=self.obs_std.copy())

    @staticmethod
    def _episode_stats(rew: np.ndarray, term: np.ndarray, trunc: np.ndarray) -> dict:
        bounds = np.flatnonzero(term | trunc) + 1          # one past each episode's last step
        if bounds.size == 0 or bounds[-1] != rew.shape[0]:
            bounds = np.append(bounds, rew.shape[0])       # an unfinished final episode
        csum = np.concatenate([[0.0], np.cumsum(rew)])
        starts = np.concatenate([[0], bounds[:-1]]).astype(np.int64)
        returns = csum[bounds] - csum[starts]
        return {"n_transitions": int(rew.shape[0]), "n_episodes": int(returns.shape[0]),
                "mean_return": float(returns.mean()), "std_return": float(returns.std()),
                "min_return": float(returns.min()), "max_return": float(returns.max())}

    # ------------------------------------------------------------------ loaders
    @classmethod
    def from_minari(cls, dataset, normalize=False, seed=None) -> "OfflineDatasetBuffer":
        """Load a Minari dataset (its id, e.g. ``"mujoco/hopper/expert-v0"``, or a
        ``MinariDataset``). Needs ``pip install 'rlox[offline]'``. Only a dataset already on
        disk is used (``minari.load_dataset(id)``); download it first with
        ``minari download <id>``. Each episode of T steps gives T transitions, with
        ``next_obs`` the following observation."""
        try:
            import minari
        except ImportError as e:
            raise ImportError("from_minari needs Minari: pip install 'rlox[offline]'") from e
        ds = minari.load_dataset(dataset) if isinstance(dataset, (str, os.PathLike)) else dataset
        parts = {k: [] for k in ("obs", "next_obs", "actions", "rewards", "terminated", "truncated")}
        for ep in ds.iterate_episodes():
            o = np.asarray(ep.observations)
            if o.dtype == object or isinstance(ep.observations, dict):
                raise TypeError("from_minari supports Box observations only (got a dict/tuple "
                                "observation space); flatten them first")
            t = len(ep.rewards)
            parts["obs"].append(o[:t].reshape(t, -1))
            parts["next_obs"].append(o[1:t + 1].reshape(t, -1))
            parts["actions"].append(np.asarray(ep.actions).reshape(t, -1))
            parts["rewards"].append(np.asarray(ep.rewards, dtype=np.float64))
            parts["terminated"].append(np.asarray(ep.terminations, dtype=bool))
            parts["truncated"].append(np.asarray(ep.truncations, dtype=bool))
        if not parts["rewards"]:
            raise ValueError(f"Minari dataset {dataset!r} has no episodes")
        data = {k: np.concatenate(v) for k, v in parts.items()}
        return cls(data["obs"], data["next_obs"], data["actions"], data["rewards"],
                   data["terminated"], data["truncated"], normalize=normalize, seed=seed)

    @classmethod
    def from_d4rl_hdf5(cls, path, normalize=False, seed=None) -> "OfflineDatasetBuffer":
        """Load a D4RL-format HDF5 file: ``observations``, ``actions``, ``rewards``,
        ``terminals``, ``timeouts`` and, when present, ``next_observations``. Without
        ``next_observations`` the next row's observation is used and steps whose successor is
        unknown (timeouts and the last row) are dropped, as D4RL's ``qlearning_dataset`` does.
        Needs h5py (``pip install 'rlox[offline]'``)."""
        try:
            import h5py
        except ImportError as e:
            raise ImportError("from_d4rl_hdf5 needs h5py: pip install 'rlox[offline]'") from e
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no HDF5 file at {path}")
        with h5py.File(path, "r") as f:
            missing = [k for k in ("observations", "actions", "rewards", "terminals") if k not in f]
            if missing:
                raise KeyError(f"{path} lacks the D4RL keys {missing}")
            obs = np.asarray(f["observations"])
            act = np.asarray(f["actions"])
            rew = np.asarray(f["rewards"]).reshape(-1)
            term = np.asarray(f["terminals"]).reshape(-1).astype(bool)
            timeouts = (np.asarray(f["timeouts"]).reshape(-1).astype(bool) if "timeouts" in f
                        else np.zeros_like(term))
            nxt = np.asarray(f["next_observations"]) if "next_observations" in f else None
        n = rew.shape[0]
        obs = obs.reshape(n, -1)
        if nxt is None:
            keep = ~timeouts
            keep[-1] = False
            nxt = np.empty_like(obs)
            nxt[:-1] = obs[1:]
            idx = np.flatnonzero(keep)
            # the step before a dropped timeout step now ends its episode, and its successor
            # (the timeout step's observation) is known: it is truncated, not terminated
            trunc = np.zeros(n, dtype=bool)
            trunc[:-1] = timeouts[1:] & ~term[:-1]
            obs, nxt, act, rew, term, trunc = (obs[idx], nxt[idx], act.reshape(n, -1)[idx],
                                                rew[idx], term[idx], trunc[idx])
        else:
            trunc = timeouts
        return cls(obs, nxt, act, rew, term, trunc, normalize=normalize, seed=seed)

    @classmethod
    def from_npz(cls, path, normalize=False, seed=None) -> "OfflineDatasetBuffer":
        """Load a ``.npz`` with ``obs``/``observations``, ``next_obs``/``next_observations``,
        ``actions``, ``rewards``, ``terminated``/``terminals`` and ``truncated``/``timeouts``
        (all zeros when absent). Nothing is unpickled."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"no .npz file at {path}")
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}

        def pick(*names, required=True):
            for name in names:
                if name in data:
                    return data[name]
            if required:
                raise KeyError(f"{path} has none of the keys {names} (it has {sorted(data)})")
            return None

        rew = pick("rewards")
        trunc = pick("truncated", "timeouts", required=False)
        return cls(pick("obs", "observations"), pick("next_obs", "next_observations"),
                   pick("actions"), rew, pick("terminated", "terminals"),
                   np.zeros(np.asarray(rew).reshape(-1).shape[0], bool) if trunc is None else trunc,
                   normalize=normalize, seed=seed)
