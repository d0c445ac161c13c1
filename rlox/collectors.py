"""On-policy data collection: step n_envs environments for n_steps, then compute GAE once.

    collector = RolloutCollector("CartPole-v1", n_envs=8, seed=0, gamma=0.99, gae_lambda=0.95)
    batch = collector.collect(policy, n_steps=128)          # RolloutBatch, 1024 rows
    for mb in batch.sample_minibatches(256):                # RolloutBatch, 256 rows
        ...

Pipeline: (1) step the vector env (``rlox.VecEnv`` when the id is native, a gymnasium vector
env otherwise) for ``n_steps``, evaluating the policy once per step under
``torch.inference_mode``; (2) **truncation bootstrap**: where an episode was cut by a time
limit (``truncated`` and not ``terminated``), ``gamma * V(final observation)`` is added to
that step's reward, so GAE treats the cut as a continuation, while a terminated step gets no
bootstrap (gymnasium 1.x semantics); (3) GAE for all envs in one ``compute_gae_batched_f32``
call (env-major rows, OpenMP over envs); (4) flatten to ``[n_steps * n_envs, ...]``.

Two variants of the same loop:

* **episode-bounded rollouts** (``collect(policy, n_episodes=n)``, r2l's
  ``with_rollout_episodes``): every env is reset, stepped until each has finished ``n``
  episodes, and only each env's steps up to the end of its n-th episode are kept, so the batch
  holds exactly ``n * n_envs`` complete episodes and its size varies between rollouts (GAE
  never looks past an episode's end, so it runs on the full grid before the cut);
* **recurrent policies** (``policy.recurrent``, e.g. RecurrentPPO's LSTM): the policy's state
  ``[n_envs, *state]`` is carried from step to step and across rollouts, reset by the policy
  where ``episode_start`` is 1, and stored per step (``RolloutBatch.states``, the state
  *before* the step) with ``RolloutBatch.episode_starts``, so the update can replay sequences
  from the state they started in.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, fields, replace
from typing import Any, Iterator, Sequence

import gymnasium as gym
import numpy as np
import torch

from rlox.advantages import compute_gae_batched_f32
from rlox.envs import make_vec_env
from rlox.wrappers.vec_normalize import VecNormalize

__all__ = ["RolloutBatch", "RolloutCollector"]


@dataclass
class RolloutBatch:
    """A flattened rollout; every field has ``n_envs * n_steps`` rows (time-major: row
    ``t * n_envs + e``), as torch tensors on the collector's device.

    Fields: ``obs`` [N, *obs] (float32; uint8 for uint8 images read by a CNN policy, see
    ``RolloutCollector.obs_dtype``), ``actions`` [N] int64 (discrete) or [N, act_dim] float32,
    ``log_probs`` [N], ``values`` [N], ``rewards`` [N] (bootstrapped, normalised if asked),
    ``dones`` [N] (1.0 where the episode ended with that step), ``advantages`` [N],
    ``returns`` [N] (= advantages + values).

    Recurrent rollouts also carry ``episode_starts`` [N] (1.0 where the row's observation is
    the first of an episode) and ``states`` [N, *state] (the policy state before the row's
    step); ``env_ids`` [N] / ``steps`` [N] (int64: the env and the step within the rollout of
    each row) come with recurrent and episode-bounded rollouts. They are None otherwise.
    """

    obs: torch.Tensor
    actions: torch.Tensor
    log_probs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor
    episode_starts: torch.Tensor | None = None
    states: torch.Tensor | None = None
    env_ids: torch.Tensor | None = None
    steps: torch.Tensor | None = None

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    def _index(self, idx: torch.Tensor | slice) -> "RolloutBatch":
        if isinstance(idx, slice):
            return RolloutBatch(*(None if getattr(self, f.name) is None else getattr(self, f.name)[idx]
                                  for f in fields(self)))
        # Rows by an index tensor: index_select copies whole rows (a memcpy each) where
        # advanced indexing (t[idx]) walks them element by element; 256 rows of (4, 84, 84)
        # uint8 frames, one thread: 32 ms -> 3.8 ms. Same values.
        idx = torch.as_tensor(idx, dtype=torch.long)

        def rows(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else torch.index_select(t, 0, idx.to(t.device))

        return RolloutBatch(*(rows(getattr(self, f.name)) for f in fields(self)))

    def sample_minibatches(self, batch_size: int, shuffle: bool = True,
                           generator: torch.Generator | None = None) -> Iterator["RolloutBatch"]:
        """Yield minibatches of ``batch_size`` rows covering the batch once (the last one is
        smaller when ``batch_size`` does not divide the batch); shuffled unless ``shuffle=False``.
        A ``batch_size`` of at least the batch's length yields the batch itself."""
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        n = len(self)
        if batch_size >= n:
            # One minibatch holding every row: its gradient does not depend on the order.
            yield self
            return
        if shuffle:
            order = torch.randperm(n, generator=generator)
            for start in range(0, n, batch_size):
                yield self._index(order[start:start + batch_size])
        else:
            for start in range(0, n, batch_size):
                yield self._index(slice(start, start + batch_size))

    def to(self, device: torch.device | str) -> "RolloutBatch":
        return replace(self, **{f.name: getattr(self, f.name).to(device) for f in fields(self)
                                if getattr(self, f.name) is not None})


