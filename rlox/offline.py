"""Offline RL datasets: a fixed set of transitions, sampled like a replay buffer.

``OfflineDatasetBuffer`` stores the dataset once in a ``ReplayBuffer`` (the Cython ring of
``ext/buffers.pyx``) sized to the dataset, so sampling is the same kernel. Loaders read
Minari datasets, D4RL-style HDF5 files and ``.npz`` archives. See docs/buffers.md.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable

import numpy as np

from rlox._ext.buffers import ReplayBuffer

__all__ = ["OfflineDatasetBuffer", "resolve_dataset", "collect_dataset", "normalized_score", "REFERENCE_SCORES",
           "pendulum_swingup_policy"]

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


def _check_finite(arr2d: np.ndarray, name: str) -> None:
    """A ValueError naming ``name`` and the first transition holding a NaN or inf."""
    if arr2d.dtype.kind != "f":
        return
    bad = ~np.isfinite(arr2d)
    if bad.any():
        row = int(np.flatnonzero(bad.any(axis=1))[0])
        col = int(np.flatnonzero(bad[row])[0])
        raise ValueError(f"{name} holds a non-finite value ({arr2d[row, col]}) at transition {row}"
                         + (f", column {col}" if arr2d.shape[1] > 1 else "")
                         + f" ({int(bad.any(axis=1).sum())} transitions affected); drop or repair those rows")


def _no_flags_message(where: str, keys: list) -> str:
    return (f"{where} has no episode-end flags (none of 'terminated'/'terminals' or 'truncated'/'timeouts'; "
            f"it has {keys}): without them every transition would bootstrap across episode boundaries. "
            f"Add a boolean 'terminals' array (True where the episode ended in a terminal state) and, for "
            f"time-limit ends, a 'timeouts' array")


def _load_minari(minari, dataset_id: str):
    """``minari.load_dataset`` of a dataset already on this machine; a clear error otherwise
    (nothing is downloaded)."""
    local = minari.list_local_datasets()
    if dataset_id not in local:
        root = os.environ.get("MINARI_DATASETS_PATH", str(Path.home() / ".minari" / "datasets"))
        raise ValueError(f"Minari dataset {dataset_id!r} is not installed on this machine (looked in {root}; "
                         f"local datasets: {sorted(local) or 'none'}). Create it with "
                         f"rlox.offline.collect_dataset(policy, env_id, n_steps, minari_id={dataset_id!r}), "
                         f"or download it with `minari download {dataset_id}` (rlox never downloads at run time)")
    return minari.load_dataset(dataset_id)


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
            raise ValueError("the dataset is empty: an OfflineDatasetBuffer needs at least one transition; "
                             "check the file or collect data first with rlox.offline.collect_dataset")
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
        _check_finite(rew.reshape(n, 1), "rewards")
        for name, arr in (("obs", obs_a), ("next_obs", next_a), ("actions", act_a)):
            _check_finite(arr.reshape(n, -1), name)
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

    def arrays(self) -> dict:
        """The whole dataset in time order as NumPy arrays, with observations as given (not
        normalised): ``observations``, ``next_observations``, ``actions``, ``rewards``,
        ``terminals``, ``timeouts`` (the D4RL names)."""
        b = self._buf.gather(np.arange(len(self), dtype=np.int64))
        obs, nxt = b["obs"], b["next_obs"]
        if self.normalize:
            obs, nxt = obs * self.obs_std + self.obs_mean, nxt * self.obs_std + self.obs_mean
        return {"observations": obs, "next_observations": nxt, "actions": b["actions"],
                "rewards": b["rewards"], "terminals": b["terminated"].astype(bool),
                "timeouts": b["truncated"].astype(bool)}

    def save_npz(self, path) -> Path:
        """Write ``arrays()`` to ``path`` (``np.savez``, no pickle; ``from_npz`` reads it back)."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp.npz")
        try:
            np.savez(tmp, **self.arrays())
            os.replace(tmp, path)
        finally:
            if tmp.exists():
                tmp.unlink()
        return path

    # ------------------------------------------------------------------ loaders
    @classmethod
    def from_replay_buffer(cls, buffer, normalize=False, seed=None) -> "OfflineDatasetBuffer":
        """A dataset from the contents of an ``rlox.ReplayBuffer`` (e.g. ``algo.buffer`` after
        training: D4RL's "medium-replay" level), oldest transition first."""
        n = len(buffer)
        if n == 0:
            raise ValueError("the replay buffer is empty (0 transitions); train or collect before "
                             "turning it into a dataset")
        cap, pos = int(buffer.capacity), int(buffer.pos)
        order = np.arange(n, dtype=np.int64) if n < cap else (np.arange(cap, dtype=np.int64) + pos) % cap
        b = buffer.gather(order)
        return cls(b["obs"].reshape(n, -1), b["next_obs"].reshape(n, -1), b["actions"].reshape(n, -1),
                   b["rewards"], b["terminated"], b["truncated"], normalize=normalize, seed=seed)

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
        ds = _load_minari(minari, str(dataset)) if isinstance(dataset, (str, os.PathLike)) else dataset
        if not callable(getattr(ds, "iterate_episodes", None)):
            raise TypeError(f"from_minari needs a Minari dataset id or a minari.MinariDataset, got "
                            f"{type(dataset).__name__}")
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
            missing = [k for k in ("observations", "actions", "rewards") if k not in f]
            if missing:
                raise KeyError(f"{path} lacks the D4RL keys {missing} (it has {sorted(f.keys())})")
            if "terminals" not in f and "timeouts" not in f:
                raise ValueError(_no_flags_message(str(path), sorted(f.keys())))
            obs = np.asarray(f["observations"])
            act = np.asarray(f["actions"])
            rew = np.asarray(f["rewards"]).reshape(-1)
            term = (np.asarray(f["terminals"]).reshape(-1).astype(bool) if "terminals" in f
                    else np.zeros(rew.shape[0], bool))
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
        term = pick("terminated", "terminals", required=False)
        trunc = pick("truncated", "timeouts", required=False)
        if term is None and trunc is None:
            raise ValueError(_no_flags_message(str(path), sorted(data)))
        zeros = np.zeros(np.asarray(rew).reshape(-1).shape[0], bool)
        return cls(pick("obs", "observations"), pick("next_obs", "next_observations"),
                   pick("actions"), rew, zeros if term is None else term,
                   zeros if trunc is None else trunc, normalize=normalize, seed=seed)


