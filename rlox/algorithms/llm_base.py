"""``LLMAlgorithm``: what GRPO, DPO and OnlineDPO share, so each file only says how it builds a
batch and what its loss is.

The base class owns:

* the models: a transformers causal LM (or a path to one), LoRA through ``peft`` when a
  ``peft_config`` is given, the frozen reference model (a copy of the model when none is given;
  the adapter-free base under LoRA), vocabulary checks against the tokenizer and the reference;
* tokens in: a LongTensor ``[B, T]`` (with an optional attention mask, left or right padding),
  a list of token-id lists, or strings when a ``tokenizer`` is given;
* sampling (``_generate``: temperature, top-p, top-k, stop at EOS) from the algorithm's own seeded
  generator, so a run is reproducible and resumes exactly;
* log-probabilities of completion tokens (``completion_logprobs``) on packed sequences
  (``rlox.pack_sequences``: no padding tokens computed, position ids restarting per sequence, a
  block-diagonal causal mask), or padded where the attention cannot isolate packed sequences;
* the optimiser (AdamW), schedule, gradient accumulation, clipping, NaN-step skipping;
* ``train(dataset, n_steps | epochs, ...)`` through the harness (callbacks, loggers,
  ``ProgressBarCallback``, ``CheckpointCallback``), and ``save`` / ``load`` (``save_pretrained``
  safetensors + optimiser, schedule, RNG and counters) that resume a run exactly.

Subclasses set ``name`` and ``config_class`` and implement ``_learn(micro_batches)``.
"""
from __future__ import annotations

import abc
import contextlib
import copy
import json
import math
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import numpy as np
import torch

from rlox.callbacks import Callback, CallbackList
from rlox.checkpointing import CheckpointError, atomic_torch_save, safe_torch_load
from rlox.config import ConfigBase
from rlox.errors import RloxWarning

__all__ = ["LLMAlgorithm", "LLMWarning", "TokenBatch", "completion_logprobs", "packing_supported",
           "LLM_CHECKPOINT_FORMAT", "LLM_CHECKPOINT_VERSION"]

LLM_CHECKPOINT_FORMAT = "rlox-llm-checkpoint"
LLM_CHECKPOINT_VERSION = 1

#: attention implementations that honour a 4-D block-diagonal mask (checked once per model anyway).
PACKING_ATTENTION = ("eager", "sdpa", "flex_attention")


class LLMWarning(RloxWarning):
    """An LLM training step was skipped (non-finite loss) or packing fell back to padding."""


# ====================================================================== tokens
class TokenBatch:
    """Sequences of token ids as Python lists (``ids``) plus the texts (``texts``, or None)."""

    def __init__(self, ids: list[list[int]], texts: list[str] | None) -> None:
        self.ids, self.texts = ids, texts

    def __len__(self) -> int:
        return len(self.ids)

    def display(self) -> list[Any]:
        """What reward functions and judges see: the texts, else the token-id lists."""
        return list(self.texts) if self.texts is not None else [list(x) for x in self.ids]


def disable_dropout(model: torch.nn.Module) -> torch.nn.Module:
    """Set every dropout probability in ``model`` to 0, in place, and return it.

    ``nn.Dropout`` modules get ``p = 0``. Many transformers models also call
    ``F.dropout(x, p=self.dropout, training=self.training)`` with the probability kept as a float
    attribute (OPT's ``dropout``, Llama's ``attention_dropout``, Bloom's ``hidden_dropout``,
    ``layerdrop``): those attributes are set to 0 too, which TRL's ``disable_dropout_in_model``
    misses (OPT's default dropout of 0.1 stays on there).
    """
    for mod in model.modules():
        if isinstance(mod, torch.nn.Dropout):
            mod.p = 0.0
        for name, value in list(vars(mod).items()):
            if type(value) is float and "drop" in name.lower() and 0.0 < value <= 1.0:
                setattr(mod, name, 0.0)
    return model


def _vocab_size(model: Any) -> int:
    emb = model.get_input_embeddings()
    return int(emb.num_embeddings if hasattr(emb, "num_embeddings") else emb.weight.shape[0])


def _context_length(model: Any) -> int | None:
    cfg = model.config
    for key in ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length"):
        v = getattr(cfg, key, None)
        if isinstance(v, int) and v > 0:
            return v
    return None


def attention_implementation(model: Any) -> str:
    return str(getattr(model.config, "_attn_implementation", None) or "eager")


def packing_supported(model: Any) -> bool:
    """Whether the model's attention implementation can isolate packed sequences with a 4-D
    block-diagonal mask (eager, sdpa, flex_attention). flash_attention_2 and others fall back
    to padding."""
    return attention_implementation(model) in PACKING_ATTENTION


# ====================================================================== log-probabilities
#: architectures whose logits are exactly ``lm_head(last_hidden_state)`` (no soft-capping or scaling),
#: so the head can run on the completion positions alone (TRL's ``logits_to_keep`` idea)
_PLAIN_HEAD_TYPES = ("llama", "gpt2", "mistral", "qwen2", "qwen3", "smollm3", "phi3", "gpt_neox", "olmo2")


def _split_head(model: Any) -> tuple[Any, Any] | None:
    """(body, lm_head) when the logits are ``lm_head(body(...).last_hidden_state)``, else None."""
    if getattr(model.config, "model_type", None) not in _PLAIN_HEAD_TYPES or hasattr(model, "peft_config"):
        return None
    body = getattr(model, getattr(model, "base_model_prefix", ""), None)
    head = model.get_output_embeddings() if callable(getattr(model, "get_output_embeddings", None)) else None
    if body is None or body is model or not isinstance(head, torch.nn.Linear):
        return None
    return body, head


