"""HybridPPO: PPO whose rollout collection and update both run in compiled code.

Same algorithm as ``rlox.algorithms.ppo`` (same config, same minibatch shuffles from the same
generator, same metrics); only where it runs differs.

* collection: the actor and critic MLPs are copied after every update into
  ``rlox._ext.hybrid.CompiledPolicy`` (C loops, float64), and ``RolloutKernel`` runs, for each
  native env in one nogil OpenMP ``prange``: forward pass, action sampling from a per-env
  xoshiro stream, env step (``ext/envs_core.pxd``), truncation bootstrap
  ``r + gamma * V(final obs)``, resets and rollout writes: no Python per step. GAE then runs
  in one ``compute_gae_batched_f32`` call.
* update: PPO's (``rlox.algorithms.ppo``), which on a CPU device runs in compiled code by
  default (``compiled_update``: ``rlox._ext.ppo_update.PPOUpdateKernel``, see
  ``rlox.algorithms._compiled_update``), with the torch parameters sharing the kernel's
  memory; after each update the weights are copied into the compiled collection policy.
  ``compiled_update=False`` runs PPO's torch update instead (for comparison and tests).

    from rlox.algorithms.hybrid_ppo import HybridPPO
    ppo = HybridPPO(env_id="CartPole-v1", n_envs=16, hidden=64)
    metrics = ppo.train(total_timesteps=100_000)
    ppo.timing_summary()          # {'collection_pct': ..., 'training_pct': ...}

Limits: native envs only (``rlox.NATIVE_ENV_IDS``), Tanh MLPs (the default policy), no gSDE,
no observation/reward normalisation or wrappers; the compiled update needs ``device="cpu"``.
"""
from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np
import torch

from rlox._ext.hybrid import CompiledPolicy, RolloutKernel
from rlox.advantages import compute_gae_batched_f32
from rlox.algorithms.base import to_numpy_tree
from rlox.algorithms.ppo import PPO
from rlox.collectors import RolloutBatch
from rlox.envs import NATIVE_ENV_IDS, is_native

__all__ = ["HybridPPO"]


