"""Hindsight Experience Replay (Andrychowicz et al., 2017) on the Cython replay storage.

    from rlox.algorithms.sac import SAC
    from rlox.her import HerReplayBuffer

    sac = SAC("PointReach-v0", replay_buffer_class=HerReplayBuffer,
              replay_buffer_kwargs=dict(n_sampled_goal=4, goal_selection_strategy="future"))
    sac.train(20_000)

The env is a goal env (Dict observations ``observation`` / ``achieved_goal`` / ``desired_goal``
and a vectorised ``compute_reward``, e.g. ``rlox.goal_envs`` or ``GoalConditionedWrapper``); its
observations reach the buffer flattened (``rlox.multi_input``), and the buffer knows where the
goals lie in the flat vector. Transitions are stored as they happened, in an
``rlox.ReplayBuffer`` (the Cython ring); what hindsight adds is bookkeeping per slot (episode
start, step within the episode, episode length once it ends) and a relabelling step at sample
time, vectorised over the batch with NumPy (no Python loop over transitions):

1. draw ``batch_size`` slots uniformly; gather them with one ``ReplayBuffer.gather`` call;
2. choose the relabelled rows: each with probability ``n_sampled_goal / (n_sampled_goal + 1)``
   (the paper's k; "future" with k = 4 is its best setting), among transitions of finished
   episodes;
3. pick each relabelled row's goal step ``j`` in its episode (``future``: uniform in [t, T);
   ``final``: T - 1; ``episode``: uniform in [0, T)), gather those transitions' next
   observations in one call and take their achieved goals as the new desired goals;
4. write the new goal into ``obs`` and ``next_obs`` and recompute the rewards with one call of
   the env's ``compute_reward`` on the whole relabelled batch.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from rlox.buffers import ReplayBuffer
from rlox.multi_input import DictLayout, find_dict_layout

__all__ = ["HerReplayBuffer", "GOAL_SELECTION_STRATEGIES"]

GOAL_SELECTION_STRATEGIES = ("future", "final", "episode")


def _compute_reward_of(env: Any) -> Callable[..., Any] | None:
    """The goal env's ``compute_reward`` under an rlox vector env, a gymnasium env or wrapper."""
    for cand in (getattr(getattr(env, "envs", None), "envs", [None])[0],   # GymVecEnv -> SyncVectorEnv
                 getattr(env, "env", None), env):
        if cand is None:
            continue
        get = getattr(cand, "get_wrapper_attr", None)
        if callable(get):
            try:
                return get("compute_reward")
            except AttributeError:
                pass
        fn = getattr(cand, "compute_reward", None)
        if callable(fn):
            return fn
    return None


