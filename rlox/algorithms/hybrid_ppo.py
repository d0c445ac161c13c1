"""HybridPPO: PPO whose rollout collection and update both run in compiled code.

Same algorithm as ``rlox.algorithms.ppo`` (same config, same minibatch shuffles from the same
generator, same metrics); only where it runs differs.

* collection: the actor and critic MLPs are copied after every update into
  ``rlox._ext.hybrid.CompiledPolicy`` (C loops, float64), and ``RolloutKernel`` runs, for each
  native env in one nogil OpenMP ``prange``: forward pass, action sampling from a per-env
  xoshiro stream, env step (``ext/envs_core.pxd``), truncation bootstrap
  ``r + gamma * V(final obs)``, resets and rollout writes: no Python per step. GAE then runs
  in one ``compute_gae_batched_f32`` call.
* update (``compiled_update=True``, the default on CPU): ``rlox._ext.ppo_update.PPOUpdateKernel``
  does each minibatch step, PPOLoss + backward + grad-norm clip + Adam, in float32 without the
  GIL (BLAS sgemm for the matrix products). The torch parameters share the kernel's memory
  (``param.data`` is a view of its buffer), so ``predict``, ``save``, artifacts and the
  compiled collection policy always see the current weights; Adam's moments live in the
  kernel and are written into the torch optimizer's state for checkpoints, so checkpoints are
  the same with either update and resume is exact. Python only draws the shuffles (one
  ``torch.randperm`` per epoch, as PPO) and averages the metrics.
  ``compiled_update=False`` runs PPO's torch update instead (for comparison and tests).

    from rlox.algorithms.hybrid_ppo import HybridPPO
    ppo = HybridPPO(env_id="CartPole-v1", n_envs=16, hidden=64)
    metrics = ppo.train(total_timesteps=100_000)
    ppo.timing_summary()          # {'collection_pct': ..., 'training_pct': ...}

Limits: native envs only (``rlox.NATIVE_ENV_IDS``), Tanh MLPs (the default policy), no
observation/reward normalisation or wrappers; the compiled update needs ``device="cpu"``.
"""
from __future__ import annotations

import math
import time
from typing import Any, Mapping

import numpy as np
import torch

