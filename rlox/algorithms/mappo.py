"""MAPPO: multi-agent PPO with a centralised critic (Yu et al., 2022, "The Surprising
Effectiveness of PPO in Cooperative Multi-Agent Games", arXiv:2103.01955).

Reading order: config -> networks -> collection -> targets -> update.

* config: ``rlox.config.MAPPOConfig`` (the paper's MPE settings).
* networks: decentralised actors, one per group of agents that share observation and action
  spaces (``share_policy=True``: one actor per group, a one-hot agent id appended to its
  input, the paper's parameter sharing; ``False``: one actor per agent), and a centralised
  critic V(s, id) on the env's global state (``env.state()``, else every agent's observation
  concatenated) with a one-hot agent id. ``IPPO`` (rlox/algorithms/ippo.py) swaps in critics
  on each agent's own observation.
* collection: a multi-agent vector env (``rlox.multiagent``: the native Cython MPE kernels
  where the scenario has one, else PettingZoo), one joint action per env step; a time limit
  adds ``gamma * V(final state)`` to the last reward (bootstrapping truncation, as the
  single-agent ``RolloutCollector`` does).
* targets: GAE per agent through the batched Cython kernel (``compute_gae_batched_f32``, one
  row per (env, agent)); with ``value_norm`` the critic learns returns normalised by their
  running mean and std (the paper's ValueNorm, section 4.1) and its outputs are de-normalised
  before GAE.
* update: ``n_epochs`` passes of ``n_minibatches``; the shared clipped objective, clipped
  value loss and entropy bonus (``rlox.losses.PPOLoss``) per group of agents, summed weighted
  by rows, one Adam step on all networks; agents that were not alive at a step (PettingZoo's
  shrinking ``agents`` list) are masked out of every loss (their rows are dropped).

    mappo = MAPPO("spread_v3", n_agents=3, seed=0)
    mappo.train(total_timesteps=100_000)          # env steps (one joint action each)
    mappo.predict({"agent_0": obs0, "agent_1": obs1, "agent_2": obs2})   # {agent: action}
"""
from __future__ import annotations

import math
import time
from typing import Any, Mapping, Sequence

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from rlox.advantages import compute_gae_batched_f32
from rlox.algorithms.base import Algorithm, adam, to_numpy_tree
from rlox.config import MAPPOConfig
from rlox.losses import PPOLoss
from rlox.multiagent.envs import make_multiagent_vec_env
from rlox.networks import draw_categorical, draw_normal
from rlox.policies import mlp
from rlox.stats import RunningStats

__all__ = ["MAPPO", "ValueNorm", "MultiAgentActor", "agent_groups"]

_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


# ============================================================================ networks
class ValueNorm:
    """Running mean / std of the value targets (the MAPPO paper's ValueNorm): the critic learns
    ``(G - mean) / std`` and its outputs are mapped back with ``denormalize`` for GAE."""

    def __init__(self) -> None:
        self.stats = RunningStats()

    def update(self, returns: np.ndarray) -> None:
        self.stats.batch_update(np.ascontiguousarray(returns, dtype=np.float64).reshape(-1))

    def _mean_std(self) -> tuple[float, float]:
        if self.stats.count() < 2:
            return 0.0, 1.0
        return float(self.stats.mean()), max(float(self.stats.std()), 1e-5)

    def normalize(self, x: Any) -> Any:
        mean, std = self._mean_std()
        return (x - mean) / std

    def denormalize(self, x: Any) -> Any:
        mean, std = self._mean_std()
        return x * std + mean

    def state_dict(self) -> dict[str, Any]:
        return self.stats.state_dict()

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.stats.load_state_dict({k: (v.item() if hasattr(v, "item") else v) for k, v in state.items()})


