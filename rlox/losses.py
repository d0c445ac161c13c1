"""Stateless losses: a loss takes a batch and a policy, never an env, and returns the total loss
plus detached diagnostics.

    loss_fn = PPOLoss(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01, clip_vloss=True)
    total_loss, metrics = loss_fn(policy, obs, actions, old_log_probs, advantages, returns, old_values)
    total_loss.backward()

``metrics`` values are detached 0-d tensors (``float(m["approx_kl"])`` for a number), so an
update loop can average them without a device sync per minibatch.
"""
from __future__ import annotations

import math
from typing import Any

import torch

__all__ = ["PPOLoss", "explained_variance"]


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> torch.Tensor:
    """1 - Var[returns - values] / Var[returns]: 1 is a perfect critic, 0 no better than a
    constant, negative worse; NaN when the returns have zero variance."""
    var_ret = returns.var(unbiased=False)
    if var_ret.item() == 0:
        return torch.tensor(math.nan)
    return 1 - (returns - values).var(unbiased=False) / var_ret


class PPOLoss:
    """The clipped surrogate objective of PPO (Schulman et al., 2017), with the value loss and
    entropy bonus, as the "37 implementation details" describe them.

    Args:
        clip_eps: clip range of the probability ratio.
        vf_coef: value loss coefficient.
        ent_coef: entropy bonus coefficient.
        clip_vloss: clip the value prediction to ``old_values +- clip_eps`` and take the larger
            of the clipped and unclipped squared errors.
        normalize_advantages: normalise advantages within the minibatch (mean 0, std 1).

    Call: ``loss_fn(policy, obs, actions, old_log_probs, advantages, returns, old_values,
    clip_eps=None)`` with tensors of B rows; ``policy.evaluate_actions(obs, actions)`` must return
    (log_probs [B], entropy [B], values [B]) (or ``get_logprob_and_entropy`` + ``get_value``).
    ``clip_eps`` overrides the constructor's value (for an annealed clip range).

    Returns:
        ``(total_loss, metrics)``: ``total = policy_loss + vf_coef * value_loss - ent_coef *
        entropy``; metrics ``policy_loss``, ``value_loss`` (0.5 * mean squared error),
        ``entropy``, ``approx_kl`` (the k3 estimator, mean of (ratio - 1) - log ratio),
        ``clip_fraction`` (share of rows whose ratio left [1 - eps, 1 + eps]), ``loss``, and
        ``explained_variance`` when B > 1.
    """

    def __init__(self, clip_eps: float = 0.2, vf_coef: float = 0.5, ent_coef: float = 0.01,
                 clip_vloss: bool = True, normalize_advantages: bool = True) -> None:
        for name, v, ok in (("clip_eps", clip_eps, lambda x: x > 0), ("vf_coef", vf_coef, lambda x: x >= 0),
                            ("ent_coef", ent_coef, lambda x: x >= 0)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok(v):
                raise ValueError(f"PPOLoss {name} must be a finite number "
                                 f"{'> 0' if name == 'clip_eps' else '>= 0'}, got {v!r}")
        self.clip_eps = float(clip_eps)
        self.vf_coef = float(vf_coef)
        self.ent_coef = float(ent_coef)
        self.clip_vloss = bool(clip_vloss)
        self.normalize_advantages = bool(normalize_advantages)

    def __call__(self, policy: Any, obs: torch.Tensor, actions: torch.Tensor, old_log_probs: torch.Tensor,
                 advantages: torch.Tensor, returns: torch.Tensor, old_values: torch.Tensor,
                 clip_eps: float | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        eps = self.clip_eps if clip_eps is None else float(clip_eps)
        n = obs.shape[0]
        for name, t in (("actions", actions), ("old_log_probs", old_log_probs), ("advantages", advantages),
                        ("returns", returns), ("old_values", old_values)):
            if t.shape[0] != n:
                raise ValueError(f"PPOLoss: {name} has {t.shape[0]} rows but obs has {n}; pass the "
                                 f"same minibatch rows for every argument")
        evaluate = getattr(policy, "evaluate_actions", None)
        if evaluate is not None:
            new_log_probs, entropy, values = evaluate(obs, actions)
        else:
            new_log_probs, entropy = policy.get_logprob_and_entropy(obs, actions)
            values = policy.get_value(obs)
        values = values.reshape(-1)

        if self.normalize_advantages and n > 1:
            advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)

        # Policy: clipped surrogate on the probability ratio r = pi / pi_old.
        log_ratio = new_log_probs - old_log_probs
        ratio = log_ratio.exp()
        pg_loss = torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - eps, 1 + eps)).mean()

        # Value: squared error, optionally clipped around the rollout's values (PPO2 / CleanRL).
        if self.clip_vloss:
            v_clipped = old_values + (values - old_values).clamp(-eps, eps)
            v_loss = 0.5 * torch.max((values - returns) ** 2, (v_clipped - returns) ** 2).mean()
        else:
            v_loss = 0.5 * ((values - returns) ** 2).mean()

        ent = entropy.mean()
        loss = pg_loss + self.vf_coef * v_loss - self.ent_coef * ent

        with torch.no_grad():
            # k3 estimator of KL(old || new) (Schulman, "Approximating KL divergence").
            approx_kl = ((ratio - 1) - log_ratio).mean()
            clip_fraction = ((ratio - 1).abs() > eps).float().mean()
            metrics = {"loss": loss.detach(), "policy_loss": pg_loss.detach(), "value_loss": v_loss.detach(),
                       "entropy": ent.detach(), "approx_kl": approx_kl, "clip_fraction": clip_fraction}
            if n > 1:
                var_ret = returns.var(unbiased=False)
                metrics["explained_variance"] = torch.where(
                    var_ret > 0, 1 - (returns - values.detach()).var(unbiased=False) / var_ret,
                    torch.full_like(var_ret, math.nan))
        return loss, metrics