from rlox._ext.hybrid import CompiledPolicy, RolloutKernel
from rlox._ext.ppo_update import PPOUpdateKernel
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
        compiled_update: run the update in ``PPOUpdateKernel`` (True) or with PPO's torch
            update (False). Default: True on a CPU ``device``, False elsewhere. Also a
            property that can be switched between ``train`` calls.
        n_envs, hidden, ...: ``PPOConfig`` fields, as for ``PPO``.
        seed, callbacks, logger, device: see ``Algorithm``.
    """

    name = "hybrid_ppo"

    def __init__(self, env_id: Any = "CartPole-v1", *, compiled_update: bool | None = None,
                 **kwargs: Any) -> None:
        if not is_native(env_id):
            raise ValueError(f"HybridPPO runs the native envs only ({', '.join(NATIVE_ENV_IDS)}); got "
                             f"{env_id!r}. Use PPO for other envs")
        if kwargs.get("wrappers") or kwargs.get("normalize_obs") or kwargs.get("normalize_rewards"):
            raise ValueError("HybridPPO collects in compiled code without normalisation or wrappers; "
                             "use PPO for normalize_obs / normalize_rewards / wrappers")
        if kwargs.get("use_sde"):
            raise ValueError("HybridPPO's compiled policy samples plain Gaussian noise; use PPO for use_sde")
        if kwargs.get("activation", "tanh") != "tanh" or kwargs.get("policy") is not None:
            raise ValueError("HybridPPO's compiled policy is a Tanh MLP; use PPO for other policies")
        super().__init__(env_id, **kwargs)
        cfg = self.config
        actor, critic = _linear_pairs(self.policy.actor), _linear_pairs(self.policy.critic)
        self.compiled = CompiledPolicy(actor, critic, discrete=self.policy.discrete,
                                       log_std=None if self.policy.discrete else self._log_std(),
                                       n_streams=cfg.n_envs, seed=self.seed)
        self.kernel = RolloutKernel(self.compiled, env_id, cfg.n_envs, seed=self.seed)
        on_cpu = self.device.type == "cpu"
        if compiled_update is None:
            compiled_update = on_cpu
        elif not isinstance(compiled_update, (bool, np.bool_)):
            raise TypeError(f"compiled_update must be True, False or None, got {compiled_update!r}")
        if compiled_update and not on_cpu:
            raise ValueError(f"compiled_update=True runs the update on the CPU, but device is "
                             f"{str(self.device)!r}; pass compiled_update=False to train with torch there")
        self.update_kernel: PPOUpdateKernel | None = None
        if on_cpu:
            opt = self.optimizers["policy"].param_groups[0]
            self.update_kernel = PPOUpdateKernel(
                self.policy.obs_dim, self.policy.hidden,
                self.policy.n_actions if self.policy.discrete else self.policy.act_dim,
                self.policy.discrete, vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef,
                clip_vloss=cfg.clip_vloss, normalize_advantages=cfg.normalize_advantages,
                max_grad_norm=cfg.max_grad_norm, betas=opt["betas"], eps=opt["eps"])
            self._share_parameters()
        self._compiled_update = bool(compiled_update)

    # ------------------------------------------------------------------ the compiled update
    @property
    def compiled_update(self) -> bool:
        """Whether ``train`` updates with ``PPOUpdateKernel`` (else with PPO's torch update).
        Switching carries Adam's state across, so training continues seamlessly."""
        return self._compiled_update

    @compiled_update.setter
    def compiled_update(self, value: bool) -> None:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"compiled_update must be True or False, got {value!r}")
        if bool(value) == self._compiled_update:
            return
        if value:
            if self.update_kernel is None:
                raise ValueError(f"the compiled update runs on the CPU, but device is {str(self.device)!r}")
            self._share_parameters()
            self._adam_from_torch()
        else:
            self._adam_to_torch()
        self._compiled_update = bool(value)

    def _share_parameters(self) -> None:
        """Point every torch parameter at the kernel's buffer (current values copied in)."""
        views = self.update_kernel.parameters()
        named = dict(self.policy.named_parameters())
        if list(named) != list(views) or any(tuple(p.shape) != views[k].shape for k, p in named.items()):
            raise RuntimeError(f"the policy's parameters {[(k, tuple(p.shape)) for k, p in named.items()]} "
                               f"do not match the update kernel's layout "
                               f"{[(k, v.shape) for k, v in views.items()]}")
        with torch.no_grad():
            for k, p in named.items():
                views[k][...] = p.detach().cpu().numpy()
                p.data = torch.from_numpy(views[k])
        self._shared_ptrs = [p.data_ptr() for p in self.policy.parameters()]

    def _adam_to_torch(self) -> None:
        """Write the kernel's Adam state into the torch optimizer (checkpoints, torch update)."""
        state = self.update_kernel.get_adam_state()
        opt = self.optimizers["policy"]
        for (_, off, shape), p in zip(self.update_kernel.layout, self.policy.parameters()):
            if state["step"] == 0:
                opt.state.pop(p, None)
                continue
            n = int(np.prod(shape))
            opt.state[p] = {
                "step": torch.tensor(float(state["step"]), dtype=torch.float32),
                "exp_avg": torch.from_numpy(state["exp_avg"][off:off + n].reshape(shape).copy()),
                "exp_avg_sq": torch.from_numpy(state["exp_avg_sq"][off:off + n].reshape(shape).copy())}

    def _adam_from_torch(self) -> None:
        """Read the torch optimizer's Adam state into the kernel (after load, or a switch)."""
        opt = self.optimizers["policy"]
        params = list(self.policy.parameters())
        n = self.update_kernel.n_params
        if not any(p in opt.state for p in params):
            self.update_kernel.set_adam_state(0, np.zeros(n, np.float32), np.zeros(n, np.float32))
            return
        steps = {int(opt.state[p]["step"]) for p in params if p in opt.state}
        if len(steps) != 1 or not all(p in opt.state for p in params):
            raise ValueError(f"the optimizer's parameters are at different Adam steps ({sorted(steps)}); "
                             f"the compiled update keeps one step count for all of them")
        flat = lambda key: np.concatenate([opt.state[p][key].detach().cpu().numpy().reshape(-1)  # noqa: E731
                                           for p in params]).astype(np.float32, copy=False)
        self.update_kernel.set_adam_state(steps.pop(), flat("exp_avg"), flat("exp_avg_sq"))

    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        out = self._kernel_update(batch) if self._compiled_update else super()._update(batch)
        self._sync_weights()                # the next rollout samples from the new weights
        return out

    def _kernel_update(self, batch: RolloutBatch) -> dict[str, Any]:
        """PPO's update (epochs of shuffled minibatches) in PPOUpdateKernel."""
        cfg = self.config
        kernel = self.update_kernel
        if [p.data_ptr() for p in self.policy.parameters()] != self._shared_ptrs:
            self._share_parameters()        # a parameter's tensor was replaced: share it again
        clip_eps = max(self.current_clip_eps(), 1e-8)
        lr = float(self.optimizers["policy"].param_groups[0]["lr"])
        kl_limit = math.inf if cfg.target_kl is None else 1.5 * cfg.target_kl
        n = len(batch)
        kernel.bind(batch.obs.numpy(), batch.actions.numpy(), batch.log_probs.numpy(),
                    batch.advantages.numpy(), batch.returns.numpy(), batch.values.numpy())
        stopped = False
        for epoch in range(cfg.n_epochs):
            # PPO's shuffles, from the same generator calls (RolloutBatch.sample_minibatches)
            order = torch.randperm(n, generator=self.torch_gen).numpy() if cfg.batch_size < n else None
            # Early stop (SB3-style): a minibatch whose approx_kl > 1.5 target_kl is not
            # stepped, and ends the update.
            stopped = kernel.run_epoch(order, cfg.batch_size, lr, clip_eps, kl_limit)
            if stopped:
                break
        out = {f"loss/{k}": v for k, v in kernel.metrics().items()}
        out["train/clip_range"] = clip_eps
        out["train/epochs_done"] = epoch + (0 if stopped else 1)
        out["train/n_updates"] = kernel.n_updates
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

    # The compiled envs and sampling streams are saved too, so a resumed run continues exactly;
    # Adam's state goes through the torch optimizer's, so either update reads the checkpoint.
    def _state_dict(self) -> dict[str, Any]:
        if self._compiled_update:
            self._adam_to_torch()
        state = super()._state_dict()
        state["kernel"] = self.kernel.get_state()
        state["compiled_rng"] = self.compiled.get_rng_state()
        return state

    def _load_state_dict(self, state: Mapping[str, Any]) -> None:
        super()._load_state_dict(state)
        self.kernel.set_state(to_numpy_tree(state["kernel"]))
        self.compiled.set_rng_state(to_numpy_tree(state["compiled_rng"]))
        if self.update_kernel is not None:
            self._adam_from_torch()
        self._sync_weights()