# ---------------------------------------------------------------------- resolving ``dataset=``
def resolve_dataset(dataset: Any, normalize: bool = False, seed: int | None = None) -> OfflineDatasetBuffer:
    """What the offline algorithms accept as ``dataset=``, as an ``OfflineDatasetBuffer``:

    * an ``OfflineDatasetBuffer`` (used as is);
    * a path to a ``.npz`` (``from_npz``) or a D4RL-format ``.hdf5`` / ``.h5`` file (``from_d4rl_hdf5``);
    * a Minari dataset id installed on this machine, or a ``minari.MinariDataset`` (``from_minari``);
    * an ``rlox.ReplayBuffer`` (``from_replay_buffer``);
    * a mapping of arrays with the D4RL or rlox names (``observations``/``obs``, ...).
    """
    if isinstance(dataset, OfflineDatasetBuffer):
        return dataset
    if isinstance(dataset, (str, os.PathLike)):
        text = str(dataset)
        suffix = Path(text).suffix.lower()
        if suffix == ".npz":
            return OfflineDatasetBuffer.from_npz(text, normalize=normalize, seed=seed)
        if suffix in (".hdf5", ".h5"):
            return OfflineDatasetBuffer.from_d4rl_hdf5(text, normalize=normalize, seed=seed)
        if Path(text).exists():
            raise ValueError(f"dataset path {text!r} is neither a .npz nor a .hdf5/.h5 file; convert it to one "
                             f"of those (or pass an OfflineDatasetBuffer)")
        return OfflineDatasetBuffer.from_minari(text, normalize=normalize, seed=seed)
    if callable(getattr(dataset, "iterate_episodes", None)):
        return OfflineDatasetBuffer.from_minari(dataset, normalize=normalize, seed=seed)
    if all(callable(getattr(dataset, m, None)) for m in ("gather", "sample", "__len__")) and hasattr(dataset, "pos"):
        return OfflineDatasetBuffer.from_replay_buffer(dataset, normalize=normalize, seed=seed)
    if isinstance(dataset, dict):
        def pick(*names):
            for name in names:
                if name in dataset:
                    return dataset[name]
            return None
        rew = pick("rewards")
        obs, nxt, act = pick("observations", "obs"), pick("next_observations", "next_obs"), pick("actions")
        term, trunc = pick("terminals", "terminated"), pick("timeouts", "truncated")
        missing = [k for k, v in (("observations", obs), ("next_observations", nxt), ("actions", act),
                                  ("rewards", rew)) if v is None]
        if missing:
            raise KeyError(f"the dataset mapping lacks {missing} (it has {sorted(dataset)})")
        if term is None and trunc is None:
            raise ValueError(_no_flags_message("the dataset mapping", sorted(dataset)))
        zeros = np.zeros(np.asarray(rew).reshape(-1).shape[0], bool)
        return OfflineDatasetBuffer(obs, nxt, act, rew, zeros if term is None else term,
                                    zeros if trunc is None else trunc, normalize=normalize, seed=seed)
    raise TypeError(f"dataset must be an OfflineDatasetBuffer, a .npz/.hdf5 path, a Minari id or dataset, an "
                    f"rlox.ReplayBuffer or a mapping of arrays; got {type(dataset).__name__}")