class MultiAgentActor(nn.Module):
    """One decentralised actor: a categorical head for ``Discrete`` actions, a diagonal Gaussian
    (state-independent log std) for ``Box`` actions. ``sample`` / ``evaluate`` take inputs
    ``[B, in_dim]``."""

    def __init__(self, in_dim: int, space: gym.Space, hidden: Any, activation: str, ortho_init: bool,
                 log_std_init: float) -> None:
        super().__init__()
        self.discrete = isinstance(space, gym.spaces.Discrete)
        self.out_dim = int(space.n) if self.discrete else int(space.shape[0])
        self.net = mlp(in_dim, hidden, self.out_dim, activation, out_gain=0.01, ortho_init=ortho_init)
        if not self.discrete:
            self.log_std = nn.Parameter(torch.full((self.out_dim,), float(log_std_init)))

    def sample(self, x: torch.Tensor, deterministic: bool, generator: torch.Generator | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """(actions ``[B]`` int64 or ``[B, k]``, log_probs ``[B]``)."""
        out = self.net(x)
        if self.discrete:
            logp_all = F.log_softmax(out, dim=-1)
            a = logp_all.argmax(-1) if deterministic else \
                draw_categorical(logp_all.exp(), generator)
            return a, logp_all.gather(-1, a.unsqueeze(-1)).squeeze(-1)
        std = self.log_std.exp().expand_as(out)
        a = out if deterministic else out + std * draw_normal(out.shape, generator, out)
        return a, self._normal_log_prob(out, a)

    def evaluate(self, x: torch.Tensor, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log_probs ``[B]``, entropy ``[B]``) of given actions."""
        out = self.net(x)
        if self.discrete:
            logp_all = F.log_softmax(out, dim=-1)
            return (logp_all.gather(-1, actions.long().reshape(-1, 1)).squeeze(-1),
                    -(logp_all.exp() * logp_all).sum(-1))
        entropy = (0.5 + _HALF_LOG_2PI + self.log_std).sum().expand(out.shape[0])
        return self._normal_log_prob(out, actions), entropy

    def _normal_log_prob(self, mean: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """Diagonal Gaussian log-density summed over action dims (torch.distributions' formula,
        written out: importing torch.distributions costs seconds of start-up)."""
        return (-0.5 * ((a - mean) * torch.exp(-self.log_std)) ** 2 - self.log_std - _HALF_LOG_2PI).sum(-1)


class _GroupPolicy:
    """``PPOLoss``'s policy interface for one group: rows are ``[actor input | critic input]``."""

    def __init__(self, actor: MultiAgentActor, critic: nn.Module, actor_in: int) -> None:
        self.actor, self.critic, self.actor_in = actor, critic, actor_in

    def evaluate_actions(self, x: torch.Tensor, actions: torch.Tensor):
        log_probs, entropy = self.actor.evaluate(x[:, :self.actor_in], actions)
        return log_probs, entropy, self.critic(x[:, self.actor_in:]).squeeze(-1)


def agent_groups(agents: Sequence[str], obs_spaces: Mapping[str, gym.Space], act_spaces: Mapping[str, gym.Space],
                 share_policy: bool) -> list[list[int]]:
    """Agent indices grouped by identical (observation, action) spaces, in agent order; one
    group per agent without ``share_policy``."""
    if not share_policy:
        return [[i] for i in range(len(agents))]
    groups: list[list[int]] = []
    keys: list[tuple[gym.Space, gym.Space]] = []
    for i, a in enumerate(agents):
        key = (obs_spaces[a], act_spaces[a])
        for k, g in zip(keys, groups):
            if k[0] == key[0] and k[1] == key[1]:
                g.append(i)
                break
        else:
            keys.append(key)
            groups.append([i])
    return groups


# ============================================================================ the algorithm
class MAPPO(Algorithm):
    """Multi-agent PPO with decentralised actors and a centralised critic.

    Args:
        env_id: an MPE name (``"spread_v3"``, ``"simple_speaker_listener_v4"``, ...), an
            ``ENV_REGISTRY`` name of a PettingZoo env, a PettingZoo ``ParallelEnv`` (or a
            parallelizable AEC env), or a factory returning one.
        seed, callbacks, logger, device: see ``Algorithm``.
        **config: ``MAPPOConfig`` fields (``n_agents``, ``n_envs``, ``share_policy``,
            ``native``, ``continuous_actions``, ...).

    ``mean_reward`` is the mean per-agent episode return (each finished episode's return
    averaged over its agents).
    """

    name = "mappo"
    config_class = MAPPOConfig
    centralised_critic = True
    multi_agent = True          # Trainer.evaluate runs MAPPO.evaluate

    @classmethod
    def _can_rebuild_env(cls, env_id: Any) -> bool:
        # MPE names (spread_v3, mpe2's ids) and registered envs are rebuilt by make_multiagent_vec_env.
        from rlox.multiagent.envs import resolve_mpe_name
        from rlox.plugins import ENV_REGISTRY

        return isinstance(env_id, str) and (resolve_mpe_name(env_id) is not None or env_id in ENV_REGISTRY)

    def __init__(self, env_id: Any = "spread_v3", *, seed: int = 0, callbacks: Sequence[Any] | None = None,
                 logger: Any = None, device: str | torch.device = "cpu", **config: Any) -> None:
        super().__init__(env_id, seed=seed, callbacks=callbacks, logger=logger, device=device, **config)
        cfg = self.config
        self.env = make_multiagent_vec_env(env_id, cfg.n_envs, self.seed, n_agents=cfg.n_agents, native=cfg.native,
                                           continuous_actions=cfg.continuous_actions, max_cycles=cfg.max_cycles,
                                           env_kwargs=cfg.env_kwargs)
        env = self.env
        self.agents: list[str] = list(env.possible_agents)
        self.n_agents = len(self.agents)
        self.groups = agent_groups(self.agents, env.observation_spaces, env.action_spaces, cfg.share_policy)
        self.group_of = {i: (g, k) for g, idx in enumerate(self.groups) for k, i in enumerate(idx)}
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            self.actors = nn.ModuleList(
                MultiAgentActor(self._actor_in(g), env.action_spaces[self.agents[idx[0]]], cfg.hidden, cfg.activation,
                                cfg.ortho_init, cfg.log_std_init) for g, idx in enumerate(self.groups))
            self.critics = self._make_critics()
        self.actors.to(self.device)
        self.critics.to(self.device)
        self.optimizer = adam(list(self.actors.parameters()) + list(self.critics.parameters()), cfg.learning_rate,
                              eps=1e-5)
        self.loss_fn = PPOLoss(cfg.clip_eps, cfg.vf_coef, cfg.ent_coef, cfg.clip_vloss, cfg.normalize_advantages)
        self.value_norm = ValueNorm() if cfg.value_norm else None
        self._eye = torch.eye(self.n_agents, device=self.device)
        self._carry: dict[str, np.ndarray] | None = None     # obs / state / alive between rollouts
        self._ep_ret = np.zeros((env.n_envs, self.n_agents))
        self._ep_len = np.zeros(env.n_envs, dtype=np.int64)

    # ------------------------------------------------------------------ networks: inputs
    def _actor_in(self, g: int) -> int:
        idx = self.groups[g]
        return self.env.obs_dims[idx[0]] + (len(idx) if len(idx) > 1 else 0)

    def _critic_in(self, g: int) -> int:
        """MAPPO: global state + one-hot agent id (IPPO overrides: the agent's own input)."""
        return self.env.state_dim + (self.n_agents if self.n_agents > 1 else 0)

    def _make_critics(self) -> nn.ModuleList:
        """One centralised critic shared by every group (IPPO: one per group)."""
        cfg = self.config
        critic = mlp(self._critic_in(0), cfg.hidden, 1, cfg.activation, out_gain=1.0, ortho_init=cfg.ortho_init)
        return nn.ModuleList([critic])

    def _critic_of(self, g: int) -> nn.Module:
        return self.critics[0]

    def _actor_input(self, obs: torch.Tensor, g: int) -> torch.Tensor:
        """obs ``[..., A, D]`` -> the group's actor inputs ``[..., n_g, in_g]`` (own observation
        plus, when the actor is shared, a one-hot id within the group)."""
        idx = self.groups[g]
        x = obs[..., idx, :self.env.obs_dims[idx[0]]]
        if len(idx) > 1:
            eye = torch.eye(len(idx), device=obs.device).expand(*x.shape[:-1], len(idx))
            x = torch.cat([x, eye], dim=-1)
        return x

    def _critic_input(self, obs: torch.Tensor, state: torch.Tensor, g: int) -> torch.Tensor:
        """state ``[..., S]`` -> ``[..., n_g, S + A]``: the global state with each agent's id."""
        idx = self.groups[g]
        s = state.unsqueeze(-2).expand(*state.shape[:-1], len(idx), state.shape[-1])
        if self.n_agents == 1:
            return s
        ids = self._eye[idx].expand(*state.shape[:-1], len(idx), self.n_agents)
        return torch.cat([s, ids], dim=-1)

    def _values(self, obs: torch.Tensor, state: torch.Tensor) -> torch.Tensor:
        """Critic outputs (normalised when ValueNorm is on) ``[..., A]``."""
        out = torch.empty(*obs.shape[:-2], self.n_agents, device=obs.device)
        for g, idx in enumerate(self.groups):
            out[..., idx] = self._critic_of(g)(self._critic_input(obs, state, g)).squeeze(-1)
        return out

    def _denorm(self, v: np.ndarray) -> np.ndarray:
        return self.value_norm.denormalize(v) if self.value_norm is not None else v

    # ------------------------------------------------------------------ spaces
    @property
    def observation_space(self) -> gym.Space:
        return gym.spaces.Dict(dict(self.env.observation_spaces))

    @property
    def action_space(self) -> gym.Space:
        return gym.spaces.Dict(dict(self.env.action_spaces))

    # ------------------------------------------------------------------ collection
    def _act(self, obs: torch.Tensor, deterministic: bool, generator: torch.Generator | None
             ) -> tuple[np.ndarray, torch.Tensor]:
        """Actions for obs ``[B, A, D]``: (env actions int64 [B, A] / float32 [B, A, act_dim], log_probs [B, A])."""
        B = obs.shape[0]
        env = self.env
        actions = np.zeros((B, self.n_agents) if env.discrete else (B, self.n_agents, env.act_dim),
                           np.int64 if env.discrete else np.float32)
        logp = torch.empty(B, self.n_agents, device=obs.device)
        for g, idx in enumerate(self.groups):
            x = self._actor_input(obs, g)                     # [B, n_g, in]
            a, lp = self.actors[g].sample(x.reshape(B * len(idx), -1), deterministic, generator)
            logp[:, idx] = lp.reshape(B, len(idx))
            a = a.cpu().numpy()
            if env.discrete:
                actions[:, idx] = a.reshape(B, len(idx))
            else:
                k = self.actors[g].out_dim
                actions[:, idx, :k] = a.reshape(B, len(idx), k)
        return actions, logp

    def _collect(self) -> dict[str, Any]:
        """One rollout of ``n_steps`` joint steps in every env, with GAE."""
        cfg, env = self.config, self.env
        T, E, A, D, S = cfg.n_steps, env.n_envs, self.n_agents, env.obs_dim, env.state_dim
        if self._carry is None:
            out = env.reset()
            self._carry = {k: np.array(out[k]) for k in ("obs", "state", "alive")}
            self._ep_ret[:] = 0
            self._ep_len[:] = 0
        obs_b = np.empty((T, E, A, D), np.float32)
        state_b = np.empty((T, E, S), np.float32)
        alive_b = np.empty((T, E, A), np.bool_)
        act_b = np.empty((T, E, A) if env.discrete else (T, E, A, env.act_dim), np.int64 if env.discrete else np.float32)
        logp_b = np.empty((T, E, A), np.float32)
        val_b = np.empty((T, E, A), np.float32)
        rew_b = np.empty((T, E, A), np.float32)
        done_b = np.empty((T, E, A), np.float32)
        t_env = t_pol = 0.0
        finished_ret: list[float] = []
        finished_len: list[int] = []
        on_step = self.callbacks.on_step if self.callbacks.needs_step else None
        self.stop_requested = False
        c = self._carry
        for t in range(T):
            obs_b[t], state_b[t], alive_b[t] = c["obs"], c["state"], c["alive"]
            t0 = time.perf_counter()
            with torch.inference_mode():
                o = torch.as_tensor(obs_b[t], device=self.device)
                actions, logp = self._act(o, False, self.torch_gen)
                val_b[t] = self._values(o, torch.as_tensor(state_b[t], device=self.device)).cpu().numpy()
            logp_b[t] = logp.cpu().numpy()
            act_b[t] = actions
            t1 = time.perf_counter()
            out = env.step(actions)
            t2 = time.perf_counter()
            t_pol += t1 - t0
            t_env += t2 - t1
            alive = alive_b[t]
            rewards = np.where(alive, out["rewards"], 0.0).astype(np.float32)
            done_env = np.asarray(out["done"])
            term, trunc = np.asarray(out["terminated"]), np.asarray(out["truncated"])
            self._ep_ret += rewards
            self._ep_len += 1
            cut = alive & trunc & ~term
            if cut.any():
                # Truncation bootstrap: the episode was cut by a time limit, not ended.
                rows = np.flatnonzero(cut.any(axis=1))
                with torch.inference_mode():
                    v_final = self._values(torch.as_tensor(out["final_obs"][rows], device=self.device),
                                           torch.as_tensor(out["final_state"][rows], device=self.device)).cpu().numpy()
                rewards[rows] += np.where(cut[rows], cfg.gamma * self._denorm(v_final), 0.0).astype(np.float32)
            rew_b[t] = rewards
            done_b[t] = (term | trunc | done_env[:, None] | ~alive).astype(np.float32)
            for e in np.flatnonzero(done_env):
                finished_ret.append(float(self._ep_ret[e].mean()))     # mean per-agent return
                finished_len.append(int(self._ep_len[e]))
                self._ep_ret[e] = 0.0
                self._ep_len[e] = 0
            c = {k: np.array(out[k]) for k in ("obs", "state", "alive")}
            if on_step is not None and on_step() is False:
                self.stop_requested = True
        self._carry = c
        with torch.inference_mode():
            last_v = self._values(torch.as_tensor(c["obs"], device=self.device),
                                  torch.as_tensor(c["state"], device=self.device)).cpu().numpy()
        self.record_episodes(finished_ret, finished_len)
        # GAE per (env, agent) row through the batched kernel: rows env-major [E * A, T].
        t0 = time.perf_counter()
        values = self._denorm(val_b).astype(np.float32)
        rows = lambda x: np.ascontiguousarray(x.transpose(1, 2, 0).reshape(E * A, T))  # noqa: E731
        adv, ret = compute_gae_batched_f32(rows(rew_b), rows(values), rows(done_b),
                                           np.ascontiguousarray(self._denorm(last_v).reshape(E * A), dtype=np.float32),
                                           T, cfg.gamma, cfg.gae_lambda)
        back = lambda x: x.reshape(E, A, T).transpose(2, 0, 1)  # noqa: E731
        adv, ret = back(adv), back(ret)
        self.time_phase("gae_compute", time.perf_counter() - t0)
        self.time_phase("env_step", t_env)
        self.time_phase("policy_forward", t_pol)
        if self.value_norm is not None:
            self.value_norm.update(ret[alive_b])
            ret = self.value_norm.normalize(ret)
        return {"obs": obs_b, "state": state_b, "alive": alive_b, "actions": act_b, "log_probs": logp_b,
                "values": val_b, "advantages": adv.astype(np.float32), "returns": ret.astype(np.float32)}

    # ------------------------------------------------------------------ update
    def _group_rows(self, batch: Mapping[str, np.ndarray], g: int) -> dict[str, torch.Tensor]:
        """The group's alive rows: x = [actor input | critic input], actions, old log-probs,
        advantages, (normalised) returns and old values."""
        idx, dev = self.groups[g], self.device
        obs = torch.as_tensor(batch["obs"], device=dev)
        state = torch.as_tensor(batch["state"], device=dev)
        x = torch.cat([self._actor_input(obs, g), self._critic_input(obs, state, g)], dim=-1)   # [T, E, n_g, ...]
        mask = torch.as_tensor(batch["alive"][:, :, idx], device=dev)
        acts = torch.as_tensor(batch["actions"][:, :, idx], device=dev)
        if not self.env.discrete:
            acts = acts[..., :self.actors[g].out_dim]
        pick = lambda key: torch.as_tensor(batch[key][:, :, idx], device=dev)[mask]  # noqa: E731
        return {"x": x[mask], "actions": acts[mask], "log_probs": pick("log_probs"), "advantages": pick("advantages"),
                "returns": pick("returns"), "values": pick("values")}

    def _update(self, batch: Mapping[str, np.ndarray]) -> dict[str, Any]:
        cfg = self.config
        data = [self._group_rows(batch, g) for g in range(len(self.groups))]
        policies = [_GroupPolicy(self.actors[g], self._critic_of(g), self._actor_in(g)) for g in range(len(self.groups))]
        total_rows = sum(d["x"].shape[0] for d in data)
        params = list(self.actors.parameters()) + list(self.critics.parameters())
        stats: list[dict[str, torch.Tensor]] = []
        if total_rows == 0:
            return {}
        for _epoch in range(cfg.n_epochs):
            perms = [torch.randperm(d["x"].shape[0], generator=self.torch_gen) for d in data]
            for mb in range(cfg.n_minibatches):
                loss = 0.0
                for g, d in enumerate(data):
                    rows = perms[g].tensor_split(cfg.n_minibatches)[mb]
                    if rows.numel() == 0:
                        continue
                    lg, m = self.loss_fn(policies[g], d["x"][rows], d["actions"][rows], d["log_probs"][rows],
                                         d["advantages"][rows], d["returns"][rows], d["values"][rows])
                    loss = loss + lg * (rows.numel() * cfg.n_minibatches / total_rows)
                    stats.append(m)
                if not torch.is_tensor(loss):
                    continue
                self.optimizer.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.max_grad_norm > 0:
                    nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, foreach=True)
                self.optimizer.step()
        out = {}
        for k in stats[0]:
            out["loss/" + k] = float(torch.stack([m[k] for m in stats if k in m]).float().nanmean())
        out["train/n_updates"] = cfg.n_epochs * cfg.n_minibatches
        return out

    # ------------------------------------------------------------------ the loop
    def _iteration(self) -> tuple[dict[str, Any], bool]:
        cfg = self.config
        lr = cfg.learning_rate * self.progress_remaining if cfg.anneal_lr else cfg.learning_rate
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        keep_going = self.callbacks.on_rollout_start()
        before = dict(self.timings)
        batch = self._collect()
        self.num_timesteps += cfg.n_steps * self.env.n_envs
        rollout = {"train/mean_reward": self.mean_reward, "train/episodes": self.episodes}
        keep_going = self.callbacks.on_rollout_end(rollout) and keep_going and not self.stop_requested
        t0 = time.perf_counter()
        losses = self._update(batch)
        self.time_phase("gradient_update", time.perf_counter() - t0)
        metrics = {**rollout, **losses, "train/learning_rate": lr}
        for phase in ("env_step", "gae_compute", "gradient_update"):
            metrics[f"time/{phase}"] = self.timings.get(phase, 0.0) - before.get(phase, 0.0)
        return metrics, keep_going

    # ------------------------------------------------------------------ inference
    def _predict(self, obs: torch.Tensor, deterministic: bool) -> np.ndarray:
        """Joint actions for padded observations ``[B, A, obs_dim]`` (as the vector env gives)."""
        actions, _ = self._act(obs, deterministic, None)
        if not self.env.discrete:
            for j, a in enumerate(self.agents):
                sp = self.env.action_spaces[a]
                k = sp.shape[0]
                actions[:, j, :k] = np.clip(actions[:, j, :k], sp.low, sp.high)
        return actions

    def predict(self, obs: Any, deterministic: bool = False) -> dict[str, Any]:
        """Actions for a dict of observations ``{agent: obs}`` -> ``{agent: action}``.

        Each observation is one ``[obs_dim]`` (an ``np.int64`` / ``[k]`` action back) or a batch
        ``[B, obs_dim]`` (actions ``[B]`` / ``[B, k]``). The dict may hold any non-empty subset
        of the agents (PettingZoo leaves out agents that are done); unknown agents, wrong
        shapes or mixed batch sizes are errors. Continuous actions are clipped to the space.
        """
        if not isinstance(obs, Mapping):
            raise TypeError(f"MAPPO.predict takes a dict {{agent: observation}} for agents {self.agents}, got "
                            f"{type(obs).__name__}")
        if not obs:
            raise ValueError(f"MAPPO.predict got an empty dict; expected observations for some of {self.agents}")
        unknown = [a for a in obs if a not in self.agents]
        if unknown:
            raise ValueError(f"MAPPO.predict got observations for unknown agent(s) {unknown}; the agents are "
                             f"{self.agents}")
        batch_size: int | None = None
        single: bool | None = None
        rows: dict[str, np.ndarray] = {}
        for a, o in obs.items():
            j = self.agents.index(a)
            d = self.env.obs_dims[j]
            arr = o.detach().cpu().numpy() if isinstance(o, torch.Tensor) else np.asarray(o)
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"observation for {a!r} must hold numbers, got dtype {arr.dtype}")
            if arr.shape == (d,):
                is_single, b = True, 1
            elif arr.ndim == 2 and arr.shape[1] == d:
                is_single, b = False, arr.shape[0]
            else:
                raise ValueError(f"observation for {a!r} has shape {arr.shape}, expected ({d},) or (B, {d})")
            if single is not None and (is_single != single or b != batch_size):
                raise ValueError(f"observations mix shapes: {a!r} gives batch {arr.shape}, others a batch of "
                                 f"{'one observation' if single else batch_size}; give every agent the same")
            single, batch_size = is_single, b
            rows[a] = arr.reshape(b, d).astype(np.float32, copy=False)
        padded = np.zeros((batch_size, self.n_agents, self.env.obs_dim), np.float32)
        for a, arr in rows.items():
            j = self.agents.index(a)
            padded[:, j, :arr.shape[1]] = arr
        with torch.inference_mode():
            actions = self._predict(torch.as_tensor(padded, device=self.device), bool(deterministic))
        out: dict[str, Any] = {}
        for a in rows:
            j = self.agents.index(a)
            if self.env.discrete:
                act = actions[:, j]
                out[a] = np.int64(act[0]) if single else act
            else:
                act = actions[:, j, :self.env.act_dims[j]]
                out[a] = act[0] if single else act
        return out

    def export_policy(self) -> dict[str, Any]:
        """One deployable actor per agent (``Algorithm.export_policy``'s dict under ``agents``,
        with each agent's own spaces): ``rlox.artifacts`` writes them to ``agents/<agent>/``
        and ``rlox.inference.MultiAgentInferencePolicy`` runs them. An actor shared by a
        group gets the agent's one-hot id appended to its input by a constant layer, so
        each artifact takes the agent's raw observation."""
        from rlox.inference import AppendConstant

        agents: dict[str, Any] = {}
        for g, idx in enumerate(self.groups):
            actor = self.actors[g]
            for k, j in enumerate(idx):
                a = self.agents[j]
                net: nn.Module = actor.net
                if len(idx) > 1:
                    net = nn.Sequential(AppendConstant(np.eye(len(idx), dtype=np.float32)[k]), *actor.net)
                sub: dict[str, Any] = {"networks": {"actor": net},
                                       "observation_space": self.env.observation_spaces[a],
                                       "action_space": self.env.action_spaces[a]}
                if actor.discrete:
                    sub.update(distribution="categorical", outputs={"logits": ["actor"]})
                else:
                    sub.update(distribution="gaussian", outputs={"mean": ["actor"]},
                               tensors={"log_std": actor.log_std})
                agents[a] = sub
        return {"agents": agents}

    @property
    def env_config(self) -> dict[str, Any]:
        """The scenario settings a fresh env like the training one is made with
        (``make_multiagent_vec_env`` keywords; evaluation uses them)."""
        cfg = self.config
        return {"n_agents": cfg.n_agents, "native": cfg.native, "continuous_actions": cfg.continuous_actions,
                "max_cycles": cfg.max_cycles, "env_kwargs": dict(cfg.env_kwargs or {})}

    def evaluate(self, n_episodes: int = 10, deterministic: bool = True, seed: int = 0) -> dict[str, Any]:
        """``rlox.evaluation.evaluate_policy`` on a fresh env of the training scenario (a
        separate vector env of ``min(n_episodes, 64)`` envs seeded ``seed``): the mean per-agent
        episode return, and the per-agent returns (``agent_rewards``)."""
        from rlox.evaluation import evaluate_policy

        return evaluate_policy(self, None, n_episodes=n_episodes, deterministic=deterministic, seed=seed)

    # ------------------------------------------------------------------ persistence
    def _state_dict(self) -> dict[str, Any]:
        native = getattr(self.env, "native", False)
        return {"actors": self.actors.state_dict(), "critics": self.critics.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "value_norm": self.value_norm.state_dict() if self.value_norm is not None else None,
                "env": self.env.get_state() if native else None,
                "carry": dict(self._carry) if (native and self._carry is not None) else None,
                "episode": {"ret": self._ep_ret.copy(), "len": self._ep_len.copy()} if native else None}

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.actors.load_state_dict(state["actors"])
        self.critics.load_state_dict(state["critics"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.value_norm is not None and state.get("value_norm") is not None:
            self.value_norm.load_state_dict(state["value_norm"])
        if state.get("env") is not None and getattr(self.env, "native", False):
            # The native env's worlds and random streams: training resumes step for step.
            self.env.set_state(to_numpy_tree(state["env"]))
            if state.get("carry") is not None:
                self._carry = {k: np.array(v) for k, v in to_numpy_tree(state["carry"]).items()}
                ep = to_numpy_tree(state["episode"])
                self._ep_ret[:] = ep["ret"]
                self._ep_len[:] = ep["len"]
        else:
            self._carry = None      # a PettingZoo env cannot be snapshot: the next rollout resets it

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(env_id={self.env.env_id!r}, n_agents={self.n_agents}, "
                f"native={getattr(self.env, 'native', False)}, seed={self.seed})")
