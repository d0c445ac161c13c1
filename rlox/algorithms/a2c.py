"""A2C: synchronous Advantage Actor-Critic (Mnih et al., 2016, arXiv:1602.01783).

Reading order: config -> networks -> rollout -> advantages -> update.

* config: ``rlox.config.A2CConfig`` (SB3's defaults: 5 steps per env, RMSprop with alpha 0.99
  and eps 1e-5, lr 7e-4, GAE lambda 1, i.e. n-step Monte Carlo returns).
* networks: the same ``rlox.policies`` actor and critic as PPO.
* rollout + advantages: the compiled rollout kernel where it runs (``compiled_collection``),
  else ``RolloutCollector`` (truncation bootstrap, GAE in Cython): ``OnPolicyAlgorithm``.
* update: one gradient step on the whole rollout: policy-gradient loss
  ``-(A * log pi(a|s)).mean()``, value loss ``0.5 * (R - V)^2`` (``vf_coef``), entropy bonus.
  On a CPU with the default Tanh MLP policy the same step runs in compiled code
  (``compiled_update``, the default there; ``rlox.algorithms._compiled_update``, the kernel
  PPO's update uses, with A2C's loss and torch's RMSprop step): weights within float32
  rounding of the torch step below, which ``compiled_update=False`` keeps.

    a2c = A2C(env_id="CartPole-v1", n_envs=8, n_steps=5, learning_rate=7e-4, gae_lambda=1.0)
    metrics = a2c.train(total_timesteps=50_000)
    a2c.compiled_update            # True on a CPU (False: the torch update; switchable)
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlox.algorithms._compiled_update import CompiledUpdateMixin
from rlox.optim import adam
from rlox.algorithms.on_policy import OnPolicyAlgorithm
from rlox.collectors import RolloutBatch
from rlox.config import A2CConfig
from rlox.losses import explained_variance

__all__ = ["A2C"]


class A2C(CompiledUpdateMixin, OnPolicyAlgorithm):
    """Advantage Actor-Critic: one synchronous gradient step per rollout.

    Args:
        env_id: a gymnasium id, an ``ENV_REGISTRY`` name, or a gymnasium env object.
        seed, callbacks, logger, device, wrappers, policy: see ``OnPolicyAlgorithm``.
        **config: ``A2CConfig`` fields (``n_envs``, ``n_steps``, ``learning_rate``,
            ``optimizer``, ``compiled_update``, ...).
    """

    name = "a2c"
    config_class = A2CConfig

    def _setup_optimizers(self) -> None:
        cfg = self.config
        params = self.policy.parameters()
        if cfg.optimizer == "rmsprop":
            # SB3/OpenAI baselines: RMSprop(alpha=0.99, eps=1e-5); TF's epsilon sits inside the sqrt,
            # torch's outside, a difference these small nets do not notice. foreach: one call for all
            # parameters (bit-identical to the per-tensor loop, a third less time per A2C update).
            opt = torch.optim.RMSprop(params, lr=cfg.learning_rate, alpha=0.99, eps=cfg.rms_prop_eps, foreach=True)
        else:
            opt = adam(params, cfg.learning_rate, eps=cfg.rms_prop_eps)
        self.optimizers = {"policy": opt}
        self._setup_compiled_update()       # the kernel and its optimizer, where compiled_update can run

    def _update_kernel_options(self) -> dict[str, Any]:
        """A2C's loss for the compiled update (``rlox.algorithms._compiled_update``); the
        optimizer's settings come from the torch optimizer above."""
        cfg = self.config
        return dict(loss="a2c", vf_coef=cfg.vf_coef, ent_coef=cfg.ent_coef, clip_vloss=False,
                    normalize_advantages=cfg.normalize_advantages, max_grad_norm=cfg.max_grad_norm)

    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        if self.compiled_update and self.update_hooks.needs_loss_hook:
            # The kernel has no torch loss for on_minibatch_loss to see: switch to the torch
            # update (the optimizer's state carried over), for this and later updates.
            self.compiled_update = False
        if self.compiled_update:
            return self._kernel_step(batch)     # this step, compiled (rlox.algorithms._compiled_update)
        cfg = self.config
        log_probs, entropy, values = self.policy.evaluate_actions(batch.obs, batch.actions)
        advantages = batch.advantages
        if cfg.normalize_advantages and len(batch) > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        policy_loss = -(advantages * log_probs).mean()
        value_loss = 0.5 * ((batch.returns - values) ** 2).mean()
        ent = entropy.mean()
        loss = policy_loss + cfg.vf_coef * value_loss - cfg.ent_coef * ent
        # r2l's A2C "before update" hook: may inspect or scale the loss.
        loss = self.update_hooks.on_minibatch_loss(loss, {
            "loss": loss.detach(), "policy_loss": policy_loss.detach(), "value_loss": value_loss.detach(),
            "entropy": ent.detach()})

        optimizer = self.optimizers["policy"]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm, foreach=True)
        optimizer.step()
        stats = torch.stack([loss.detach(), policy_loss.detach(), value_loss.detach(), ent.detach(),
                             torch.as_tensor(explained_variance(values.detach(), batch.returns), dtype=loss.dtype)])
        return dict(zip(("loss/loss", "loss/policy_loss", "loss/value_loss", "loss/entropy",
                         "loss/explained_variance"), stats.tolist()))
