"""GRPO: Group Relative Policy Optimization (Shao et al., 2024, "DeepSeekMath"), with the
variants TRL ships: DAPO (Yu et al., 2025: clip-higher, token-level mean), Dr. GRPO (Liu et al.,
2025: no length or std normalisation) and BNPO.

Per prompt, ``group_size`` completions are sampled; each gets a scalar reward; its advantage is
its reward minus the group's mean (over the group's std, the batch's, or nothing: ``scale_rewards``);
every completion token carries its sequence's advantage in a clipped-ratio objective, with a k3
KL penalty to a frozen reference:

    ratio_t = pi(o_t | q, o_<t) / pi_old(o_t | q, o_<t)
    loss_t  = -min(ratio_t * A, clip(ratio_t, 1 - eps, 1 + eps_high) * A) + beta * ratio_t * k3_t
    k3_t    = exp(ref_t - logp_t) - (ref_t - logp_t) - 1           (Schulman, 2020)

The ``ratio_t`` on the KL term (``kl_bias_correction``, on by default as in TRL >= 1.x's
``use_bias_correction_kl``; DeepSeek-V3.2) equals 1 on-policy, so the loss value is unchanged,
but its gradient adds ``k3_t * grad logp_t``: the score-function term that makes the sampled
gradient the unbiased gradient of the reverse KL(pi || pi_ref). Without it (DeepSeekMath's
original loss) the expected gradient is that of the forward KL(pi_ref || pi); see
benchmarks/results/llm_algos.md, section 1.

    grpo = GRPO(model=my_lm, ref_model=ref_lm, reward_fn=reward_function, group_size=4,
                kl_coef=0.1, max_new_tokens=64)
    metrics = grpo.train_step(prompt_batch)
    grpo.train(dataset, n_steps=100)
"""
from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import torch

from rlox.algorithms.llm_base import LLMAlgorithm
from rlox.config import GRPOConfig
from rlox.llm import compute_batch_group_advantages, compute_batch_token_kl_schulman_f32
from rlox.rewards import resolve_reward_fns, score_completions

__all__ = ["GRPO", "GRPOConfig", "grpo_loss"]


