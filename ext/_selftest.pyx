# Tiny build probe: checks that shared headers, the RNG and prange compile and link.
# Used by tests/test_build.py (thread control and RNG determinism); not part of the public API.
from cython.parallel cimport prange
from _types cimport float64_t, uint64_t
from _rng cimport rng_t, rng_seed, rng_next, rng_uniform, rng_below, rng_normal
import numpy as np

include "_threads.pxi"


def rng_stream(uint64_t seed, Py_ssize_t n, str kind="u64"):
    """First ``n`` draws of the stream seeded by ``seed`` (kind: u64, uniform, normal, below10)."""
    cdef rng_t r
    cdef Py_ssize_t i
    rng_seed(&r, seed)
    if kind == "u64":
        out_u = np.empty(n, dtype=np.uint64)
        for i in range(n):
            out_u[i] = rng_next(&r)
        return out_u
    out = np.empty(n, dtype=np.float64)
    cdef float64_t[::1] o = out
    for i in range(n):
        if kind == "uniform":
            o[i] = rng_uniform(&r)
        elif kind == "normal":
            o[i] = rng_normal(&r)
        elif kind == "below10":
            o[i] = <float64_t>rng_below(&r, 10)
        else:
            raise ValueError(f"kind must be one of u64, uniform, normal, below10; got {kind!r}")
    return out


def parallel_square_sum(const float64_t[::1] x):
    """Sum of x**2 with prange (thread-count invariant up to rounding)."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef float64_t total = 0.0
    for i in prange(n, nogil=True, schedule="static", num_threads=_num_threads):
        total += x[i] * x[i]
    return total
