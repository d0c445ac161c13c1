"""Online DPO (Guo et al., 2024, "Direct Language Model Alignment from Online AI Feedback").

Per prompt, two completions are sampled from the current policy; a reward function (the higher
reward wins) or a pairwise judge picks the chosen one; the DPO loss (``rlox.algorithms.dpo``) is
taken on that fresh pair against the frozen reference.

    odpo = OnlineDPO(model, ref_model, reward_fn=my_reward, beta=0.1, max_new_tokens=32)
    odpo.train(prompts, n_steps=100)

A judge follows TRL's ``BasePairwiseJudge``: ``judge.judge(prompts, [(c0, c1), ...])`` (or a
callable with those arguments) returns, per prompt, the index (0 or 1) of the better completion.
"""
from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from rlox.algorithms.dpo import dpo_loss, pair_metrics
from rlox.algorithms.llm_base import LLMAlgorithm
from rlox.config import OnlineDPOConfig
from rlox.rewards import resolve_reward_fns, score_completions

__all__ = ["OnlineDPO", "OnlineDPOConfig"]


class OnlineDPO(LLMAlgorithm):
    """Online DPO on a transformers causal LM.

    Args:
        model, ref_model: policy and frozen reference (None: a frozen copy of ``model``).
        reward_fn: as GRPO's (``reward_fn(completions, **kwargs)``, a registry name or a list);
            or ``judge``: a pairwise judge. Exactly one of the two.
        **config: ``OnlineDPOConfig`` fields (``beta``, ``loss_type``, ``max_new_tokens``,
            ``temperature``, ...).
    """

    name: ClassVar[str] = "online_dpo"
    config_class: ClassVar[type] = OnlineDPOConfig

    def __init__(self, model: Any, ref_model: Any = None, reward_fn: Any = None, judge: Any = None,
                 **kwargs: Any) -> None:
        if (reward_fn is None) == (judge is None):
            raise TypeError("OnlineDPO needs exactly one of reward_fn (scores each completion) and judge "
                            "(picks the better of two)")
        super().__init__(model, ref_model, **kwargs)
        self.reward_fns = resolve_reward_fns(reward_fn, None, "OnlineDPO") if reward_fn is not None else None
        if judge is not None and not (callable(judge) or callable(getattr(judge, "judge", None))):
            raise TypeError(f"judge must have a judge(prompts, completion_pairs) method or be callable, got "
                            f"{type(judge).__name__}")
        self.judge = judge

    def train_step(self, prompt_batch: Any, attention_mask: Any = None, **columns: Any) -> dict[str, Any]:
        """Sample two completions per prompt, rank them and take one DPO step; plain metrics."""
        items = self._rows(prompt_batch, attention_mask, columns)
        t0 = time.perf_counter()
        metrics = self._learn([items])
        self.time_phase("train_step", time.perf_counter() - t0)
        self.last_metrics = metrics
        return metrics

    # ------------------------------------------------------------------ ranking
    def _prefer_first(self, shown_prompts: list[Any], shown: list[Any], completions: list[list[int]],
                      ended: list[bool], columns: dict[str, list[Any]]) -> tuple[np.ndarray, np.ndarray | None]:
        """Per prompt, True where completion 0 is the chosen one; and the rewards (None for a judge)."""
        n = len(shown) // 2
        if self.reward_fns is not None:
            rewards, _ = score_completions(self.reward_fns, None, shown_prompts, shown, completions, columns)
            if self.config.missing_eos_penalty is not None:   # TRL's missing_eos_penalty
                rewards = rewards - self.config.missing_eos_penalty * (~np.asarray(ended))
            r = rewards.reshape(n, 2)
            return r[:, 0] >= r[:, 1], rewards
        pairs = [(shown[2 * i], shown[2 * i + 1]) for i in range(n)]
        prompts = shown_prompts[::2]
        fn = self.judge.judge if callable(getattr(self.judge, "judge", None)) else self.judge
        picks = list(fn(prompts, pairs))
        if len(picks) != n:
            raise ValueError(f"judge returned {len(picks)} choices for {n} prompts; it must return one index (0 or 1) "
                             f"per prompt")
        for i, k in enumerate(picks):
            if k not in (0, 1) or isinstance(k, bool):
                raise ValueError(f"judge returned {k!r} at index {i}; expected 0 (first completion better) or 1")
        return np.asarray(picks) == 0, None

    # ------------------------------------------------------------------ learning
    def _learn(self, micro_batches: list[list[Any]]) -> dict[str, Any]:
        cfg = self.config
        t0 = time.perf_counter()
        all_m, t_gen = [], 0.0
        rewards_seen: list[float] = []
        for rows in micro_batches:
            toks, columns = self._prompts_of(rows)
            tg = time.perf_counter()
            completions, ended = self._generate(toks.ids, 2)
            t_gen += time.perf_counter() - tg
            shown_prompts = [p for p in toks.display() for _ in range(2)]
            shown = [self.decode(c) for c in completions] if self.tokenizer is not None else [list(c) for c in completions]
            rep = {k: [v for v in vals for _ in range(2)] for k, vals in columns.items()}
            first, rewards = self._prefer_first(shown_prompts, shown, completions, ended, rep)
            if rewards is not None:
                rewards_seen.extend(rewards.tolist())
            chosen = [completions[2 * i] if f else completions[2 * i + 1] for i, f in enumerate(first)]
            rejected = [completions[2 * i + 1] if f else completions[2 * i] for i, f in enumerate(first)]
            prompts = toks.ids
            avg = cfg.loss_type == "ipo"
            ref = self.ref_logprobs(prompts * 2, chosen + rejected, temperature=1.0, average=avg)
            logps, mask = self.logprobs(self.model, prompts * 2, chosen + rejected, average=avg)
            seq = (logps * mask).sum(-1)
            ref_seq = (ref * mask).sum(-1)
            n = len(prompts)
            losses, info = dpo_loss(seq[:n], seq[n:], ref_seq[:n], ref_seq[n:], beta=cfg.beta,
                                    loss_type=cfg.loss_type, label_smoothing=cfg.label_smoothing)
            self._backward(losses.mean(), 1.0 / len(micro_batches))
            m = pair_metrics(losses, info)
            m["completion_length"] = float(np.mean([len(c) for c in completions]))
            all_m.append(m)
        step = self._optimizer_step()
        self.num_timesteps += 1
        dt = time.perf_counter() - t0
        self.time_phase("generation", t_gen)
        self.time_phase("training", dt - t_gen)
        metrics = {k: float(np.mean([m[k] for m in all_m])) for k in all_m[0]}
        if rewards_seen:
            metrics["reward_mean"] = float(np.mean(rewards_seen))
            self._recent_rewards = (self._recent_rewards + rewards_seen)[-100:]
        else:
            self._recent_rewards = (self._recent_rewards + [metrics["rewards_margin"]])[-100:]
        metrics.update(grad_norm=step["grad_norm"], skipped=step["skipped"], time_generation=t_gen, time_step=dt)
        return metrics