# ---------------------------------------------------------------------- the loss (gradient flows: torch)
def grpo_loss(logps: torch.Tensor, old_logps: torch.Tensor, ref_logps: torch.Tensor | None,
              advantages: torch.Tensor, mask: torch.Tensor, *, loss_type: str = "grpo", epsilon: float = 0.2,
              epsilon_high: float | None = None, kl_coef: float = 0.0,
              max_new_tokens: int | None = None,
              kl_bias_correction: bool = True) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """The GRPO objective on ``[B, T]`` completion log-probs (TRL's formulas).

    Args:
        logps: the policy's per-token log-probs (with gradient); ``old_logps`` the sampling
            policy's (detached); ``ref_logps`` the reference's (None when ``kl_coef == 0``).
        advantages: ``[B]``, one per completion. ``mask``: ``[B, T]``, 1 on completion tokens.
        loss_type: "grpo" (mean over each sequence's tokens, then over sequences), "bnpo" and
            "dapo" (mean over all tokens), "dr_grpo" (sum / (B * max_new_tokens)).
        kl_bias_correction: multiply the k3 term by the (unclipped) ratio, TRL's
            ``use_bias_correction_kl``: the same value on-policy, the unbiased reverse-KL gradient.

    Returns:
        the loss and detached diagnostics (``kl`` mean per token, ``clip_fraction``).
    """
    eps_high = epsilon if epsilon_high is None else epsilon_high
    ratio = torch.exp(logps - old_logps)
    clipped = torch.clamp(ratio, 1 - epsilon, 1 + eps_high)
    A = advantages[:, None]
    per_token = -torch.min(ratio * A, clipped * A)
    kl = None
    if kl_coef != 0.0:
        d = ref_logps - logps
        kl = torch.exp(d) - d - 1                                     # k3, Schulman (2020)
        # importance weight on the KL term (DeepSeek-V3.2; TRL's use_bias_correction_kl): the
        # score-function term k3 * grad logp makes it the unbiased reverse-KL gradient
        per_token = per_token + kl_coef * (kl * ratio if kl_bias_correction else kl)
    if loss_type == "grpo":
        loss = ((per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    elif loss_type in ("bnpo", "dapo"):
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1.0)
    elif loss_type == "dr_grpo":
        loss = (per_token * mask).sum() / (per_token.shape[0] * max_new_tokens)
    else:
        raise ValueError(f"loss_type must be 'grpo', 'bnpo', 'dapo' or 'dr_grpo', got {loss_type!r}")
    with torch.no_grad():
        n = mask.sum().clamp(min=1.0)
        is_clipped = ((ratio < 1 - epsilon) & (A < 0)) | ((ratio > 1 + eps_high) & (A > 0))
        info = {"clip_fraction": (is_clipped.float() * mask).sum() / n,
                "kl": ((kl * mask).sum() / n) if kl is not None else torch.zeros(())}
    return loss, info


class GRPO(LLMAlgorithm):
    """GRPO on a transformers causal LM.

    Args:
        model, ref_model: the policy and the frozen reference (optional when ``kl_coef == 0``;
            None otherwise: a frozen copy of ``model``).
        reward_fn: ``reward_fn(completions, **kwargs)`` -> one float per completion (TRL's
            convention: kwargs hold ``prompts``, ``completion_ids`` and the dataset's other
            columns), ``reward_fn(prompts, completions)``, a ``REWARD_REGISTRY`` name, or a list of
            those (weighted by ``reward_weights``).
        tokenizer: for string prompts; completions are then passed to rewards as text.
        **config: ``GRPOConfig`` fields: ``group_size``, ``kl_coef``, ``max_new_tokens``,
            ``temperature``, ``top_p``, ``epsilon``, ``loss_type``, ``learning_rate``, ...
    """

    name: ClassVar[str] = "grpo"
    config_class: ClassVar[type] = GRPOConfig

    def __init__(self, model: Any, ref_model: Any = None, reward_fn: Any = None, **kwargs: Any) -> None:
        if reward_fn is None:
            raise TypeError("GRPO needs reward_fn: reward_fn(completions, **kwargs) -> list of floats, a "
                            "REWARD_REGISTRY name, or a list of those")
        super().__init__(model, ref_model, **kwargs)
        self.reward_fns = resolve_reward_fns(reward_fn, self.config.reward_weights, "GRPO")

    def _uses_ref(self) -> bool:
        return self.config.kl_coef != 0.0

    # ------------------------------------------------------------------ inputs
    def train_step(self, prompt_batch: Any, attention_mask: Any = None, **columns: Any) -> dict[str, Any]:
        """Sample, score and update on one batch of prompts (``num_iterations`` optimiser steps).

        Args:
            prompt_batch: a LongTensor ``[B, T]`` (``attention_mask`` marks left padding), a list
                of token-id lists, a list of strings (with a tokenizer), or a list of dataset rows
                (dicts with "prompt" and extra columns).
            **columns: extra per-prompt lists handed to the reward functions (e.g. ``answer=``).

        Returns:
            ``reward_mean``, ``reward_std``, ``kl``, ``clip_fraction``, ``completion_length``,
            ``loss``, ``tokens_per_s``, ... (plain names).
        """
        items = self._rows(prompt_batch, attention_mask, columns)
        t0 = time.perf_counter()
        metrics = self._learn([items])
        self.time_phase("train_step", time.perf_counter() - t0)
        self.last_metrics = metrics
        return metrics

    # ------------------------------------------------------------------ collection: sample and score
    def _collect(self, rows: list[Any]) -> dict[str, Any]:
        cfg = self.config
        G = cfg.group_size
        toks, columns = self._prompts_of(rows)
        t0 = time.perf_counter()
        completions, ended = self._generate(toks.ids, G)
        t_gen = time.perf_counter() - t0
        prompt_ids = [p for p in toks.ids for _ in range(G)]
        shown_prompts = [p for p in toks.display() for _ in range(G)]
        shown = [self.decode(c) for c in completions] if self.tokenizer is not None else [list(c) for c in completions]
        rep_cols = {k: [v for v in vals for _ in range(G)] for k, vals in columns.items()}
        t1 = time.perf_counter()
        rewards, per_fn = score_completions(self.reward_fns, cfg.reward_weights, shown_prompts, shown,
                                            [list(c) for c in completions], rep_cols)
        t_rew = time.perf_counter() - t1
        # group-relative advantages: no gradient flows, so the Cython kernel computes them
        adv = compute_batch_group_advantages(rewards, group_size=G, eps=cfg.advantage_eps, scale=cfg.scale_rewards)
        # a completion cut at max_new_tokens (no EOS) may be left out of the loss (DAPO's overlong filtering)
        keep = np.array([e or not cfg.mask_truncated_completions for e in ended], dtype=np.float32)
        self.time_phase("generation", t_gen)
        self.time_phase("rewards", t_rew)
        return {"prompts": prompt_ids, "completions": completions, "rewards": rewards, "per_fn": per_fn,
                "advantages": torch.from_numpy(adv.astype(np.float32)).to(self.device),
                "keep": torch.from_numpy(keep).to(self.device), "ended": ended, "t_gen": t_gen}

    # ------------------------------------------------------------------ learning
    def _learn(self, micro_batches: list[list[Any]]) -> dict[str, Any]:
        cfg = self.config
        t0 = time.perf_counter()
        batches = [self._collect(rows) for rows in micro_batches]
        t_fwd = time.perf_counter()
        for b in batches:
            with torch.no_grad():
                # pi_old: the sampling policy; with one update per generation it equals pi (TRL)
                b["old"] = (self.logprobs(self.model, b["prompts"], b["completions"], temperature=cfg.temperature)[0]
                            if cfg.num_iterations > 1 else None)
            b["ref"] = (self.ref_logprobs(b["prompts"], b["completions"], temperature=cfg.temperature)
                        if cfg.kl_coef != 0.0 else None)
        losses, clips, steps = [], [], []
        for _ in range(cfg.num_iterations):          # mu updates per generation batch
            for b in batches:
                logps, mask = self.logprobs(self.model, b["prompts"], b["completions"], temperature=cfg.temperature)
                mask = mask * b["keep"][:, None]
                old = b["old"] if b["old"] is not None else logps.detach()
                loss, info = grpo_loss(logps, old, b["ref"], b["advantages"], mask, loss_type=cfg.loss_type,
                                       epsilon=cfg.epsilon, epsilon_high=cfg.epsilon_high, kl_coef=cfg.kl_coef,
                                       max_new_tokens=cfg.max_new_tokens, kl_bias_correction=cfg.kl_bias_correction)
                self._backward(loss, 1.0 / len(batches))
                losses.append(float(loss.detach()))
                clips.append(float(info["clip_fraction"]))
                b["mask"], b["logps"] = mask, logps.detach()
            steps.append(self._optimizer_step())
            self.num_timesteps += 1
        t_train = time.perf_counter() - t_fwd
        self.time_phase("training", t_train)
        rewards = np.concatenate([b["rewards"] for b in batches])
        self._recent_rewards = (self._recent_rewards + rewards.tolist())[-100:]
        lengths = np.array([len(c) for b in batches for c in b["completions"]], dtype=np.float64)
        n_tokens = float(sum(len(p) + len(c) for b in batches for p, c in zip(b["prompts"], b["completions"])))
        metrics: dict[str, Any] = {
            "reward_mean": float(rewards.mean()), "reward_std": float(rewards.std(ddof=1)) if rewards.size > 1 else 0.0,
            "loss": float(np.mean(losses)), "clip_fraction": float(np.mean(clips)),
            "completion_length": float(lengths.mean()), "completion_length_max": float(lengths.max()),
            "eos_fraction": float(np.mean([e for b in batches for e in b["ended"]])),
            "grad_norm": steps[-1]["grad_norm"], "skipped": float(sum(s["skipped"] for s in steps)),
            "tokens_per_s": n_tokens * cfg.num_iterations / max(t_train, 1e-9),
            "generation_tokens_per_s": float(lengths.sum()) / max(sum(b["t_gen"] for b in batches), 1e-9),
            "time_generation": sum(b["t_gen"] for b in batches), "time_training": t_train,
            "time_step": time.perf_counter() - t0,
        }
        if cfg.kl_coef != 0.0:
            # KL diagnostic per completion (no gradient): the float32 k3 kernel over the masked tokens
            kl_rows = [compute_batch_token_kl_schulman_f32(b["logps"].cpu().numpy(), b["ref"].cpu().numpy(),
                                                          mask=b["mask"].cpu().numpy().astype(np.uint8))
                       for b in batches]
            n_tok = sum(float(b["mask"].sum()) for b in batches)
            metrics["kl"] = float(sum(k.sum() for k in kl_rows) / max(n_tok, 1.0))
        else:
            metrics["kl"] = 0.0
        if len(self.reward_fns) > 1:
            per_fn = np.concatenate([b["per_fn"] for b in batches], axis=1)
            for f, row in zip(self.reward_fns, per_fn):
                metrics[f"reward/{getattr(f, '__name__', type(f).__name__)}"] = float(np.nanmean(row)) \
                    if np.isfinite(row).any() else float("nan")
        return metrics
