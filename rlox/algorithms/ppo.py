"""PPO: Proximal Policy Optimization (Schulman et al., 2017, arXiv:1707.06347).

Reading order, as in CleanRL's ppo.py: config -> networks -> rollout -> advantages -> update.

* config: ``rlox.config.PPOConfig`` (the guide's table; CleanRL's defaults).
* networks: ``rlox.policies`` actor and critic MLPs, orthogonal init, Adam with eps 1e-5
  (implementation detail 3 of "The 37 Implementation Details of PPO", Huang et al., 2022).
* rollout + advantages: the compiled rollout kernel on native envs with the default policy
  (``compiled_collection``, ``rlox.algorithms._compiled_collection``), else ``RolloutCollector``
  (vector env, truncation bootstrap, GAE in one Cython call); ``OnPolicyAlgorithm._iteration``.
* update: below. ``n_epochs`` passes over the rollout in shuffled minibatches of
  ``batch_size``; clipped surrogate + clipped value loss + entropy bonus (``PPOLoss``);
  global gradient-norm clipping; optional early stop of the epochs on ``target_kl``.
  On a CPU with the default Tanh MLP policy the same loop runs in compiled code
  (``compiled_update``, the default there; ``rlox.algorithms._compiled_update``): same
  shuffles, schedules, early stop and metrics, weights within float32 rounding of torch's.
  ``compiled_update=False`` keeps the torch loop below.

    ppo = PPO(env_id="CartPole-v1", n_envs=8, n_steps=128, n_epochs=4, clip_eps=0.2)
    metrics = ppo.train(total_timesteps=50_000)
    ppo.compiled_update            # True on a CPU (False: the torch update; switchable)
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch

from rlox.algorithms._compiled_update import CompiledUpdateMixin
from rlox.optim import adam
from rlox.algorithms.on_policy import OnPolicyAlgorithm
from rlox.collectors import RolloutBatch
from rlox.config import PPOConfig
from rlox.losses import PPOLoss

__all__ = ["PPO", "ppo_epochs"]


def ppo_epochs(algo: OnPolicyAlgorithm, minibatches: Callable[[], Iterable[Any]],
               minibatch_loss: Callable[[Any, float], tuple[torch.Tensor, dict[str, torch.Tensor]]],
               clip_eps: float) -> dict[str, Any]:
    """PPO's optimisation phase (Schulman et al., 2017, alg. 1): ``n_epochs`` passes over
    ``minibatches()``, one Adam step on ``minibatch_loss(mb, clip_eps)`` each, with SB3's
    ``target_kl`` early stop, global-norm clipping, and r2l's ``on_minibatch_loss`` /
    ``on_epoch_end`` hooks. Shared by PPO's torch update and RecurrentPPO (which differ in
    how they cut minibatches and evaluate them); returns the update's metrics."""
    cfg = algo.config
    optimizer = algo.optimizers["policy"]
    params = list(algo.policy.parameters())
    hooks = algo.update_hooks
    stats: list[dict[str, torch.Tensor]] = []
    stopped_early = False
    epochs_done = 0
    for epoch in range(cfg.n_epochs):
        for mb in minibatches():
            loss, m = minibatch_loss(mb, clip_eps)
            # Early stop (SB3-style): once the policy has moved too far from the rollout's
            # policy, skip this and all later minibatches.
            if cfg.target_kl is not None and m["approx_kl"].item() > 1.5 * cfg.target_kl:
                stopped_early = True
                break
            loss = hooks.on_minibatch_loss(loss, m)     # r2l: may inspect or scale the loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm, foreach=True)
            optimizer.step()
            stats.append(m)
        if stopped_early:
            break
        epochs_done += 1
        # r2l: after each epoch; False stops the remaining epochs.
        if hooks.needs_epoch_hook and not hooks.on_epoch_end(epoch, algo._mean_metrics(stats)):
            break
    out = algo._mean_metrics(stats)
    out["train/clip_range"] = clip_eps
    out["train/epochs_done"] = epochs_done
    out["train/n_updates"] = len(stats)
    return out


class PPO(CompiledUpdateMixin, OnPolicyAlgorithm):
    """Proximal Policy Optimization with the clipped objective.

    Args:
        env_id: a gymnasium id, an ``ENV_REGISTRY`` name, or a gymnasium env object.
        seed, callbacks, logger, device, wrappers, policy: see ``OnPolicyAlgorithm``.
        **config: ``PPOConfig`` fields (``n_envs``, ``n_steps``, ``n_epochs``, ``batch_size``,
            ``learning_rate``, ``clip_eps``, ``compiled_update``, ...).
    """

    name = "ppo"
    config_class = PPOConfig

    def _setup_optimizers(self) -> None:
        cfg = self.config
        self.optimizers = {"policy": adam(self.policy.parameters(), cfg.learning_rate, eps=1e-5)}
        self.loss_fn = PPOLoss(cfg.clip_eps, cfg.vf_coef, cfg.ent_coef, cfg.clip_vloss, cfg.normalize_advantages)
        self._setup_compiled_update()       # the kernel and its Adam, where compiled_update can run

    def _update_kernel_options(self) -> dict[str, Any]:
        """PPOLoss's settings for the compiled update (``rlox.algorithms._compiled_update``)."""
        cfg = self.config
        return dict(loss="ppo", vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef, clip_vloss=cfg.clip_vloss,
                    normalize_advantages=cfg.normalize_advantages, max_grad_norm=cfg.max_grad_norm)

    def current_clip_eps(self) -> float:
        """The clip range now: ``clip_eps``, or decayed linearly to 0 with ``anneal_clip``."""
        cfg = self.config
        return cfg.clip_eps * self.progress_remaining if cfg.anneal_clip else cfg.clip_eps

    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        hooks = self.update_hooks
        if self.compiled_update and hooks.needs_loss_hook:
            # The kernel has no torch loss per minibatch for on_minibatch_loss to see: switch to
            # the torch update (Adam's state carried over), for this and later updates.
            self.compiled_update = False
        if self.compiled_update:
            return self._kernel_update(batch)   # this loop, compiled (rlox.algorithms._compiled_update)
        cfg = self.config
        return ppo_epochs(
            self,
            lambda: batch.sample_minibatches(cfg.batch_size, shuffle=True, generator=self.torch_gen),
            lambda mb, clip_eps: self.loss_fn(self.policy, mb.obs, mb.actions, mb.log_probs, mb.advantages,
                                              mb.returns, mb.values, clip_eps=clip_eps),
            max(self.current_clip_eps(), 1e-8))
