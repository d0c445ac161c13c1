"""TRPO: Trust Region Policy Optimization (Schulman et al., 2015, arXiv:1502.05477).

Reading order: config -> networks -> rollout -> advantages -> update.

* config: ``rlox.config.TRPOConfig`` (SB3-contrib's defaults: max_kl 0.01, 15 CG iterations,
  damping 0.1, 10 line-search steps shrinking by 0.8, critic lr 1e-3 for 10 epochs).
* networks: ``rlox.policies`` actor and critic; only the critic has an optimiser.
* rollout + advantages: the compiled rollout kernel where it runs (``compiled_collection``),
  else ``RolloutCollector`` (truncation bootstrap, GAE in Cython): ``OnPolicyAlgorithm``.
* update, the natural-gradient step:
    1. g = grad of the surrogate L(theta) = mean(pi/pi_old * A) (+ entropy bonus);
    2. solve F x = g by conjugate gradient, F the Fisher matrix, used only through
       Fisher-vector products F v = grad((grad KL) . v) + damping * v;
    3. full step s = sqrt(2 * max_kl / (x . F x)) * x;
       KL here is per sample, over the action's independent components either averaged
       (``kl_reduction="mean"``, sb3-contrib's ``kl_divergence(...).mean()``, which the zoo's
       target_kl values were tuned with) or summed (``"sum"``: the joint distribution's KL, as in
       the paper). With d components, "sum" at (d * max_kl, d * cg_damping) takes the same step
       as "mean" at (max_kl, cg_damping);
    4. backtracking line search on theta + shrink^k * s: accept the first step whose mean
       KL(old || new) <= max_kl and whose surrogate improves; otherwise keep theta.
  Then the critic: ``vf_epochs`` epochs of minibatch regression on the returns.

    trpo = TRPO(env_id="Pendulum-v1", n_envs=8, n_steps=256)
    metrics = trpo.train(total_timesteps=100_000)
"""
from __future__ import annotations

from typing import Any, Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector, vector_to_parameters

from rlox.optim import adam
from rlox.algorithms.on_policy import OnPolicyAlgorithm
from rlox.collectors import RolloutBatch
from rlox.config import TRPOConfig
from rlox.losses import explained_variance

__all__ = ["TRPO", "conjugate_gradient"]


def conjugate_gradient(matvec: Callable[[torch.Tensor], torch.Tensor], b: torch.Tensor, iters: int,
                       tol: float = 1e-10) -> torch.Tensor:
    """Solve ``A x = b`` for symmetric positive-definite ``A`` given as ``matvec`` (x0 = 0)."""
    x = torch.zeros_like(b)
    r = b.clone()
    p = b.clone()
    rr = r.dot(r)
    for _ in range(iters):
        if rr.item() < tol:
            break
        Ap = matvec(p)
        alpha = rr / (p.dot(Ap) + 1e-12)
        x += alpha * p
        r -= alpha * Ap
        rr_new = r.dot(r)
        p = r + (rr_new / rr) * p
        rr = rr_new
    return x