class HerReplayBuffer:
    """A replay buffer that relabels goals in hindsight (strategies ``future``, ``final``, ``episode``).

    Args:
        capacity: transitions held (the oldest are overwritten).
        obs_dim, act_dim: flat observation and action sizes (the algorithm passes them).
        env: the vector env (or goal env) the transitions come from; gives the goal layout and
            ``compute_reward`` unless ``layout`` / ``compute_reward`` are passed.
        n_envs: envs per ``push_batch`` (each push holds one step of every env).
        n_sampled_goal: k, relabelled goals per real one (probability k / (k + 1) per sample).
        goal_selection_strategy: "future", "final" or "episode".
        seed: seed of the storage and of the relabelling draws.
        layout: a ``rlox.multi_input.DictLayout`` with ``achieved_goal`` and ``desired_goal`` keys.
        compute_reward: ``fn(achieved [B, g], desired [B, g], infos) -> rewards [B]``.

    ``sample(batch_size, seed=None)`` returns the dict of ``rlox.ReplayBuffer.sample`` (``obs``,
    ``actions``, ``rewards``, ``next_obs``, ``terminated``, ``truncated``, ``indices``) plus
    ``relabeled`` (bool [B]).
    """

    def __init__(self, capacity: int, obs_dim: int | None = None, act_dim: int = 1, *, env: Any = None,
                 n_envs: int = 1, n_sampled_goal: int = 4, goal_selection_strategy: str = "future",
                 seed: int | None = None, layout: DictLayout | None = None,
                 compute_reward: Callable[..., Any] | None = None) -> None:
        if goal_selection_strategy not in GOAL_SELECTION_STRATEGIES:
            raise ValueError(f"goal_selection_strategy must be one of {GOAL_SELECTION_STRATEGIES}, got "
                             f"{goal_selection_strategy!r}")
        if isinstance(n_sampled_goal, bool) or not isinstance(n_sampled_goal, int) or n_sampled_goal < 0:
            raise ValueError(f"n_sampled_goal must be an int >= 0, got {n_sampled_goal!r}")
        if isinstance(n_envs, bool) or not isinstance(n_envs, int) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        layout = layout if layout is not None else find_dict_layout(env)
        if layout is None or not {"achieved_goal", "desired_goal"} <= set(layout.keys):
            raise ValueError("HerReplayBuffer needs a goal env: Dict observations with 'achieved_goal' and "
                             "'desired_goal' keys (e.g. rlox.goal_envs, or wrap the env in "
                             f"rlox.wrappers.language.GoalConditionedWrapper); got layout {layout}")
        self.achieved = layout.slices["achieved_goal"]
        self.desired = layout.slices["desired_goal"]
        if self.achieved.stop - self.achieved.start != self.desired.stop - self.desired.start:
            raise ValueError(f"achieved_goal and desired_goal differ in size ({layout}); they must match")
        compute_reward = compute_reward if compute_reward is not None else _compute_reward_of(env)
        if not callable(compute_reward):
            raise ValueError("HerReplayBuffer needs the env's compute_reward(achieved, desired, info); the env "
                             "has none (pass compute_reward=...)")
        obs_dim = layout.flat_dim if obs_dim is None else int(obs_dim)
        if obs_dim != layout.flat_dim:
            raise ValueError(f"obs_dim = {obs_dim} but the goal env's flat observations have {layout.flat_dim}")
        self.layout = layout
        self.compute_reward = compute_reward
        self.n_envs = n_envs
        self.n_sampled_goal = n_sampled_goal
        self.goal_selection_strategy = goal_selection_strategy
        self.her_ratio = n_sampled_goal / (n_sampled_goal + 1.0)   # k relabelled per real goal (sec. 4.5)
        self.storage = ReplayBuffer(capacity, obs_dim=obs_dim, act_dim=act_dim, seed=seed)
        self.capacity = int(self.storage.capacity)
        self.obs_dim, self.act_dim = obs_dim, int(act_dim)
        self.rng = np.random.default_rng(seed)
        # Per slot: global id of its episode's first transition, its step in the episode and the
        # episode's length (0 while the episode runs).
        self.ep_first = np.zeros(self.capacity, np.int64)
        self.t_in_ep = np.zeros(self.capacity, np.int64)
        self.ep_len = np.zeros(self.capacity, np.int64)
        self.total = 0                                      # transitions pushed so far
        self.cur_first = np.arange(n_envs, dtype=np.int64)  # per env: global id of its episode's start
        self.cur_t = np.zeros(n_envs, np.int64)             # per env: step within the episode

    def __len__(self) -> int:
        return len(self.storage)

    def push_batch(self, obs: Any, actions: Any, rewards: Any, terminated: Any, truncated: Any,
                   next_obs: Any) -> None:
        """One vector step: row i of each array is env i's transition."""
        n = self.n_envs
        obs = np.asarray(obs)
        if obs.shape[0] != n:
            raise ValueError(f"push_batch got {obs.shape[0]} transitions; this HerReplayBuffer was made for "
                             f"n_envs={n} (one step of every env per push)")
        self.storage.push_batch(obs, actions, rewards, terminated, truncated, next_obs)
        slots = (self.total + np.arange(n)) % self.capacity
        self.ep_first[slots] = self.cur_first
        self.t_in_ep[slots] = self.cur_t
        self.ep_len[slots] = 0
        self.cur_t += 1
        self.total += n
        done = np.flatnonzero(np.asarray(terminated, bool).reshape(n) | np.asarray(truncated, bool).reshape(n))
        for e in done:   # once per finished episode: mark its (still stored) transitions
            length = int(self.cur_t[e])
            gids = self.cur_first[e] + np.arange(length) * n
            alive = gids[gids >= self.total - self.capacity]
            self.ep_len[alive % self.capacity] = length
            self.cur_first[e] = self.total + e
            self.cur_t[e] = 0

    def push(self, obs: Any, action: Any, reward: float, terminated: bool, truncated: bool, next_obs: Any) -> None:
        """One transition (``n_envs == 1`` only)."""
        self.push_batch(np.asarray(obs)[None], np.asarray(action, np.float32).reshape(1, -1), [reward],
                        [terminated], [truncated], np.asarray(next_obs)[None])

    def sample(self, batch_size: int, seed: int | None = None) -> dict[str, np.ndarray]:
        """``batch_size`` transitions, a fraction ``k / (k + 1)`` of them relabelled (see the module)."""
        if len(self.storage) == 0:
            raise RuntimeError("HerReplayBuffer is empty; collect transitions before sampling")
        rng = np.random.default_rng(seed) if seed is not None else self.rng
        idx = rng.integers(0, len(self.storage), size=int(batch_size))
        batch = self.storage.gather(idx)
        length = self.ep_len[idx]
        first = self.ep_first[idx]
        relabel = (rng.random(idx.shape[0]) < self.her_ratio) & (length > 0) & \
            (first >= self.total - self.capacity)   # whole episode still stored
        k = np.flatnonzero(relabel)
        if k.size:
            t, T = self.t_in_ep[idx[k]], length[k]
            if self.goal_selection_strategy == "future":
                j = t + (rng.random(k.size) * (T - t)).astype(np.int64)
            elif self.goal_selection_strategy == "final":
                j = T - 1
            else:
                j = (rng.random(k.size) * T).astype(np.int64)
            goal_slots = (first[k] + j * self.n_envs) % self.capacity
            goals = self.storage.gather(goal_slots, fields=("next_obs",))["next_obs"][:, self.achieved]
            batch["obs"][k, self.desired] = goals
            batch["next_obs"][k, self.desired] = goals
            achieved = batch["next_obs"][k, self.achieved]
            batch["rewards"][k] = np.asarray(self.compute_reward(achieved, goals, [{}] * k.size),
                                             dtype=np.float32).reshape(k.size)
        batch["relabeled"] = relabel
        return batch

    def clear(self) -> None:
        self.storage.clear()
        self.ep_len[:] = 0
        self.total = 0
        self.cur_first = np.arange(self.n_envs, dtype=np.int64)
        self.cur_t[:] = 0

    def __repr__(self) -> str:
        return (f"HerReplayBuffer({len(self)}/{self.capacity}, strategy={self.goal_selection_strategy!r}, "
                f"n_sampled_goal={self.n_sampled_goal}, n_envs={self.n_envs})")