def _run(model: Any, **kwargs: Any) -> tuple[torch.Tensor, Any]:
    """(hidden states, head) where the head can be split off, else (logits, None)."""
    split = _split_head(model)
    if split is None:
        return model(**kwargs).logits, None
    body, head = split
    return body(**kwargs).last_hidden_state, head


def _forward_rows(model: Any, seqs: list[list[int]], packed: bool, pad_id: int) -> tuple[torch.Tensor, Any, np.ndarray]:
    """Hidden states (and the LM head) or logits of every sequence: packed rows (``[R, L, *]``) or
    one right-padded row per sequence; and the ``[n, 2]`` (row, offset) placement of each."""
    from rlox.llm import pack_sequences

    device = next(model.parameters()).device
    n = len(seqs)
    longest = max(len(s) for s in seqs)
    if packed:
        p = pack_sequences([np.asarray(s, dtype=np.uint32) for s in seqs], max_length=longest, pad_id=pad_id)
        input_ids = torch.from_numpy(p["input_ids"]).to(device)
        position_ids = torch.from_numpy(p["position_ids"]).to(device)
        sid = torch.from_numpy(p["sequence_ids"]).to(device)
        L = input_ids.shape[1]
        causal = torch.ones(L, L, dtype=torch.bool, device=device).tril_()
        # block-diagonal causal mask; a padding token sees only itself (no all-masked softmax rows)
        mask = (sid[:, :, None] == sid[:, None, :]) & causal & (sid >= 0)[:, :, None]
        mask |= torch.eye(L, dtype=torch.bool, device=device)
        # an additive float mask: eager attention adds it to the scores, sdpa and flex take it as is
        dtype = next(model.parameters()).dtype
        additive = torch.zeros(mask.shape, dtype=dtype, device=device).masked_fill_(~mask, torch.finfo(dtype).min)
        out, head = _run(model, input_ids=input_ids, attention_mask=additive[:, None], position_ids=position_ids,
                         use_cache=False)
        return out, head, p["placement"]
    input_ids = torch.full((n, longest), pad_id, dtype=torch.long)
    attention = torch.zeros(n, longest, dtype=torch.long)
    for i, s in enumerate(seqs):
        input_ids[i, :len(s)] = torch.as_tensor(s, dtype=torch.long)
        attention[i, :len(s)] = 1
    out, head = _run(model, input_ids=input_ids.to(device), attention_mask=attention.to(device), use_cache=False)
    placement = np.stack([np.arange(n), np.zeros(n, dtype=np.int64)], axis=1)
    return out, head, placement


