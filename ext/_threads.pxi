# Included (textually) by every kernel module: the module's thread count for prange.
# rlox.set_num_threads() calls _set_num_threads() on each kernel module; kernels read
# ``_num_threads`` without touching Python. Results never depend on its value.
from _omp cimport rlox_default_num_threads, rlox_openmp_enabled


cdef int _num_threads = rlox_default_num_threads()


def _set_num_threads(int n):
    """Set this module's prange thread count (called by rlox.set_num_threads)."""
    global _num_threads
    if n < 1:
        raise ValueError(f"n_threads must be >= 1, got {n}")
    _num_threads = n


def _get_num_threads():
    """This module's prange thread count."""
    return _num_threads


def _openmp_enabled():
    """True when this module was compiled with OpenMP."""
    return bool(rlox_openmp_enabled())