# ---------------------------------------------------------------------- making datasets
def pendulum_swingup_policy(obs: Any) -> np.ndarray:
    """A hand-written Pendulum-v1 expert: energy pumping (``dE/dt = 3 * thdot * u`` for
    ``E = thdot^2 / 2 + 15 (cos th - 1)``, so ``u = 2 sign(thdot)`` raises E to the upright
    level) and a PD controller once ``cos th > 0.9``. About -140 mean return; actions [.., 1]."""
    o = np.asarray(obs, dtype=np.float64)
    c, s, w = o[..., 0], o[..., 1], o[..., 2]
    energy = 0.5 * w ** 2 + 15.0 * (c - 1.0)
    pump = np.clip(-10.0 * energy * w, -2.0, 2.0)
    pd = np.clip(-(10.0 * np.arctan2(s, c) + 2.0 * w), -2.0, 2.0)
    return np.where(c > 0.9, pd, pump)[..., None].astype(np.float32)


def _policy_fn(policy: Any, deterministic: bool) -> Callable[[np.ndarray], Any] | None:
    if policy is None or (isinstance(policy, str) and policy == "random"):
        return None
    predict = getattr(policy, "predict", None)
    if callable(predict):
        return lambda obs: predict(obs, deterministic=deterministic)
    if callable(policy):
        return policy
    raise TypeError(f"policy_or_algo must be an rlox algorithm (with predict), a callable obs -> action, or "
                    f"None / 'random' for uniform random actions; got {type(policy).__name__}")