class TRPO(OnPolicyAlgorithm):
    """Trust Region Policy Optimization with a conjugate-gradient natural step.

    Args:
        env_id: a gymnasium id, an ``ENV_REGISTRY`` name, or a gymnasium env object.
        seed, callbacks, logger, device, wrappers, policy: see ``OnPolicyAlgorithm``.
        **config: ``TRPOConfig`` fields (``learning_rate`` is the critic's).
    """

    name = "trpo"
    config_class = TRPOConfig

    def _setup_optimizers(self) -> None:
        critic_ids = {id(p) for p in self.policy.critic.parameters()}
        self.actor_params = [p for p in self.policy.parameters() if id(p) not in critic_ids]
        # eps 1e-5: SB3's ActorCriticPolicy default for Adam, which sb3-contrib's critic steps use.
        self.optimizers = {"critic": adam(self.policy.critic.parameters(), self.config.learning_rate, eps=1e-5)}

    def _kl_components(self) -> int:
        """Independent action components the per-sample KL is a sum over (TRPO takes Box and
        Discrete spaces; a Discrete action is one component)."""
        space = self.action_space
        return int(np.prod(space.shape)) if isinstance(space, gym.spaces.Box) else 1

    def _mean_kl(self, old_params: torch.Tensor, obs: torch.Tensor) -> torch.Tensor:
        kl = self.policy.kl(old_params, self.policy.dist_params(obs)).mean()
        return kl / self._kl_components() if self.config.kl_reduction == "mean" else kl

    def _surrogate(self, batch: RolloutBatch, adv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        log_probs, entropy = self.policy.get_logprob_and_entropy(batch.obs, batch.actions)
        ratio = (log_probs - batch.log_probs).exp()
        return (ratio * adv).mean() + self.config.ent_coef * entropy.mean(), entropy.mean()

    def _update(self, batch: RolloutBatch) -> dict[str, Any]:
        cfg = self.config
        policy, params = self.policy, self.actor_params
        adv = batch.advantages
        if cfg.normalize_advantages and len(batch) > 1:
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        with torch.no_grad():
            old_params = policy.dist_params(batch.obs)

        # 1. Policy gradient of the surrogate.
        surr, entropy = self._surrogate(batch, adv)
        g = parameters_to_vector(torch.autograd.grad(surr, params))

        # 2. Fisher-vector products through the Hessian of the mean KL (Pearlmutter trick).
        kl = self._mean_kl(old_params, batch.obs)
        grad_kl = parameters_to_vector(torch.autograd.grad(kl, params, create_graph=True))

        def fisher_vector(v: torch.Tensor) -> torch.Tensor:
            hv = torch.autograd.grad(grad_kl.dot(v), params, retain_graph=True)
            return parameters_to_vector(hv) + cfg.cg_damping * v

        x = conjugate_gradient(fisher_vector, g, cfg.cg_iters)

        # 3. The largest step along x that stays inside the trust region (quadratic model).
        shs = 0.5 * x.dot(fisher_vector(x))
        step = x * torch.sqrt(cfg.max_kl / (shs + 1e-12))
        expected = g.dot(step)

        # 4. Backtracking line search on the true KL and surrogate.
        theta = parameters_to_vector(params).detach()
        accepted, new_kl, improvement = False, 0.0, 0.0
        with torch.no_grad():
            for k in range(cfg.line_search_steps):
                vector_to_parameters(theta + (cfg.line_search_shrink ** k) * step, params)
                new_surr, _ = self._surrogate(batch, adv)
                new_kl = float(self._mean_kl(old_params, batch.obs))
                improvement = float(new_surr - surr)
                if new_kl <= cfg.max_kl and improvement > 0:
                    accepted = True
                    break
            if not accepted:
                vector_to_parameters(theta, params)
                new_kl, improvement = 0.0, 0.0

        # Critic: minibatch regression on the GAE returns.
        critic_opt = self.optimizers["critic"]
        for _ in range(cfg.vf_epochs):
            for mb in batch.sample_minibatches(cfg.batch_size, shuffle=True, generator=self.torch_gen):
                value_loss = 0.5 * ((policy.get_value(mb.obs) - mb.returns) ** 2).mean()
                critic_opt.zero_grad(set_to_none=True)
                value_loss.backward()
                if cfg.max_grad_norm > 0:
                    nn.utils.clip_grad_norm_(policy.critic.parameters(), cfg.max_grad_norm, foreach=True)
                critic_opt.step()
        with torch.no_grad():
            values = policy.get_value(batch.obs)
        return {"loss/policy_loss": -surr.item(), "loss/value_loss": value_loss.item(),
                "loss/entropy": entropy.item(), "loss/kl": new_kl, "loss/improvement": improvement,
                "loss/expected_improvement": float(expected), "loss/line_search_accepted": float(accepted),
                "loss/explained_variance": float(explained_variance(values, batch.returns))}
