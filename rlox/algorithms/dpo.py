"""DPO: Direct Preference Optimization (Rafailov et al., 2023) and the loss variants TRL ships.

With ``h = (log pi(y_w|x) - log ref(y_w|x)) - (log pi(y_l|x) - log ref(y_l|x))`` (sequence
log-probs summed over completion tokens), the sigmoid loss is ``-log sigmoid(beta * h)``; the
implicit rewards ``beta * (log pi - log ref)`` of chosen and rejected are the diagnostics.

    dpo = DPO(model=my_lm, ref_model=ref_lm, beta=0.1)
    loss, metrics = dpo.compute_loss(prompt, chosen, rejected)
    dpo.train(pairs, n_steps=100)

Reference log-probs are computed once per batch, without gradient (``precompute_ref`` stores
them for a whole dataset).
"""
from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np
import torch
import torch.nn.functional as F

from rlox.algorithms.llm_base import LLMAlgorithm
from rlox.config import DPOConfig
from rlox.llm import DPOPair

__all__ = ["DPO", "DPOConfig", "dpo_loss"]


# ---------------------------------------------------------------------- the loss (gradient flows: torch)
def dpo_loss(chosen_logps: torch.Tensor, rejected_logps: torch.Tensor, ref_chosen_logps: torch.Tensor,
             ref_rejected_logps: torch.Tensor, *, beta: float = 0.1, loss_type: str = "sigmoid",
             label_smoothing: float = 0.0) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Per-pair preference loss ``[B]`` from sequence log-probs ``[B]`` (TRL's formulas; for "ipo"
    pass length-averaged log-probs, as TRL does).

    Returns:
        losses ``[B]`` and detached ``rewards_chosen``, ``rewards_rejected`` ``[B]``.
    """
    a = chosen_logps - ref_chosen_logps          # chosen log-ratio
    b = rejected_logps - ref_rejected_logps      # rejected log-ratio
    h = a - b
    ls = label_smoothing
    if loss_type == "sigmoid":        # Rafailov et al. (2023); cDPO label smoothing (Mitchell, 2023)
        losses = -F.logsigmoid(beta * h) * (1 - ls) - F.logsigmoid(-beta * h) * ls
    elif loss_type == "robust":       # rDPO (Chowdhury et al., 2024)
        losses = (-F.logsigmoid(beta * h) * (1 - ls) + F.logsigmoid(-beta * h) * ls) / (1 - 2 * ls)
    elif loss_type == "hinge":        # SLiC (Zhao et al., 2023)
        losses = torch.relu(1 - beta * h)
    elif loss_type == "ipo":          # IPO (Azar et al., 2023)
        losses = (h - 1 / (2 * beta)) ** 2
    elif loss_type == "sppo_hard":    # SPPO (Wu et al., 2024), hard labels
        losses = (a - 0.5 / beta) ** 2 + (b + 0.5 / beta) ** 2
    elif loss_type == "nca_pair":     # NCA (Chen et al., 2024)
        losses = (-F.logsigmoid(beta * a) - 0.5 * F.logsigmoid(-beta * a) - 0.5 * F.logsigmoid(-beta * b))
    elif loss_type == "apo_zero":     # APO (D'Oosterlinck et al., 2024)
        losses = (1 - torch.sigmoid(beta * a)) + torch.sigmoid(beta * b)
    elif loss_type == "apo_down":
        losses = torch.sigmoid(beta * a) + (1 - torch.sigmoid(beta * h))
    else:
        raise ValueError(f"unknown DPO loss_type {loss_type!r}; expected sigmoid, robust, hinge, ipo, sppo_hard, "
                         f"nca_pair, apo_zero or apo_down")
    return losses, {"rewards_chosen": (beta * a).detach(), "rewards_rejected": (beta * b).detach()}


def pair_metrics(losses: torch.Tensor, info: dict[str, torch.Tensor]) -> dict[str, float]:
    rc, rr = info["rewards_chosen"], info["rewards_rejected"]
    return {"loss": float(losses.detach().mean()), "rewards_chosen": float(rc.mean()),
            "rewards_rejected": float(rr.mean()), "rewards_margin": float((rc - rr).mean()),
            "rewards_accuracy": float((rc > rr).float().mean())}


class DPO(LLMAlgorithm):
    """DPO on a transformers causal LM.

    Args:
        model, ref_model: the policy and the frozen reference (None: a frozen copy of ``model``;
            under LoRA the base model with adapters off).
        tokenizer: for string prompts / completions.
        **config: ``DPOConfig`` fields (``beta``, ``loss_type``, ``label_smoothing``,
            ``learning_rate``, ...).
    """

    name: ClassVar[str] = "dpo"
    config_class: ClassVar[type] = DPOConfig

    def __init__(self, model: Any, ref_model: Any = None, **kwargs: Any) -> None:
        super().__init__(model, ref_model, **kwargs)
        self._ref_cache: dict[tuple, tuple[float, float]] = {}

    # ------------------------------------------------------------------ inputs
    def pairs(self, prompt: Any, chosen: Any = None, rejected: Any = None) -> list[tuple[list[int], list[int], list[int]]]:
        """(prompt, chosen, rejected) token lists from: three 1-D tensors / token lists / strings
        (one pair), three ``[B, T]`` tensors or lists (a batch), a list of ``DPOPair``, or a list of
        dicts with "prompt", "chosen", "rejected"."""
        if chosen is None and rejected is None:
            items = [prompt] if isinstance(prompt, (DPOPair, dict)) else list(prompt)
            out = []
            for i, it in enumerate(items):
                if isinstance(it, DPOPair):
                    out.append((it.prompt_tokens.tolist(), it.chosen_tokens.tolist(), it.rejected_tokens.tolist()))
                elif isinstance(it, dict) and {"prompt", "chosen", "rejected"} <= set(it):
                    out.extend(self.pairs(it["prompt"], it["chosen"], it["rejected"]))
                else:
                    raise TypeError(f"batch[{i}] is a {type(it).__name__}; expected a DPOPair or a dict with "
                                    f"'prompt', 'chosen' and 'rejected'")
            self._check_pair_ids(out)
            return out
        if chosen is None or rejected is None:
            raise TypeError("give prompt, chosen and rejected together (or a list of DPOPair as the only argument)")
        single = (isinstance(prompt, str) or (isinstance(prompt, torch.Tensor) and prompt.dim() == 1)
                  or (isinstance(prompt, (list, tuple)) and prompt and not isinstance(prompt[0], (list, tuple, str))
                      and not isinstance(prompt[0], torch.Tensor)))
        wrap = (lambda x: [x]) if single else (lambda x: x)
        p = self.tokens(wrap(prompt), "prompt").ids
        c = self.tokens(wrap(chosen), "chosen").ids
        r = self.tokens(wrap(rejected), "rejected").ids
        if not len(p) == len(c) == len(r):
            raise ValueError(f"prompt, chosen and rejected hold {len(p)}, {len(c)} and {len(r)} sequences; give one "
                             f"chosen and one rejected completion per prompt")
        out = list(zip(p, c, r))
        self._check_pair_ids(out)
        return out

    def _check_pair_ids(self, pairs: list[tuple[list[int], list[int], list[int]]]) -> None:
        for i, (p, c, r) in enumerate(pairs):
            if not c or not r:
                raise ValueError(f"pair {i} has an empty {'chosen' if not c else 'rejected'} completion")
            for what, s in (("prompt", p), ("chosen", c), ("rejected", r)):
                bad = [v for v in s if not 0 <= v < self.vocab_size]
                if bad:
                    raise ValueError(f"pair {i} {what} holds token id {bad[0]} outside the model's vocabulary "
                                     f"[0, {self.vocab_size})")
            self.check_length(len(p), max(len(c), len(r)), i)

    # ------------------------------------------------------------------ log-probs
    def _sequence_logps(self, model_logps: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        s = (model_logps * mask).sum(-1)
        return s / mask.sum(-1).clamp(min=1.0) if self.config.loss_type == "ipo" else s

    def _policy_logps(self, pairs):
        prompts = [p for p, _, _ in pairs] * 2
        comps = [c for _, c, _ in pairs] + [r for _, _, r in pairs]
        logps, mask = self.logprobs(self.model, prompts, comps)   # chosen and rejected in one forward pass
        seq = self._sequence_logps(logps, mask)
        return seq[:len(pairs)], seq[len(pairs):]

    def _ref_logps(self, pairs):
        prompts = [p for p, _, _ in pairs] * 2
        comps = [c for _, c, _ in pairs] + [r for _, _, r in pairs]
        keys = [(tuple(p), tuple(c), tuple(r)) for p, c, r in pairs]
        if self._ref_cache and all(k in self._ref_cache for k in keys):
            vals = torch.tensor([self._ref_cache[k] for k in keys], device=self.device)
            return vals[:, 0], vals[:, 1]
        logps = self.ref_logprobs(prompts, comps)
        mask = torch.zeros_like(logps)
        for i, c in enumerate(comps):
            mask[i, :len(c)] = 1
        seq = self._sequence_logps(logps, mask)
        return seq[:len(pairs)], seq[len(pairs):]

    def precompute_ref(self, dataset: Any, batch_size: int = 8) -> int:
        """Reference log-probs of every pair of ``dataset``, computed once (in batches) and reused
        by ``compute_loss`` / ``train``; returns the number of pairs stored."""
        items = self.pairs(list(dataset))
        for s in range(0, len(items), batch_size):
            chunk = items[s:s + batch_size]
            rc, rr = self._ref_logps(chunk)
            for (p, c, r), a, b in zip(chunk, rc.tolist(), rr.tolist()):
                self._ref_cache[(tuple(p), tuple(c), tuple(r))] = (a, b)
        return len(self._ref_cache)

    # ------------------------------------------------------------------ the loss
    def compute_loss(self, prompt: Any, chosen: Any = None, rejected: Any = None) -> tuple[torch.Tensor, dict[str, float]]:
        """The DPO loss of one pair or a batch (see ``pairs`` for the accepted forms).

        Returns:
            ``(loss, metrics)``: the mean loss (with gradient) and ``rewards_chosen``,
            ``rewards_rejected``, ``rewards_margin``, ``rewards_accuracy`` (means over the batch).
        """
        pairs = self.pairs(prompt, chosen, rejected)
        return self._loss_on(pairs)

    def _loss_on(self, pairs) -> tuple[torch.Tensor, dict[str, float]]:
        cfg = self.config
        ref_c, ref_r = self._ref_logps(pairs)          # once per batch, no gradient
        pol_c, pol_r = self._policy_logps(pairs)
        losses, info = dpo_loss(pol_c, pol_r, ref_c, ref_r, beta=cfg.beta, loss_type=cfg.loss_type,
                                label_smoothing=cfg.label_smoothing)
        metrics = pair_metrics(losses, info)
        metrics["logps_chosen"] = float(pol_c.detach().mean())
        metrics["logps_rejected"] = float(pol_r.detach().mean())
        return losses.mean(), metrics

    # ------------------------------------------------------------------ learning
    def _items_of(self, batch: Any) -> list[Any]:
        return self.pairs(batch)

    def _learn(self, micro_batches: list[list[Any]]) -> dict[str, Any]:
        t0 = time.perf_counter()
        all_m: list[dict[str, float]] = []
        n_tok = 0
        for items in micro_batches:
            pairs = items if items and isinstance(items[0], tuple) else self.pairs(items)
            loss, m = self._loss_on(pairs)
            self._backward(loss, 1.0 / len(micro_batches))
            all_m.append(m)
            n_tok += sum(2 * len(p) + len(c) + len(r) for p, c, r in pairs)
        step = self._optimizer_step()
        self.num_timesteps += 1
        dt = time.perf_counter() - t0
        self.time_phase("training", dt)
        metrics = {k: float(np.mean([m[k] for m in all_m])) for k in all_m[0]}
        self._recent_rewards = (self._recent_rewards + [metrics["rewards_margin"]])[-100:]
        metrics.update(grad_norm=step["grad_norm"], skipped=step["skipped"], tokens_per_s=n_tok / max(dt, 1e-9),
                       pairs_per_s=sum(len(b) for b in micro_batches) / max(dt, 1e-9))
        return metrics