def collect_dataset(policy_or_algo: Any, env_id: Any, n_steps: int, *, noise: float = 0.0, epsilon: float = 0.0,
                    seed: int = 0, deterministic: bool = True, path: str | os.PathLike | None = None,
                    minari_id: str | None = None, algorithm_name: str | None = None,
                    description: str | None = None) -> OfflineDatasetBuffer:
    """Run a policy in an env for ``n_steps`` steps and return the transitions as an
    ``OfflineDatasetBuffer``; optionally write them to ``path`` (``.npz``) and/or as the Minari
    dataset ``minari_id`` (through ``minari.DataCollector``, so ``minari.load_dataset`` reads it).

    D4RL-style levels: ``"random"`` (``policy_or_algo=None``), "medium" (a partly trained agent),
    "expert" (a trained one); "medium-replay" is ``OfflineDatasetBuffer.from_replay_buffer``.

    Args:
        policy_or_algo: an rlox algorithm or Trainer (``predict``), a callable obs -> action
            (env units), or None / ``"random"`` for uniform random actions.
        env_id: a gymnasium id or env object.
        n_steps: transitions to record (>= 1); the last episode may be cut (marked truncated).
        noise: Gaussian action noise, std as a fraction of half the action range (Box only).
        epsilon: probability of replacing the action with a uniform random one.
        seed: seeds the env resets, the noise and the random actions.
        deterministic: passed to ``predict``.
        path: write a ``.npz`` there (D4RL key names).
        minari_id: write a Minari dataset with this id (``"namespace/name-v0"``), under
            ``MINARI_DATASETS_PATH`` (default ``~/.minari/datasets``).
    """
    import gymnasium as gym

    if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
        raise ValueError(f"n_steps must be an int >= 1, got {n_steps!r}")
    for name, value in (("noise", noise), ("epsilon", epsilon)):
        if not np.isfinite(value) or value < 0 or (name == "epsilon" and value > 1):
            raise ValueError(f"{name} = {value!r} is out of range; expected " +
                             ("0 <= epsilon <= 1" if name == "epsilon" else "a finite number >= 0"))
    if path is not None and Path(path).suffix.lower() != ".npz":
        raise ValueError(f"path must end in .npz, got {str(path)!r} (use minari_id= for the Minari format)")
    act = _policy_fn(policy_or_algo, deterministic)
    env = gym.make(env_id) if isinstance(env_id, str) else env_id
    space = env.action_space
    discrete = isinstance(space, gym.spaces.Discrete)
    if not discrete and not isinstance(space, gym.spaces.Box):
        raise ValueError(f"collect_dataset supports Box and Discrete action spaces, got {space}")
    if discrete and noise > 0:
        raise ValueError("noise= adds Gaussian noise to continuous actions; this env's actions are Discrete, "
                         "use epsilon= for random-action mixing")
    if minari_id is not None:
        try:
            import minari
        except ImportError as e:
            raise ImportError("writing a Minari dataset needs Minari: pip install 'rlox[offline]'") from e
        if minari_id in minari.list_local_datasets():
            raise ValueError(f"a Minari dataset {minari_id!r} already exists; pick another id or delete it "
                             f"with minari.delete_dataset({minari_id!r})")
    rng = np.random.default_rng(seed)
    space.seed(int(rng.integers(2**31)))
    stepper = env
    if not discrete:
        low, high = np.asarray(space.low, np.float32), np.asarray(space.high, np.float32)
    cols: dict[str, list] = {k: [] for k in ("observations", "next_observations", "actions", "rewards",
                                             "terminals", "timeouts")}
    obs, _ = stepper.reset(seed=int(seed))
    episode = 0
    for t in range(int(n_steps)):
        if act is None or (epsilon > 0 and rng.random() < epsilon):
            a = space.sample()
        else:
            a = np.asarray(act(np.asarray(obs, dtype=np.float32)))
            if discrete:
                a = int(a.reshape(-1)[0])
            else:
                a = a.reshape(space.shape).astype(np.float32)
                if noise > 0:
                    a = a + rng.normal(size=a.shape).astype(np.float32) * noise * (high - low) / 2
                a = np.clip(a, low, high)
        nxt, r, terminated, truncated, _ = stepper.step(a)
        last = t == n_steps - 1
        cols["observations"].append(np.asarray(obs, np.float32).reshape(-1))
        cols["next_observations"].append(np.asarray(nxt, np.float32).reshape(-1))
        cols["actions"].append(np.asarray(a, np.float32).reshape(-1))
        cols["rewards"].append(float(r))
        cols["terminals"].append(bool(terminated))
        cols["timeouts"].append(bool(truncated) or (last and not terminated))
        if terminated or truncated:
            episode += 1
            if not last:
                obs, _ = stepper.reset(seed=int(seed) + episode)
        else:
            obs = nxt
    data = {k: np.asarray(v) for k, v in cols.items()}
    buf = OfflineDatasetBuffer(data["observations"], data["next_observations"], data["actions"], data["rewards"],
                               data["terminals"], data["timeouts"])
    if path is not None:
        buf.save_npz(path)
    if minari_id is not None:
        _write_minari(minari_id, data, env, discrete, seed,
                      algorithm_name=algorithm_name or _policy_name(policy_or_algo),
                      description=description or f"rlox.offline.collect_dataset: {n_steps} steps, "
                                                 f"noise={noise}, epsilon={epsilon}, seed={seed}")
    return buf