def _linear_pairs(net: torch.nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
    return [(m.weight.detach().cpu().double().numpy(), m.bias.detach().cpu().double().numpy())
            for m in net if isinstance(m, torch.nn.Linear)]


class HybridPPO(PPO):
    """PPO with compiled rollout collection and a compiled update, on the native envs.

    Args:
        env_id: a native env id (one of ``rlox.NATIVE_ENV_IDS``).
        compiled_update: as for ``PPO`` (a ``PPOConfig`` field): the update in
            ``PPOUpdateKernel`` (True) or with PPO's torch update (False); default: True on
            a CPU ``device``, False elsewhere. Also a property that can be switched between
            ``train`` calls.
        n_envs, hidden, ...: ``PPOConfig`` fields, as for ``PPO``.
        seed, callbacks, logger, device: see ``Algorithm``.
    """

    name = "hybrid_ppo"

    def __init__(self, env_id: Any = "CartPole-v1", **kwargs: Any) -> None:
        if not is_native(env_id):
            raise ValueError(f"HybridPPO runs the native envs only ({', '.join(NATIVE_ENV_IDS)}); got "
                             f"{env_id!r}. Use PPO for other envs")
        if kwargs.get("wrappers") or kwargs.get("normalize_obs") or kwargs.get("normalize_rewards"):
            raise ValueError("HybridPPO collects in compiled code without normalisation or wrappers; "
                             "use PPO for normalize_obs / normalize_rewards / wrappers")
        if kwargs.get("rollout_episodes") is not None or kwargs.get("vec_env", "sync") != "sync":
            raise ValueError("HybridPPO's compiled collection steps n_steps per env on native envs; use PPO for "
                             "rollout_episodes / vec_env='async'")
        if kwargs.get("use_sde"):
            raise ValueError("HybridPPO's compiled policy samples plain Gaussian noise; use PPO for use_sde")
        if kwargs.get("activation", "tanh") != "tanh" or kwargs.get("policy") is not None:
            raise ValueError("HybridPPO's compiled policy is a Tanh MLP; use PPO for other policies")
        super().__init__(env_id, **kwargs)  # PPO sets up the update (compiled_update: see PPOConfig)
        cfg = self.config
        actor, critic = _linear_pairs(self.policy.actor), _linear_pairs(self.policy.critic)
        self.compiled = CompiledPolicy(actor, critic, discrete=self.policy.discrete,
                                       log_std=None if self.policy.discrete else self._log_std(),
                                       n_streams=cfg.n_envs, seed=self.seed)
        self.kernel = RolloutKernel(self.compiled, env_id, cfg.n_envs, seed=self.seed)

    # ------------------------------------------------------------------ the update
    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        out = super()._update(batch)        # PPO's: compiled (PPOUpdateKernel) or torch
        self._sync_weights()                # the next rollout samples from the new weights
        return out

    def _log_std(self) -> np.ndarray:
        return self.policy.log_std.detach().cpu().double().numpy()

    def _sync_weights(self) -> None:
        """Copy the torch weights into the compiled policy (after each update)."""
        self.compiled.set_weights(_linear_pairs(self.policy.actor), _linear_pairs(self.policy.critic),
                                  None if self.policy.discrete else self._log_std())

    def _collect_rollout(self) -> RolloutBatch:
        """The rollout in compiled code (the compiled policy holds the latest weights)."""
        self.stop_requested = False
        cfg = self.config
        t0 = time.perf_counter()
        out = self.kernel.collect(cfg.n_steps, cfg.gamma)
        t1 = time.perf_counter()
        N, T = cfg.n_envs, cfg.n_steps
        adv, ret = compute_gae_batched_f32(out["rewards"].reshape(-1), out["values"].reshape(-1),
                                           out["dones"].reshape(-1), out["last_values"],
                                           n_steps=T, gamma=cfg.gamma, lam=cfg.gae_lambda)
        t2 = time.perf_counter()
        self.time_phase("env_step", t1 - t0)
        self.time_phase("gae_compute", t2 - t1)
        self.record_episodes(out["episode_returns"], out["episode_lengths"])
        actions = out["actions"].reshape(N * T).astype(np.int64) if self.policy.discrete else \
            out["actions"].reshape(N * T, -1)
        t = torch.from_numpy
        dev = self.device
        return RolloutBatch(obs=t(out["obs"].reshape(N * T, -1)).to(dev), actions=t(actions).to(dev),
                            log_probs=t(out["log_probs"].reshape(-1)).to(dev),
                            values=t(out["values"].reshape(-1)).to(dev),
                            rewards=t(out["rewards"].reshape(-1)).to(dev),
                            dones=t(out["dones"].reshape(-1)).to(dev),
                            advantages=t(adv).to(dev), returns=t(ret).to(dev))

    def timing_summary(self) -> dict[str, float]:
        """Share of wall time (percent) spent collecting (compiled rollout + GAE) and training
        (gradient updates and weight sync), over all ``train`` calls so far."""
        collect = self.timings.get("env_step", 0.0) + self.timings.get("gae_compute", 0.0)
        train = self.timings.get("gradient_update", 0.0)
        total = collect + train
        if total <= 0:
            return {"collection_pct": 0.0, "training_pct": 0.0}
        return {"collection_pct": round(100.0 * collect / total, 1),
                "training_pct": round(100.0 * train / total, 1)}

    # The compiled envs and sampling streams are saved too, so a resumed run continues exactly
    # (PPO saves the weights and Adam's state, whichever update wrote them).
    def _state_dict(self) -> dict[str, Any]:
        state = super()._state_dict()
        state["kernel"] = self.kernel.get_state()
        state["compiled_rng"] = self.compiled.get_rng_state()
        return state

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        super()._load_state_dict(state)
        self.kernel.set_state(to_numpy_tree(state["kernel"]))
        self.compiled.set_rng_state(to_numpy_tree(state["compiled_rng"]))
        self._sync_weights()