def completion_logprobs(model: Any, prompts: Sequence[Sequence[int]], completions: Sequence[Sequence[int]], *,
                        temperature: float = 1.0, packed: bool = True, pad_id: int = 0,
                        average: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log-probabilities of ``completions[i]`` after ``prompts[i]`` under ``model``.

    Args:
        temperature: logits are divided by it first (TRL's GRPO does so at the sampling temperature).
        packed: forward pass on packed rows (no padding computed); False: right-padded rows.

    Returns:
        ``logps [B, T]`` (float32, T the longest completion; 0 on padding) and ``mask [B, T]`` (float).
        Gradients flow into ``logps`` unless called under ``torch.no_grad``.
    """
    seqs = [list(p) + list(c) for p, c in zip(prompts, completions)]
    n = len(seqs)
    c_len = [len(c) for c in completions]
    T = max(c_len) if c_len else 0
    device = next(model.parameters()).device
    if n == 0 or T == 0:
        return torch.zeros(n, T, device=device), torch.zeros(n, T, device=device)
    out, head, placement = _forward_rows(model, seqs, packed, pad_id)
    rows, pos, tgt, out_b, out_t = [], [], [], [], []
    for i, (p, c) in enumerate(zip(prompts, completions)):
        if not c:
            continue
        r, off = int(placement[i, 0]), int(placement[i, 1])
        start = off + len(p)
        k = len(c)
        rows.append(np.full(k, r))
        pos.append(np.arange(start - 1, start - 1 + k))   # logits at t predict the token at t + 1
        tgt.append(np.asarray(c, dtype=np.int64))
        out_b.append(np.full(k, i))
        out_t.append(np.arange(k))
    rows_t = torch.from_numpy(np.concatenate(rows)).to(device)
    pos_t = torch.from_numpy(np.concatenate(pos)).to(device)
    tgt_t = torch.from_numpy(np.concatenate(tgt)).to(device)
    sel = out[rows_t, pos_t]                                              # completion positions only
    if head is not None:
        sel = head(sel)                                                    # [N, V]
    sel = sel.float() / temperature
    logp_tok = torch.log_softmax(sel, dim=-1).gather(1, tgt_t[:, None]).squeeze(1)
    b_t = torch.from_numpy(np.concatenate(out_b)).to(device)
    t_t = torch.from_numpy(np.concatenate(out_t)).to(device)
    logps = torch.zeros(n, T, device=device, dtype=logp_tok.dtype).index_put((b_t, t_t), logp_tok)
    mask = torch.zeros(n, T, device=device).index_put((b_t, t_t), torch.ones_like(logp_tok))
    if average:
        logps = logps / mask.sum(-1, keepdim=True).clamp(min=1)
    return logps, mask


# ====================================================================== the base class
class LLMAlgorithm(abc.ABC):
    """Base of rlox's LLM post-training algorithms.

    Args:
        model: a transformers causal LM, or a path / hub-cache name for ``AutoModelForCausalLM``.
        ref_model: the frozen reference (None: a frozen copy of ``model``; under LoRA the base
            model with the adapters switched off).
        tokenizer: needed for string prompts and text rewards (a path loads ``AutoTokenizer``).
        peft_config: a ``peft`` config (e.g. ``LoraConfig``): only the adapters train.
        seed: sampling, shuffling and dropout-free training are reproducible from it.
        callbacks, logger: as for every rlox algorithm (``rlox.callbacks``, ``rlox.logging``).
        **config: fields of ``config_class`` (``learning_rate``, ``temperature``, ...).
    """

    name: ClassVar[str] = ""
    config_class: ClassVar[type[ConfigBase]]
    needs_ref: ClassVar[bool] = True
    takes_env: ClassVar[bool] = False        # trains a model on prompts, not in an env (rlox.Trainer refuses it)

    def __init__(self, model: Any, ref_model: Any = None, *, tokenizer: Any = None, peft_config: Any = None,
                 seed: int = 0, callbacks: Sequence[Any] | None = None, logger: Any = None, **config: Any) -> None:
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.config = self.config_class.from_kwargs(type(self).__name__, config)
        self.seed = int(seed)
        self.callbacks = CallbackList(callbacks)
        self.logger = logger
        self.tokenizer = self._load_tokenizer(tokenizer)
        self.model = self._load_model(model, "model")
        self.peft_config = peft_config
        if peft_config is not None:
            from peft import get_peft_model
            self.model = get_peft_model(self.model, peft_config)
        self.device = next(self.model.parameters()).device
        self.vocab_size = _vocab_size(self.model)
        self._check_tokenizer()
        self.ref_model = None
        self._owns_ref = False
        if self._uses_ref():
            if ref_model is None and peft_config is None:
                ref_model, self._owns_ref = copy.deepcopy(self.model), True
            if ref_model is not None:
                self.ref_model = self._load_model(ref_model, "ref_model")
                if _vocab_size(self.ref_model) != self.vocab_size:
                    raise ValueError(f"{type(self).__name__}: ref_model has a vocabulary of "
                                     f"{_vocab_size(self.ref_model)} tokens and model {self.vocab_size}; the "
                                     f"reference must share the model's tokenizer (use a copy of the model)")
                self.ref_model.requires_grad_(False).eval()
        if self.config.disable_dropout:
            for m in (self.model, self.ref_model):
                if m is not None:
                    disable_dropout(m)
        self.model.train()
        self.context_length = _context_length(self.model)
        self.pad_id = self._pad_id()
        self.eos_ids = self._eos_ids()
        self._packed: bool | None = {"packed": True, "padded": False}.get(self.config.packing)
        if self._packed and not packing_supported(self.model):
            raise ValueError(f"packing='packed' needs an attention implementation that isolates packed "
                             f"sequences ({', '.join(PACKING_ATTENTION)}); this model uses "
                             f"{attention_implementation(self.model)!r}; use packing='padded' or 'auto'")
        self.optimizer = torch.optim.AdamW([p for p in self.model.parameters() if p.requires_grad],
                                           lr=self.config.learning_rate, weight_decay=self.config.weight_decay,
                                           betas=(self.config.adam_beta1, self.config.adam_beta2),
                                           eps=self.config.adam_eps)
        self.scheduler: Any = None
        self.torch_gen = torch.Generator(device="cpu").manual_seed(self.seed)
        # counters (saved): optimiser steps, items consumed from the dataset, skipped steps
        self.num_timesteps = 0
        self.iterations = 0
        self.samples_seen = 0
        self.skipped_steps = 0
        self._run_start = self._run_end = 0
        self._lr_scale = 1.0
        self.timings: dict[str, float] = {}
        self.last_metrics: dict[str, Any] = {}
        self._recent_rewards: list[float] = []

    # ------------------------------------------------------------------ subclass interface
    @abc.abstractmethod
    def _learn(self, micro_batches: list[list[Any]]) -> dict[str, Any]:
        """Run the optimiser step(s) for these micro-batches (dataset items); return plain metrics."""

    def _uses_ref(self) -> bool:
        return True

    # ------------------------------------------------------------------ loading and checks
    @staticmethod
    def _load_model(model: Any, what: str) -> Any:
        if isinstance(model, (str, os.PathLike)):
            from transformers import AutoModelForCausalLM
            return AutoModelForCausalLM.from_pretrained(str(model), dtype=torch.float32)
        if not isinstance(model, torch.nn.Module) or not callable(getattr(model, "get_input_embeddings", None)):
            raise TypeError(f"{what} must be a transformers causal LM (e.g. AutoModelForCausalLM) or a path to "
                            f"one, got {type(model).__name__}")
        if getattr(model, "hf_quantizer", None) is not None or getattr(model, "is_quantized", False):
            from rlox.llm import clear_quantized_marker
            clear_quantized_marker(model)
        return model

    @staticmethod
    def _load_tokenizer(tokenizer: Any) -> Any:
        if isinstance(tokenizer, (str, os.PathLike)):
            from transformers import AutoTokenizer
            return AutoTokenizer.from_pretrained(str(tokenizer))
        return tokenizer

    def _check_tokenizer(self) -> None:
        tok = self.tokenizer
        if tok is None:
            return
        n = len(tok)
        if n > self.vocab_size:
            raise ValueError(f"{type(self).__name__}: the tokenizer has {n} tokens but the model's embedding "
                             f"has {self.vocab_size} rows; use the model's own tokenizer (or resize the "
                             f"model's embeddings with model.resize_token_embeddings({n}))")

    def _pad_id(self) -> int:
        for src in (self.tokenizer, getattr(self.model, "generation_config", None), self.model.config):
            for key in ("pad_token_id", "eos_token_id"):
                v = getattr(src, key, None) if src is not None else None
                if isinstance(v, list):
                    v = v[0] if v else None
                if isinstance(v, int) and 0 <= v < self.vocab_size:
                    return v
        return 0

    def _eos_ids(self) -> list[int]:
        found: list[int] = []
        for src in (self.tokenizer, getattr(self.model, "generation_config", None), self.model.config):
            v = getattr(src, "eos_token_id", None) if src is not None else None
            for x in (v if isinstance(v, list) else [v]):
                if isinstance(x, int) and 0 <= x < self.vocab_size and x not in found:
                    found.append(x)
            if found:
                break
        return found

    def tokens(self, x: Any, what: str = "prompt_batch", attention_mask: Any = None) -> TokenBatch:
        """``x`` as a ``TokenBatch``: a LongTensor ``[B, T]`` / ``[T]`` (``attention_mask`` drops
        padding on either side), a list of token-id lists, a string or a list of strings."""
        texts = None
        if isinstance(x, str):
            x = [x]
        if isinstance(x, torch.Tensor) or isinstance(x, np.ndarray):
            t = torch.as_tensor(x)
            if t.dtype.is_floating_point or t.dtype == torch.bool or t.is_complex():
                raise TypeError(f"{what} must hold integer token ids, got dtype {t.dtype}")
            if t.dim() == 1:
                t = t[None]
            if t.dim() != 2:
                raise ValueError(f"{what} must be [B, T] (or [T]) token ids, got shape {tuple(t.shape)}")
            rows = t.tolist()
            if attention_mask is not None:
                m = torch.as_tensor(attention_mask)
                if m.shape != t.shape:
                    raise ValueError(f"attention_mask has shape {tuple(m.shape)}, expected {tuple(t.shape)} "
                                     f"(the shape of {what})")
                rows = [[tok for tok, keep in zip(r, mr) if keep] for r, mr in zip(rows, m.tolist())]
            ids = rows
        elif isinstance(x, (list, tuple)):
            if x and all(isinstance(s, str) for s in x):
                if self.tokenizer is None:
                    raise TypeError(f"{what} holds strings but {type(self).__name__} has no tokenizer; pass "
                                    f"tokenizer= (e.g. AutoTokenizer.from_pretrained(path)) or token ids")
                texts = list(x)
                ids = [self.tokenizer(s, add_special_tokens=False)["input_ids"] for s in texts]
            else:
                ids = []
                for i, s in enumerate(x):
                    if isinstance(s, (torch.Tensor, np.ndarray)):
                        s = np.asarray(s.detach().cpu() if isinstance(s, torch.Tensor) else s)
                        if s.dtype.kind not in "iu" or s.ndim != 1:
                            raise TypeError(f"{what}[{i}] must be a 1-D array of integer token ids, got "
                                            f"dtype {s.dtype}, shape {s.shape}")
                        s = s.tolist()
                    if not isinstance(s, (list, tuple)) or not all(
                            isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in s):
                        raise TypeError(f"{what}[{i}] must be a list of int token ids or a string, got {s!r:.80}")
                    ids.append([int(v) for v in s])
        else:
            raise TypeError(f"{what} must be a LongTensor [B, T], a list of token-id lists or a list of strings, "
                            f"got {type(x).__name__}")
        for i, s in enumerate(ids):
            bad = [v for v in s if not 0 <= v < self.vocab_size]
            if bad:
                raise ValueError(f"{what}[{i}] holds token id {bad[0]} outside the model's vocabulary "
                                 f"[0, {self.vocab_size}); the tokenizer does not match the model")
        return TokenBatch(ids, texts)

    # prompt datasets (GRPO, OnlineDPO): rows are prompts, or dicts with "prompt" and extra columns
    def _rows(self, batch: Any, attention_mask: Any, columns: dict[str, Any]) -> list[dict[str, Any]]:
        if isinstance(batch, (list, tuple)) and batch and all(isinstance(r, dict) for r in batch):
            return list(batch)
        toks = self.tokens(batch, "prompt_batch", attention_mask)
        rows = []
        for i, ids in enumerate(toks.ids):
            row = {"prompt": toks.texts[i] if toks.texts is not None else ids, "_ids": ids}
            for k, v in columns.items():
                if len(v) != len(toks):
                    raise ValueError(f"column {k!r} has {len(v)} values for {len(toks)} prompts")
                row[k] = v[i]
            rows.append(row)
        return rows

    def _prompts_of(self, rows: list[Any]) -> tuple[TokenBatch, dict[str, list[Any]]]:
        rows = [r if isinstance(r, dict) else {"prompt": r} for r in rows]
        for i, r in enumerate(rows):
            if "prompt" not in r:
                raise ValueError(f"dataset row {i} has no 'prompt' key (keys: {sorted(r)})")
        if all("_ids" in r for r in rows):
            texts = [r["prompt"] for r in rows]
            toks = TokenBatch([r["_ids"] for r in rows], texts if all(isinstance(t, str) for t in texts) else None)
        else:
            toks = self.tokens([r["prompt"] for r in rows], "prompts")
        keys = [k for k in rows[0] if k not in ("prompt", "_ids")]
        columns = {k: [r.get(k) for r in rows] for k in keys}
        return toks, columns

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def check_length(self, prompt_len: int, extra: int, i: int) -> None:
        ctx = self.context_length
        if ctx is not None and prompt_len + extra > ctx:
            raise ValueError(f"prompt {i} has {prompt_len} tokens; with {extra} new tokens that is "
                             f"{prompt_len + extra}, longer than the model's context of {ctx}; shorten the "
                             f"prompt or lower max_new_tokens")

    # ------------------------------------------------------------------ sampling and log-probs
    @contextlib.contextmanager
    def _own_rng(self):
        """Run sampling on torch's global generator seeded from ``self.torch_gen`` (saved with the
        model), leaving the caller's global state untouched."""
        seed = int(torch.randint(0, 2**62, (1,), generator=self.torch_gen))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            yield

    def _generate(self, prompts: list[list[int]], n_per_prompt: int) -> tuple[list[list[int]], list[bool]]:
        """Sample ``n_per_prompt`` completions per prompt (prompt ``p``'s at ``p*n:(p+1)*n``).
        Returns the completions (cut after the first EOS, which is kept) and whether each ended
        at EOS."""
        from transformers import GenerationConfig

        cfg = self.config
        for i, p in enumerate(prompts):
            if not p:
                raise ValueError(f"prompt {i} is empty; give at least one token")
            self.check_length(len(p), cfg.max_new_tokens, i)
        rep = [p for p in prompts for _ in range(n_per_prompt)]
        P = max(len(p) for p in rep)
        input_ids = torch.full((len(rep), P), self.pad_id, dtype=torch.long)
        attention = torch.zeros(len(rep), P, dtype=torch.long)
        for i, p in enumerate(rep):                      # left padding for generation
            input_ids[i, P - len(p):] = torch.as_tensor(p)
            attention[i, P - len(p):] = 1
        # every sampling knob explicit: transformers fills None from the model's generation config
        # and its global defaults (top_k=50), which would sample from another distribution than ours
        gen = GenerationConfig(do_sample=True, temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k,
                               min_p=0.0, typical_p=1.0, repetition_penalty=1.0, no_repeat_ngram_size=0,
                               max_new_tokens=cfg.max_new_tokens, min_new_tokens=0, pad_token_id=self.pad_id,
                               eos_token_id=self.eos_ids or None, bos_token_id=None)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), self._own_rng(), warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                out = self.model.generate(input_ids=input_ids.to(self.device), attention_mask=attention.to(self.device),
                                          generation_config=gen)
        finally:
            self.model.train(was_training)
        completions, ended = [], []
        eos = set(self.eos_ids)
        for row in out[:, P:].tolist():
            cut = next((j for j, t in enumerate(row) if t in eos), None)
            completions.append(row[:cut + 1] if cut is not None else row)
            ended.append(cut is not None)
        return completions, ended

    def logprobs(self, model: Any, prompts: list[list[int]], completions: list[list[int]], *,
                 temperature: float = 1.0, average: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """``completion_logprobs`` on packed rows where the attention isolates them (checked
        once against the padded path; falls back to padding with an ``LLMWarning`` if not)."""
        if self._packed is None:   # "auto": decide once, on the first batch
            self._packed = False
            if packing_supported(model) and len(prompts) > 1:
                with torch.no_grad():
                    a, m = completion_logprobs(model, prompts, completions, temperature=temperature,
                                               packed=True, pad_id=self.pad_id)
                    b, _ = completion_logprobs(model, prompts, completions, temperature=temperature,
                                               packed=False, pad_id=self.pad_id)
                err = float(((a - b).abs() * m).max()) if m.numel() else 0.0
                self._packed = err <= 1e-3
                if not self._packed:
                    warnings.warn(f"packed and padded log-probs differ by {err:.2e} with attention "
                                  f"{attention_implementation(model)!r}; training on padded sequences",
                                  LLMWarning, stacklevel=3)
        return completion_logprobs(model, prompts, completions, temperature=temperature, packed=self._packed,
                                   pad_id=self.pad_id, average=average)

    def ref_logprobs(self, prompts: list[list[int]], completions: list[list[int]], *, temperature: float = 1.0,
                     average: bool = False) -> torch.Tensor:
        """Reference log-probs (no gradient): the ref model, or the model with its LoRA adapters off."""
        with torch.no_grad():
            if self.ref_model is not None:
                return self.logprobs(self.ref_model, prompts, completions, temperature=temperature, average=average)[0]
            if self.peft_config is not None:
                with self.model.disable_adapter():
                    return self.logprobs(self.model, prompts, completions, temperature=temperature,
                                         average=average)[0]
        raise ValueError(f"{type(self).__name__} has no reference model")

    # ------------------------------------------------------------------ optimisation
    def _backward(self, loss: torch.Tensor, scale: float) -> bool:
        """Backpropagate ``loss * scale``; False (nothing done) when the loss is not finite."""
        if not torch.isfinite(loss):
            self._bad_loss = True
            return False
        (loss * scale).backward()
        return True

    def _optimizer_step(self) -> dict[str, float]:
        """Clip, step and advance the schedule; a step whose loss or gradients are not finite is
        skipped (the weights are never touched) and reported."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        grads = [p.grad for p in params if p.grad is not None]
        bad = getattr(self, "_bad_loss", False)
        norm = torch.nn.utils.get_total_norm(grads) if grads else torch.tensor(0.0)
        if not torch.isfinite(norm):
            bad = True
        self._bad_loss = False
        if bad:
            self.optimizer.zero_grad(set_to_none=True)
            self.skipped_steps += 1
            warnings.warn(f"{type(self).__name__}: non-finite loss or gradient at step {self.num_timesteps}; "
                          f"the step was skipped (weights unchanged; {self.skipped_steps} skipped so far)",
                          LLMWarning, stacklevel=3)
            return {"grad_norm": math.nan, "skipped": 1.0}
        if self.config.max_grad_norm > 0:
            torch.nn.utils.clip_grads_with_norm_(params, self.config.max_grad_norm, norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()
        return {"grad_norm": float(norm), "skipped": 0.0}

    def _make_scheduler(self, total_steps: int, kind: Any) -> Any:
        warm = self.config.warmup_steps
        if kind is None:
            kind = self.config.lr_scheduler
        if callable(kind) and not isinstance(kind, str):
            return kind(self.optimizer)
        if kind not in ("constant", "linear", "cosine"):
            raise ValueError(f"scheduler must be 'constant', 'linear', 'cosine' or a callable(optimizer) -> "
                             f"torch LR scheduler, got {kind!r}")

        def factor(step: int) -> float:
            if step < warm:
                return (step + 1) / (warm + 1)
            if kind == "constant":
                return 1.0
            frac = min(1.0, (step - warm) / max(1, total_steps - warm))
            return 1.0 - frac if kind == "linear" else 0.5 * (1.0 + math.cos(math.pi * frac))
        return torch.optim.lr_scheduler.LambdaLR(self.optimizer, factor)

    # ------------------------------------------------------------------ one step
    def train_step(self, batch: Any) -> dict[str, Any]:
        """One optimiser step (``num_iterations`` for GRPO) on ``batch``; returns plain metrics."""
        items = self._items_of(batch)
        t0 = time.perf_counter()
        metrics = self._learn([items])
        self.time_phase("train_step", time.perf_counter() - t0)
        self.last_metrics = metrics
        return metrics

    def _items_of(self, batch: Any) -> list[Any]:
        """Split a user batch into dataset items (subclasses widen this)."""
        return list(batch)

    def time_phase(self, phase: str, seconds: float) -> None:
        self.timings[phase] = self.timings.get(phase, 0.0) + seconds

    # ------------------------------------------------------------------ the training loop
    @property
    def progress_remaining(self) -> float:
        span = self._run_end - self._run_start
        return 1.0 if span <= 0 else max(0.0, 1.0 - (self.num_timesteps - self._run_start) / span)

    @property
    def remaining_timesteps(self) -> int:
        return max(0, self._run_end - self.num_timesteps)

    @property
    def mean_reward(self) -> float:
        """Mean reward (GRPO, OnlineDPO) or reward margin (DPO) of the last 100 items; NaN before any."""
        return float(np.mean(self._recent_rewards[-100:])) if self._recent_rewards else math.nan

    def report_eval(self, metrics: Mapping[str, Any]) -> bool:
        hooks = getattr(self, "_hooks", None) or self.callbacks
        return hooks.on_eval(metrics)

    @staticmethod
    def _dataset_items(dataset: Any) -> list[Any]:
        if dataset is None:
            raise ValueError("train() needs a dataset: a list of prompts / pairs, or a datasets.Dataset")
        if isinstance(dataset, (str, bytes)):
            raise TypeError("dataset must be a list of items or a datasets.Dataset, got a string; wrap one prompt "
                            "as [prompt]")
        try:
            n = len(dataset)
        except TypeError:
            raise TypeError(f"dataset must be a sized collection (list, datasets.Dataset), got "
                            f"{type(dataset).__name__}") from None
        if n == 0:
            raise ValueError("dataset is empty")
        return dataset

    def _next_items(self, data: Any, k: int) -> list[Any]:
        """The next ``k`` items: epoch ``e`` visits the data in a permutation seeded by (seed, e),
        so the position alone (``samples_seen``) says what comes next, also after a resume."""
        n = len(data)
        out = []
        for _ in range(k):
            epoch, i = divmod(self.samples_seen, n)
            if self.config.shuffle:
                if getattr(self, "_perm_epoch", None) != (epoch, n):
                    self._perm = np.random.default_rng([self.seed, epoch]).permutation(n)
                    self._perm_epoch = (epoch, n)
                i = int(self._perm[i])
            out.append(data[i])
            self.samples_seen += 1
        return out

    def train(self, dataset: Any = None, n_steps: int | None = None, *, epochs: float | None = None,
              batch_size: int | None = None, grad_accumulation: int | None = None, lr: float | None = None,
              scheduler: Any = None, resume: bool = False) -> dict[str, Any]:
        """Train on ``dataset`` for ``n_steps`` optimiser steps or ``epochs`` passes.

        Args:
            dataset: a list of items (prompts; dicts with a "prompt" key and extra columns that
                reward functions receive; for DPO pairs) or a ``datasets.Dataset``.
            batch_size, grad_accumulation: items per micro-batch and micro-batches per optimiser
                step (default: the config's).
            lr: learning rate for this run (default: the config's).
            scheduler: "constant" | "linear" | "cosine" or ``callable(optimizer)`` -> LR scheduler.
            resume: continue a run that a checkpoint was saved in the middle of, to its end.

        Returns:
            the last step's metrics (plain names) plus ``steps``, ``skipped_steps``, ``mean_reward``.
        """
        data = self._dataset_items(dataset)
        cfg = self.config
        bs = int(batch_size if batch_size is not None else cfg.batch_size)
        accum = int(grad_accumulation if grad_accumulation is not None else cfg.grad_accumulation)
        if bs < 1 or accum < 1:
            raise ValueError(f"batch_size and grad_accumulation must be >= 1, got {bs} and {accum}")
        if resume:
            if n_steps is not None or epochs is not None:
                raise ValueError("train(resume=True) continues the saved run to its end; do not pass n_steps/epochs")
            if self.num_timesteps >= self._run_end:
                raise ValueError(f"nothing to resume: the saved run ended at step {self._run_end} and the model is "
                                 f"at step {self.num_timesteps}; call train(dataset, n_steps)")
        else:
            if (n_steps is None) == (epochs is None):
                raise ValueError(f"give exactly one of n_steps and epochs, got n_steps={n_steps!r}, epochs={epochs!r}")
            if epochs is not None:
                if not isinstance(epochs, (int, float)) or isinstance(epochs, bool) or not epochs > 0:
                    raise ValueError(f"epochs must be a number > 0, got {epochs!r}")
                n_steps = max(1, math.ceil(epochs * len(data) / (bs * accum)))
            if isinstance(n_steps, bool) or not isinstance(n_steps, (int, np.integer)) or n_steps < 1:
                raise ValueError(f"n_steps must be an int >= 1, got {n_steps!r}")
            self._run_start, self._run_end = self.num_timesteps, self.num_timesteps + int(n_steps)
            if lr is not None:
                for g in self.optimizer.param_groups:
                    g["lr"] = float(lr)
                    g["initial_lr"] = float(lr)
            self.scheduler = self._make_scheduler(int(n_steps), scheduler)
        if resume and self.scheduler is None:
            self.scheduler = self._make_scheduler(self._run_end - self._run_start, scheduler)
        threads = cfg.torch_threads
        previous = torch.get_num_threads()
        if threads is not None and threads != previous:
            torch.set_num_threads(threads)
        try:
            return self._train_loop(data, bs, accum)
        finally:
            if threads is not None and threads != previous:
                torch.set_num_threads(previous)

    def _train_loop(self, data: Any, bs: int, accum: int) -> dict[str, Any]:
        loggers = self._loggers()
        extra = [lg for lg in loggers if isinstance(lg, Callback) and not any(lg is cb for cb in self.callbacks)]
        hooks = CallbackList([*self.callbacks, *extra]) if extra else self.callbacks
        self._hooks = hooks
        hooks.init_callback(self)
        keep_going = hooks.on_training_start() is not False
        t0, start = time.perf_counter(), self.num_timesteps
        plain: dict[str, Any] = {}
        metrics: dict[str, Any] = {}
        while keep_going and self.num_timesteps < self._run_end:
            t_it = time.perf_counter()
            micro = [self._next_items(data, bs) for _ in range(accum)]
            plain = self._learn(micro)
            self.iterations += 1
            metrics = {f"train/{k}": v for k, v in plain.items()}
            metrics["train/mean_reward"] = self.mean_reward
            metrics["train/timesteps"] = self.num_timesteps
            metrics["train/skipped_steps"] = self.skipped_steps
            metrics["train/lr"] = self.optimizer.param_groups[0]["lr"]
            metrics["time/iteration"] = time.perf_counter() - t_it
            metrics["time/sps"] = (self.num_timesteps - start) / max(time.perf_counter() - t0, 1e-9)
            keep_going = hooks.on_update(metrics) and keep_going
            for lg in loggers:
                lg.on_train_step(self.num_timesteps, metrics)
        self.last_metrics = metrics
        hooks.on_training_end(metrics)
        for lg in loggers:
            flush = getattr(lg, "flush", None)
            if callable(flush):
                flush()
        self._hooks = None
        return {**plain, "steps": self.num_timesteps, "skipped_steps": self.skipped_steps,
                "mean_reward": self.mean_reward,
                "sps": (self.num_timesteps - start) / max(time.perf_counter() - t0, 1e-9)}

    def _loggers(self) -> list[Any]:
        given = self.logger if isinstance(self.logger, (list, tuple)) else [self.logger]
        out = [lg for lg in given if lg is not None]
        for lg in out:
            if not callable(getattr(lg, "on_train_step", None)):
                raise TypeError(f"logger {type(lg).__name__} has no on_train_step(step, metrics) method; use an "
                                f"rlox.logging logger or subclass rlox.logging.LoggerCallback")
        out += [cb for cb in self.callbacks if getattr(cb, "is_logger", False) and not any(cb is lg for lg in out)]
        return out

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | os.PathLike) -> None:
        """Write a checkpoint directory: ``model/`` (``save_pretrained``, safetensors; adapters only
        under LoRA), ``ref_model/`` when the reference is the copy this algorithm made,
        ``tokenizer/``, ``trainer_state.pt`` (optimiser, schedule, RNG, counters; read with
        ``weights_only=True``) and ``rlox_llm.json``. Written beside the target and renamed into
        place, so a failed save leaves a previous checkpoint intact."""
        target = Path(path)
        parent = target.parent if str(target.parent) else Path(".")
        if not parent.is_dir():
            raise FileNotFoundError(f"cannot write {str(target)!r}: directory {str(parent)!r} does not exist")
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=parent))
        try:
            self.model.save_pretrained(tmp / "model", safe_serialization=True)
            if self.ref_model is not None and self._owns_ref:
                self.ref_model.save_pretrained(tmp / "ref_model", safe_serialization=True)
            if self.tokenizer is not None:
                self.tokenizer.save_pretrained(tmp / "tokenizer")
            state = {
                "format": LLM_CHECKPOINT_FORMAT, "version": LLM_CHECKPOINT_VERSION, "algorithm": self.name,
                "seed": self.seed, "config": self.config.to_dict(),
                "counters": {"num_timesteps": self.num_timesteps, "iterations": self.iterations,
                             "samples_seen": self.samples_seen, "skipped_steps": self.skipped_steps,
                             "run_start": self._run_start, "run_end": self._run_end},
                "optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "rng": {"torch": self.torch_gen.get_state()},
                "recent_rewards": list(self._recent_rewards[-100:]),
                "packed": self._packed,
            }
            atomic_torch_save(state, tmp / "trainer_state.pt")
            (tmp / "rlox_llm.json").write_text(json.dumps(
                {"format": LLM_CHECKPOINT_FORMAT, "version": LLM_CHECKPOINT_VERSION, "algorithm": self.name,
                 "peft": self.peft_config is not None, "config": self.config.to_dict()}, indent=1))
            if target.exists():
                old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old.", dir=parent))
                os.replace(target, old / "x")
                os.replace(tmp, target)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.replace(tmp, target)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    @classmethod
    def load(cls, path: str | os.PathLike, *, model: Any = None, ref_model: Any = None, tokenizer: Any = None,
             callbacks: Sequence[Any] | None = None, logger: Any = None, **kwargs: Any) -> "LLMAlgorithm":
        """Rebuild from ``save``'s directory; ``train(dataset, resume=True)`` then continues the run
        exactly. ``kwargs`` are the non-config arguments (``reward_fn``, ``judge``, ``peft_config``).
        Under LoRA pass the base ``model`` (the checkpoint holds only the adapters)."""
        root = Path(path)
        meta_path = root / "rlox_llm.json"
        if not meta_path.is_file():
            raise CheckpointError(f"{str(root)!r} is not an rlox LLM checkpoint directory (no rlox_llm.json)")
        meta = json.loads(meta_path.read_text())
        if meta.get("format") != LLM_CHECKPOINT_FORMAT or int(meta.get("version", 0)) > LLM_CHECKPOINT_VERSION:
            raise CheckpointError(f"{str(root)!r} has format {meta.get('format')!r} version {meta.get('version')}; "
                                  f"this rlox reads {LLM_CHECKPOINT_FORMAT!r} up to {LLM_CHECKPOINT_VERSION}")
        if meta.get("algorithm") != cls.name:
            raise CheckpointError(f"{str(root)!r} holds a {meta.get('algorithm')!r} run, not {cls.name!r}")
        state = safe_torch_load(root / "trainer_state.pt")
        if meta.get("peft"):
            if model is None:
                raise ValueError("this checkpoint holds LoRA adapters only; pass the base model= to load()")
            from peft import PeftModel
            model = PeftModel.from_pretrained(model, str(root / "model"), is_trainable=True)
        elif model is None:
            model = root / "model"
        if ref_model is None and (root / "ref_model").is_dir():
            ref_model = root / "ref_model"
        if tokenizer is None and (root / "tokenizer").is_dir():
            tokenizer = root / "tokenizer"
        algo = cls(model, ref_model, tokenizer=tokenizer, seed=int(state["seed"]), callbacks=callbacks,
                   logger=logger, **kwargs, **state["config"])
        if meta.get("peft"):
            algo.peft_config = next(iter(algo.model.peft_config.values()))
        c = state["counters"]
        algo.num_timesteps, algo.iterations = int(c["num_timesteps"]), int(c["iterations"])
        algo.samples_seen, algo.skipped_steps = int(c["samples_seen"]), int(c["skipped_steps"])
        algo._run_start, algo._run_end = int(c["run_start"]), int(c["run_end"])
        algo.optimizer.load_state_dict(state["optimizer"])
        if state.get("scheduler") is not None:
            algo.scheduler = algo._make_scheduler(algo._run_end - algo._run_start, state["config"]["lr_scheduler"])
            algo.scheduler.load_state_dict(state["scheduler"])
            for group, lr in zip(algo.optimizer.param_groups, algo.scheduler.get_last_lr()):
                group["lr"] = lr          # a new scheduler set the first step's rate; the saved one counts
        algo.torch_gen.set_state(state["rng"]["torch"])
        algo._recent_rewards = [float(x) for x in state.get("recent_rewards", [])]
        if state.get("packed") is not None:
            algo._packed = bool(state["packed"])
        return algo

    def save_pretrained(self, path: str | os.PathLike) -> None:
        """The trained model (and tokenizer) alone, in Hugging Face's layout."""
        self.model.save_pretrained(path, safe_serialization=True)
        if self.tokenizer is not None:
            self.tokenizer.save_pretrained(path)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={type(self.model).__name__}, seed={self.seed})"