def _write_minari(dataset_id: str, data: dict, env: Any, discrete: bool, seed: int, *, algorithm_name: str,
                  description: str) -> None:
    """Write the transitions as Minari episodes with ``minari.create_dataset_from_buffers`` (Minari's
    own writer; its ``DataCollector`` would need jax). An episode of T steps stores T + 1
    observations: its observations and the last step's next observation."""
    import warnings

    import minari
    from minari.data_collector import EpisodeBuffer

    ends = np.flatnonzero(data["terminals"] | data["timeouts"]) + 1
    starts = np.concatenate([[0], ends[:-1]])
    episodes = []
    for k, (a, b) in enumerate(zip(starts, ends)):
        obs = np.concatenate([data["observations"][a:b], data["next_observations"][b - 1:b]])
        acts = data["actions"][a:b]
        episodes.append(EpisodeBuffer(
            id=k, seed=int(seed) + k, observations=obs,
            actions=acts.reshape(-1).astype(np.int64) if discrete else acts,
            rewards=data["rewards"][a:b].astype(np.float64), terminations=data["terminals"][a:b],
            truncations=data["timeouts"][a:b], infos={}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # Minari's advice on authorship metadata
        minari.create_dataset_from_buffers(dataset_id, episodes, env=env, algorithm_name=algorithm_name,
                                           author="rlox.offline.collect_dataset", description=description,
                                           code_permalink="https://github.com/rlox/rlox")


def _policy_name(policy: Any) -> str:
    if policy is None or isinstance(policy, str):
        return "random"
    return type(policy).__name__ if hasattr(policy, "predict") else getattr(policy, "__name__", "policy")


# ---------------------------------------------------------------------- scores
#: env id -> (random return, expert return, how they were obtained). D4RL's normalised score is
#: ``100 * (R - random) / (expert - random)``.
REFERENCE_SCORES: dict[str, tuple[float, float, str]] = {
    "Pendulum-v1": (-1207.6, -144.8, "measured here: uniform random actions (action_space.seed(0)) and "
                    "pendulum_swingup_policy, 100 episodes each, reset seeds 0-99"),
    "HalfCheetah-v5": (-280.178953, 12135.0, "D4RL's references for halfcheetah (random and expert SAC)"),
    "Hopper-v5": (-20.272305, 3234.3, "D4RL's references for hopper (random and expert SAC)"),
    "Walker2d-v5": (1.629008, 4592.3, "D4RL's references for walker2d (random and expert SAC)"),
}


def normalized_score(env_id: str, returns: Any, *, ref_min: float | None = None,
                     ref_max: float | None = None) -> Any:
    """D4RL's normalised score ``100 * (R - random) / (expert - random)`` (0: random, 100: expert)
    of one return or an array of returns. References come from ``REFERENCE_SCORES`` unless
    ``ref_min``/``ref_max`` are given."""
    if ref_min is None or ref_max is None:
        if env_id not in REFERENCE_SCORES:
            raise KeyError(f"no reference returns for {env_id!r} (known: {sorted(REFERENCE_SCORES)}); pass "
                           f"ref_min= (a random policy's return) and ref_max= (an expert's)")
        lo, hi, _ = REFERENCE_SCORES[env_id]
        ref_min = lo if ref_min is None else ref_min
        ref_max = hi if ref_max is None else ref_max
    if not ref_max > ref_min:
        raise ValueError(f"ref_max ({ref_max}) must exceed ref_min ({ref_min})")
    r = np.asarray(returns, dtype=np.float64)
    out = 100.0 * (r - ref_min) / (ref_max - ref_min)
    return float(out) if out.ndim == 0 else out
