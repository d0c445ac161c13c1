"""LLM post-training kernels: GRPO group advantages, token-level KL estimators, DPO pairs,
variable-length token storage and sequence packing. See docs/llm.md.

All functions take and return NumPy arrays; wrap results with ``torch.from_numpy`` (zero copy).
Shapes: rewards ``[n_prompts * group_size]``; log-probabilities flat ``[B * T]`` (with
``seq_len=T``) or ``[B, T]``; batched KL returns ``[B]``. Unsuffixed KL functions compute in
float64, ``_f32`` ones in float32. Token ids are uint32.
"""
from rlox._ext.llm import (
    compute_batch_group_advantages,
    compute_batch_token_kl,
    compute_batch_token_kl_f32,
    compute_batch_token_kl_schulman,
    compute_batch_token_kl_schulman_f32,
    compute_batch_token_kl_squared,
    compute_batch_token_kl_squared_f32,
    compute_group_advantages,
    compute_token_kl,
    compute_token_kl_f32,
    compute_token_kl_per_token,
    compute_token_kl_schulman,
    compute_token_kl_schulman_f32,
    compute_token_kl_squared,
    compute_token_kl_squared_f32,
)
from rlox._ext.sequences import DPOPair, VarLenStore, pack_sequences

__all__ = [
    "compute_group_advantages", "compute_batch_group_advantages",
    "compute_token_kl", "compute_token_kl_f32",
    "compute_token_kl_squared", "compute_token_kl_squared_f32",
    "compute_token_kl_schulman", "compute_token_kl_schulman_f32",
    "compute_batch_token_kl", "compute_batch_token_kl_f32",
    "compute_batch_token_kl_squared", "compute_batch_token_kl_squared_f32",
    "compute_batch_token_kl_schulman", "compute_batch_token_kl_schulman_f32",
    "compute_token_kl_per_token",
    "DPOPair", "VarLenStore", "pack_sequences",
]