class RolloutCollector:
    """Collects on-policy rollouts with GAE; see the module docstring for the pipeline.

    Args:
        env_id: a native id (stepped by ``rlox.VecEnv``), an ``ENV_REGISTRY`` name, a gymnasium
            id, or a gymnasium env object (copied ``n_envs`` times from its spec).
        n_envs: number of parallel envs; env i is seeded ``seed + i``.
        seed: env seed.
        gamma, gae_lambda: discount and GAE lambda.
        normalize_rewards, normalize_obs: wrap the envs in ``VecNormalize`` with these flags
            (``clip_obs``/``clip_reward`` its clips, ``gamma`` its discount).
        wrappers: vector-env wrappers (objects with ``wrap(venv)``, e.g. ``VecNormalize``),
            applied in order; use either these or the ``normalize_*`` flags for normalisation.
        device: where the batch tensors live.
        vec_env: "sync" (default) or "async": Python envs in subprocesses (``make_vec_env``).
    """

    def __init__(self, env_id: Any = "CartPole-v1", n_envs: int = 8, seed: int = 0, gamma: float = 0.99,
                 gae_lambda: float = 0.95, normalize_rewards: bool = False, normalize_obs: bool = False,
                 *, clip_obs: float = 10.0, clip_reward: float = 10.0, wrappers: Sequence[Any] | None = None,
                 device: str | torch.device = "cpu", vec_env: str = "sync") -> None:
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        for name, v in (("gamma", gamma), ("gae_lambda", gae_lambda)):
            if not (isinstance(v, (int, float)) and 0.0 <= v <= 1.0):
                raise ValueError(f"{name} must be a number in [0, 1], got {v!r}")
        self.env_id = env_id
        self.n_envs = int(n_envs)
        self.seed = int(seed)
        self.gamma = float(gamma)
        self.gae_lambda = float(gae_lambda)
        self.device = torch.device(device)
        venv = make_vec_env(env_id, self.n_envs, self.seed, vec_env=vec_env)
        wrappers = list(wrappers or [])
        if (normalize_obs or normalize_rewards) and any(isinstance(w, VecNormalize) for w in wrappers):
            raise ValueError("normalisation is asked for twice: by normalize_obs/normalize_rewards and by a "
                             "VecNormalize in wrappers; keep one of them")
        if normalize_obs or normalize_rewards:
            wrappers.insert(0, VecNormalize(norm_obs=normalize_obs, norm_reward=normalize_rewards,
                                            clip_obs=clip_obs, clip_reward=clip_reward, gamma=gamma))
        for i, w in enumerate(wrappers):
            wrap = getattr(w, "wrap", None)
            if not callable(wrap):
                raise TypeError(f"wrappers[{i}] ({type(w).__name__}) has no wrap(venv) method; expected a "
                                f"vector-env wrapper such as rlox.wrappers.VecNormalize")
            venv = wrap(venv)
        self.env = venv
        self.dict_layout = getattr(venv, "dict_layout", None)   # Dict observations (rlox.multi_input)
        self.obs_layout = getattr(venv, "obs_layout", None)     # Discrete, Tuple, ... observations
        self.normalizer: VecNormalize | None = next((w for w in wrappers if isinstance(w, VecNormalize)), None)
        self.observation_space: gym.Space = venv.single_observation_space
        self.action_space: gym.Space = venv.single_action_space
        self.discrete = isinstance(self.action_space, gym.spaces.Discrete)
        self.obs_shape = tuple(self.observation_space.shape or ())
        if isinstance(self.action_space, gym.spaces.Box):
            self._low = self.action_space.low.astype(np.float32)
            self._high = self.action_space.high.astype(np.float32)
            self._act_shape = tuple(self.action_space.shape)
        self._obs: np.ndarray | None = None
        # uint8 image observations stay uint8 in the rollout when the policy's CNN takes them so
        # (rlox.inference.ImageInput scales to [0, 1]): a quarter of float32's memory
        from rlox.wrappers.visual import is_image_space

        self._uint8_images = (is_image_space(self.observation_space) and self.dict_layout is None
                              and not (self.normalizer is not None and self.normalizer.norm_obs))
        self._ep_ret = np.zeros(self.n_envs, dtype=np.float64)
        self._ep_len = np.zeros(self.n_envs, dtype=np.int64)
        self._state: torch.Tensor | None = None          # a recurrent policy's state [n_envs, *state]
        self._episode_start = np.ones(self.n_envs, dtype=np.float32)
        self.episode_returns: list[float] = []   # episodes finished in the last collect (raw returns)
        self.episode_lengths: list[int] = []
        self.timings: dict[str, float] = {}

    # ------------------------------------------------------------------ collection
    def obs_dtype(self, policy: Any) -> np.dtype:
        """The dtype of ``RolloutBatch.obs`` for ``policy``: uint8 for a uint8 image space (no
        observation normalisation) when the policy reads images through a CNN feature extractor
        (``policy.features``), float32 otherwise. 8 envs x 128 steps of (4, 84, 84) frames:
        28.9 MB instead of 115.6 MB."""
        if self._uint8_images and getattr(policy, "features", None) is not None:
            return np.dtype(np.uint8)
        return np.dtype(np.float32)

    def reset(self) -> np.ndarray:
        """Reset every env (first call: seeded) and the episode accumulators."""
        self._obs = self.env.reset_all().reshape(self.n_envs, *self.obs_shape).astype(np.float32, copy=False)
        self._ep_ret[:] = 0.0
        self._ep_len[:] = 0
        self._state = None
        self._episode_start[:] = 1.0
        return self._obs

    def env_actions(self, actions: np.ndarray) -> np.ndarray:
        """What the env receives: continuous actions clipped to the action space."""
        if self.discrete:
            return actions
        return np.clip(actions.reshape(self.n_envs, *self._act_shape), self._low, self._high)

    def collect(self, policy: Any, n_steps: int | None = None, *, n_episodes: int | None = None,
                generator: torch.Generator | None = None, on_step: Any = None, sde_sample_freq: int = -1,
                max_steps: int = 100_000) -> RolloutBatch:
        """Run ``n_steps`` steps of every env (or ``n_episodes`` episodes) with ``policy`` and
        return the GAE'd batch.

        Args:
            policy: has ``act(obs, deterministic, generator)`` -> (actions, log_probs, values)
                and ``get_value(obs)`` (``rlox.policies`` policies do). A policy with
                ``recurrent = True`` instead has ``initial_state(n)``, ``act(obs, deterministic,
                generator, state=, episode_start=)`` -> (actions, log_probs, values, new_state)
                and ``get_value(obs, state=, episode_start=)``.
            n_steps: steps per env (give this or ``n_episodes``).
            n_episodes: episode-bounded rollout: reset every env, step until each env has
                finished this many episodes, keep each env's steps up to the end of its last
                one (a batch of ``n_episodes * n_envs`` complete episodes, of varying size).
            generator: torch generator for action sampling (the algorithm's own stream).
            on_step: optional callable run after each vector step; returning False only
                records that a stop was asked (the rollout still completes).
            sde_sample_freq: for gSDE policies (``policy.use_sde``): new exploration noise every
                this many steps (-1: once, at the start of the rollout).
            max_steps: with ``n_episodes``, the most steps an env may take for them (a
                RuntimeError past it: an env without a time limit would never end the rollout).
        """
        if (n_steps is None) == (n_episodes is None):
            raise ValueError(f"collect needs exactly one of n_steps and n_episodes, got n_steps={n_steps!r}, "
                             f"n_episodes={n_episodes!r}")
        for name, v in (("n_steps", n_steps), ("n_episodes", n_episodes), ("max_steps", max_steps)):
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1):
                raise ValueError(f"{name} must be an int >= 1, got {v!r}")
        episodic = n_episodes is not None
        if self._obs is None or episodic:
            self.reset()        # an episode-bounded rollout starts every env on a fresh episode
        N = self.n_envs
        T = int(max_steps) if episodic else int(n_steps)
        # Episode-bounded rollouts grow their buffers as they go (doubling), step-bounded ones
        # allocate them once.
        cap = min(T, 256) if episodic else T
        obs_buf = np.empty((cap, N, *self.obs_shape), dtype=self.obs_dtype(policy))
        act_buf = np.empty((cap, N) if self.discrete else (cap, N, *self._act_shape),
                           dtype=np.int64 if self.discrete else np.float32)
        logp_buf = np.empty((cap, N), dtype=np.float32)
        val_buf = np.empty((cap, N), dtype=np.float32)
        rew_buf = np.empty((cap, N), dtype=np.float32)
        done_buf = np.empty((cap, N), dtype=np.float32)
        bufs = [obs_buf, act_buf, logp_buf, val_buf, rew_buf, done_buf]
        recurrent = bool(getattr(policy, "recurrent", False))
        if recurrent:
            if self._state is None:
                self._state = policy.initial_state(N)
            state, episode_start = self._state, self._episode_start.copy()
            state_buf: list[torch.Tensor] = []
            start_buf = np.empty((cap, N), dtype=np.float32)
            bufs.append(start_buf)
        finished = np.zeros(N, dtype=np.int64)     # episodes each env finished (episode-bounded)
        ends = np.full(N, -1, dtype=np.int64)      # the step that ended an env's n-th episode
        self.episode_returns, self.episode_lengths = [], []
        self.stop_requested = False
        obs_dtype = self.obs_dtype(policy)
        gamma, obs, dev = self.gamma, self._obs.astype(obs_dtype, copy=False), self.device
        t_env = t_policy = 0.0
        sde = bool(getattr(policy, "use_sde", False))
        t = 0
        with torch.inference_mode():
            while t < T:
                if t == len(obs_buf):       # (episode-bounded) grow every buffer
                    bufs = [np.concatenate([b, np.empty_like(b)]) for b in bufs]
                    obs_buf, act_buf, logp_buf, val_buf, rew_buf, done_buf = bufs[:6]
                    if recurrent:
                        start_buf = bufs[6]
                if sde and (t == 0 or (sde_sample_freq > 0 and t % sde_sample_freq == 0)):
                    policy.reset_noise(N, generator)
                obs_buf[t] = obs
                t0 = time.perf_counter()
                obs_t = torch.from_numpy(obs).to(dev)
                if recurrent:
                    start_buf[t] = episode_start
                    state_buf.append(state)
                    actions, log_probs, values, state = policy.act(
                        obs_t, False, generator, state=state, episode_start=torch.from_numpy(episode_start).to(dev))
                else:
                    actions, log_probs, values = policy.act(obs_t, False, generator)
                a_np = actions.cpu().numpy()
                act_buf[t] = a_np.reshape(act_buf.shape[1:])
                logp_buf[t] = log_probs.cpu().numpy()
                val_buf[t] = values.cpu().numpy()
                t1 = time.perf_counter()
                out = self.env.step_all(self.env_actions(a_np))
                t2 = time.perf_counter()
                rewards = out["rewards"]
                terminated, truncated = out["terminated"], out["truncated"]
                raw = out.get("raw_rewards", rewards)
                self._ep_ret += raw
                self._ep_len += 1
                done = terminated | truncated
                if done.any():
                    rewards = rewards.astype(np.float64, copy=True)
                    cut = np.flatnonzero(truncated & ~terminated)
                    if cut.size:
                        final = out["terminal_obs"].reshape(N, *self.obs_shape)
                        if recurrent:   # every env's row, with the state the step led to
                            v_final = policy.get_value(
                                torch.from_numpy(np.ascontiguousarray(final, dtype=np.float32)).to(dev),
                                state=state, episode_start=torch.zeros(N, device=dev)).cpu().numpy()[cut]
                        else:
                            v_final = policy.get_value(torch.from_numpy(np.ascontiguousarray(
                                final[cut], dtype=np.float32)).to(dev)).cpu().numpy()
                        rewards[cut] += gamma * v_final
                    ended = np.flatnonzero(done)
                    if episodic:    # only the episodes the rollout keeps count
                        ended = ended[finished[ended] < n_episodes]
                        finished[ended] += 1
                        ends[ended[finished[ended] == n_episodes]] = t
                    self.episode_returns.extend(self._ep_ret[ended].tolist())
                    self.episode_lengths.extend(self._ep_len[ended].tolist())
                    self._ep_ret[done] = 0.0
                    self._ep_len[done] = 0
                rew_buf[t] = rewards
                done_buf[t] = done
                if recurrent:
                    episode_start = done.astype(np.float32)
                obs = out["obs"].reshape(N, *self.obs_shape)
                if obs.dtype != obs_dtype:
                    obs = obs.astype(obs_dtype)
                t_policy += t1 - t0
                t_env += t2 - t1
                t += 1
                if on_step is not None and on_step() is False:
                    self.stop_requested = True
                if episodic and (ends >= 0).all():
                    break
            if episodic and (ends < 0).any():
                slow = int(np.flatnonzero(ends < 0)[0])
                raise RuntimeError(f"episode-bounded rollout: env {slow} finished {finished[slow]} of "
                                   f"{n_episodes} episodes in max_steps={max_steps} steps; give the env a "
                                   f"time limit, lower rollout_episodes or use n_steps")
            self._obs = obs
            if recurrent:
                self._state, self._episode_start = state, episode_start
                last_values = policy.get_value(torch.from_numpy(obs).to(dev), state=state,
                                               episode_start=torch.from_numpy(episode_start).to(dev))
            else:
                last_values = policy.get_value(torch.from_numpy(obs).to(dev))
            last_values = last_values.cpu().numpy()
        T = t
        obs_buf, act_buf, logp_buf, val_buf, rew_buf, done_buf = (b[:T] for b in bufs[:6])
        t0 = time.perf_counter()
        # GAE over env-major rows ([N, T]); then back to time-major and flat. (An episode-bounded
        # rollout's kept steps end with an episode end, so GAE never reads the steps cut below.)
        adv, ret = compute_gae_batched_f32(
            np.ascontiguousarray(rew_buf.T).reshape(-1), np.ascontiguousarray(val_buf.T).reshape(-1),
            np.ascontiguousarray(done_buf.T).reshape(-1), last_values.astype(np.float32, copy=False),
            n_steps=T, gamma=gamma, lam=self.gae_lambda)
        adv = adv.reshape(N, T).T.reshape(-1)
        ret = ret.reshape(N, T).T.reshape(-1)
        self.timings = {"env_step": t_env, "policy_forward": t_policy, "gae_compute": time.perf_counter() - t0}

        def flat(a: np.ndarray, tail: tuple = ()) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a).reshape(T * N, *tail)).to(dev)

        batch = RolloutBatch(
            obs=flat(obs_buf, self.obs_shape),
            actions=flat(act_buf, () if self.discrete else self._act_shape),
            log_probs=flat(logp_buf), values=flat(val_buf), rewards=flat(rew_buf), dones=flat(done_buf),
            advantages=flat(adv), returns=flat(ret))
        if recurrent or episodic:
            batch.env_ids = torch.arange(N, device=dev).repeat(T)
            batch.steps = torch.arange(T, device=dev).repeat_interleave(N)
        if recurrent:
            batch.episode_starts = flat(bufs[6][:T])
            batch.states = torch.stack(state_buf).reshape(T * N, *state.shape[1:])
        if episodic:
            # Keep each env's steps up to the end of its n-th episode (row t * N + e).
            keep = (np.arange(T)[:, None] <= ends[None, :]).reshape(-1)
            batch = batch._index(torch.from_numpy(np.flatnonzero(keep)).to(dev))
        return batch

    # ------------------------------------------------------------------ persistence
    def state_dict(self) -> dict[str, Any]:
        """Current observations, episode accumulators, env state (native envs) and normaliser."""
        state: dict[str, Any] = {
            "obs": None if self._obs is None else self._obs.copy(),
            "ep_ret": self._ep_ret.copy(), "ep_len": self._ep_len.copy(),
        }
        get_state = getattr(self.env, "get_state", None)
        if callable(get_state) and self._obs is not None:
            state["env"] = get_state()
        if self.normalizer is not None:
            state["normalizer"] = self.normalizer.state_dict()
        if self._state is not None:     # a recurrent policy's carried state
            state["policy_state"] = self._state.detach().cpu().numpy()
            state["episode_start"] = self._episode_start.copy()
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore ``state_dict()``. Native envs resume exactly; gymnasium envs cannot be
        snapshotted, so they are reset (with the normaliser statistics restored)."""
        if state.get("normalizer") is not None:
            if self.normalizer is None:
                # Trained with wrappers=[VecNormalize(...)], which the config does not record:
                # rebuild the wrapper from the saved settings and statistics.
                self.normalizer = VecNormalize.from_state_dict(state["normalizer"])
                self.env = self.normalizer.wrap(self.env)
            else:
                self.normalizer.load_state_dict(state["normalizer"])
        set_state = getattr(self.env, "set_state", None)
        if state.get("env") is not None and callable(set_state) and state.get("obs") is not None:
            set_state(state["env"])
            self._obs = np.asarray(state["obs"], dtype=np.float32).copy()
            self._ep_ret = np.asarray(state["ep_ret"], dtype=np.float64).copy()
            self._ep_len = np.asarray(state["ep_len"], dtype=np.int64).copy()
            if state.get("policy_state") is not None:
                self._state = torch.as_tensor(np.asarray(state["policy_state"]), device=self.device).clone()
                self._episode_start = np.asarray(state["episode_start"], dtype=np.float32).copy()
        else:
            self._obs = None  # reset on the next collect

    def close(self) -> None:
        self.env.close()
