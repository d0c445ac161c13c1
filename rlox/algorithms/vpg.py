"""VPG: vanilla policy gradient (REINFORCE with a learned baseline; Williams, 1992; GAE from
Schulman et al., 2016), as OpenAI Spinning Up describes it.

Reading order: config -> networks -> rollout -> advantages -> update.

* config: ``rlox.config.VPGConfig``.
* networks: ``rlox.policies`` actor and critic, each with its own Adam optimiser.
* rollout + advantages: the compiled rollout kernel where it runs (``compiled_collection``),
  else ``RolloutCollector`` (truncation bootstrap, GAE in Cython): ``OnPolicyAlgorithm``.
* update: one policy-gradient step on the whole rollout, ``-(A * log pi(a|s)).mean()`` with
  normalised advantages (plus an optional entropy bonus), then ``vf_iters`` full-batch steps of
  the critic on ``0.5 * (R - V)^2``.

    vpg = VPG(env_id="CartPole-v1", n_envs=4, n_steps=512)
    metrics = vpg.train(total_timesteps=100_000)
"""
from __future__ import annotations

from typing import Any

import torch
from torch import nn

from rlox.optim import adam, set_learning_rate
from rlox.algorithms.on_policy import OnPolicyAlgorithm
from rlox.collectors import RolloutBatch
from rlox.config import VPGConfig
from rlox.losses import explained_variance

__all__ = ["VPG"]


class VPG(OnPolicyAlgorithm):
    """Vanilla policy gradient with a value baseline.

    Args:
        env_id: a gymnasium id, an ``ENV_REGISTRY`` name, or a gymnasium env object.
        seed, callbacks, logger, device, wrappers, policy: see ``OnPolicyAlgorithm``.
        **config: ``VPGConfig`` fields (``learning_rate`` is the policy's, ``vf_learning_rate``
            the critic's).
    """

    name = "vpg"
    config_class = VPGConfig

    def _setup_optimizers(self) -> None:
        cfg = self.config
        self.optimizers = {
            "actor": adam(self._actor_params(), cfg.learning_rate),
            "critic": adam(self.policy.critic.parameters(), cfg.vf_learning_rate),
        }

    def _actor_params(self) -> list[nn.Parameter]:
        critic = {id(p) for p in self.policy.critic.parameters()}
        return [p for p in self.policy.parameters() if id(p) not in critic]

    def set_learning_rate(self, lr: float) -> None:
        # Anneal both optimisers by the same factor.
        scale = lr / self.config.learning_rate
        set_learning_rate([self.optimizers["actor"]], self.config.learning_rate * scale)
        set_learning_rate([self.optimizers["critic"]], self.config.vf_learning_rate * scale)

    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        cfg = self.config
        # Policy: one step of the score-function gradient with the GAE advantage as weight.
        log_probs, entropy = self.policy.get_logprob_and_entropy(batch.obs, batch.actions)
        adv = batch.advantages
        if cfg.normalize_advantages and len(batch) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        policy_loss = -(adv * log_probs).mean()
        ent = entropy.mean()
        actor_opt = self.optimizers["actor"]
        actor_opt.zero_grad(set_to_none=True)
        (policy_loss - cfg.ent_coef * ent).backward()
        if cfg.max_grad_norm > 0:
            nn.utils.clip_grad_norm_(self._actor_params(), cfg.max_grad_norm, foreach=True)
        actor_opt.step()

        # Critic: regress V(s) on the GAE returns, full batch, vf_iters steps.
        critic_opt = self.optimizers["critic"]
        for _ in range(cfg.vf_iters):
            value_loss = 0.5 * ((self.policy.get_value(batch.obs) - batch.returns) ** 2).mean()
            critic_opt.zero_grad(set_to_none=True)
            value_loss.backward()
            critic_opt.step()
        with torch.no_grad():
            values = self.policy.get_value(batch.obs)
        return {"loss/policy_loss": policy_loss.item(), "loss/value_loss": value_loss.item(),
                "loss/entropy": ent.item(),
                "loss/explained_variance": float(explained_variance(values, batch.returns))}
