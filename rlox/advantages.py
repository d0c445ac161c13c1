"""Advantage estimators (Cython kernels): GAE and V-trace. See docs/kernels.md."""
from rlox._ext.advantages import (
    compute_gae,
    compute_gae_batched,
    compute_gae_batched_f32,
    compute_vtrace,
    compute_vtrace_batched,
)

__all__ = ["compute_gae", "compute_gae_batched", "compute_gae_batched_f32", "compute_vtrace", "compute_vtrace_batched"]
