# n-step returns (compute_nstep_targets), walked along a ReplayBuffer's ring
# (rlox/_ext/buffers.pxd) or along plain (rewards, terminated, truncated) arrays.
from cython.parallel cimport prange
from libc.math cimport isfinite
from _types cimport float32_t, int64_t, intp_t
from _checks cimport positive_int
from rlox._ext.buffers cimport ReplayBuffer, PARALLEL_MIN_ROWS, _flags, _indices, _real_arr
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"


cdef void _nstep(const char* flags, intp_t row_bytes, intp_t cap, intp_t newest,
                 const int64_t* idx, intp_t n_rows, intp_t n, double gamma, intp_t stride,
                 float32_t* out_ret, int64_t* out_boot, float32_t* out_disc,
                 int n_threads) noexcept nogil:
    """IN flags: slot s holds float32 (reward, terminated, truncated) at flags + s * row_bytes,
    a ring of cap slots whose newest is ``newest``; idx [n_rows].
    OUT returns, bootstrap slots and bootstrap discounts [n_rows]. Rows are independent."""
    cdef intp_t b
    if n_threads <= 1 or n_rows < PARALLEL_MIN_ROWS:
        for b in range(n_rows):
            _nstep_row(flags, row_bytes, cap, newest, idx[b], n, gamma, stride,
                       out_ret + b, out_boot + b, out_disc + b)
    else:
        for b in prange(n_rows, nogil=True, schedule="static", num_threads=n_threads):
            _nstep_row(flags, row_bytes, cap, newest, idx[b], n, gamma, stride,
                       out_ret + b, out_boot + b, out_disc + b)


cdef inline void _nstep_row(const char* flags, intp_t row_bytes, intp_t cap, intp_t newest,
                            intp_t s, intp_t n, double gamma, intp_t stride, float32_t* ret,
                            int64_t* boot, float32_t* disc) noexcept nogil:
    cdef double g = 0.0, d = 1.0
    cdef intp_t k, age
    cdef const float32_t* f
    for k in range(n):
        f = <const float32_t*>(flags + s * row_bytes)     # reward, terminated, truncated
        g += d * f[0]
        d *= gamma
        if f[1] != 0.0:
            d = 0.0                     # terminated: nothing to bootstrap from
            break
        if f[2] != 0.0 or k == n - 1:
            break                       # truncated or n rewards summed: bootstrap from next_obs[s]
        age = newest - s
        if age < 0:
            age += cap
        if age < stride:
            break                       # the newest step of this stream: no later step stored
        s += stride
        if s >= cap:
            s -= cap
    ret[0] = <float32_t>g
    boot[0] = s
    disc[0] = <float32_t>d


def compute_nstep_targets(source, indices, n, gamma, stride=1):
    """n-step discounted returns from the transitions at ``indices``, for n-step TD targets.

    ``source``: a ReplayBuffer or PrioritizedReplayBuffer (the walk follows its ring, so it
    never runs across the seam between the newest and the oldest transition), or a tuple / dict
    ``(rewards, terminated, truncated)`` of arrays ``[T]`` in time order (index T-1 is the
    newest). ``indices [B]``: start transitions (e.g. ``batch["indices"]``). ``n >= 1``,
    ``gamma`` in [0, 1]. ``stride``: distance between consecutive steps of one stream, i.e. the
    number of envs when every ``push_batch`` holds one step of each of ``stride`` envs (then
    ``capacity`` must be a multiple of ``stride``); 1 for a single stream.

    For each start t it sums ``R = sum_{k<m} gamma^k r_{t+k}`` over m <= n steps, stopping at
    the first step that is terminated (no bootstrap), truncated (bootstrap from that step's
    ``next_obs``) or the newest stored step of the stream (bootstrap from its ``next_obs``).

    Returns ``(returns [B] float32, bootstrap_indices [B] int64, discounts [B] float32)``: the
    target is ``returns + discounts * V(next_obs[bootstrap_indices])`` with
    ``discounts = gamma^m``, or 0 when the walk stopped at a terminated step. Fetch the bootstrap
    observations with ``buf.gather(bootstrap_indices, fields=("next_obs",))["next_obs"]``.
    With n == 1 this is the one-step target: returns = r_t, bootstrap index t, discount
    gamma * (1 - terminated_t).
    """
    if isinstance(source, ReplayBuffer) and (<ReplayBuffer>source)._spills:
        raise TypeError("compute_nstep_targets takes a ReplayBuffer, a PrioritizedReplayBuffer "
                        "or (rewards, terminated, truncated) arrays, not an MmapReplayBuffer "
                        "(its transitions live in two rings)")
    n = positive_int(n, "n")
    cdef double g = float(gamma)
    if not isfinite(g) or g < 0.0 or g > 1.0:
        raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
    cdef intp_t st = positive_int(stride, "stride"), cap, newest, size, row_bytes
    cdef ReplayBuffer buf
    cdef const char* flags
    if isinstance(source, ReplayBuffer):
        buf = <ReplayBuffer>source
        buf._check_ready()
        cap = buf._ring.capacity
        size = buf._ring.size
        if cap % st != 0:
            raise ValueError(f"stride={st} must divide the buffer capacity {cap} so each "
                             f"env's steps stay {st} slots apart across the wrap")
        newest = buf._ring.pos - 1 if buf._ring.pos > 0 else cap - 1
        flags = buf._ring.data + buf._ring.off_rew
        row_bytes = buf._ring.row_bytes
        packed = None
    else:
        if isinstance(source, dict):
            try:
                parts = (source["rewards"], source["terminated"], source["truncated"])
            except KeyError as e:
                raise KeyError(f"compute_nstep_targets needs the keys 'rewards', 'terminated' "
                               f"and 'truncated'; missing {e}") from None
        elif isinstance(source, (tuple, list)) and len(source) == 3:
            parts = source
        else:
            raise TypeError(f"source must be a ReplayBuffer or (rewards, terminated, truncated), "
                            f"got {type(source).__name__}")
        rew = _real_arr(parts[0], "rewards").reshape(-1)
        size = rew.shape[0]
        packed = np.empty((size, 3), dtype=np.float32)    # (reward, terminated, truncated) rows
        packed[:, 0] = rew
        packed[:, 1] = _flags(parts[1], "terminated", size)
        packed[:, 2] = _flags(parts[2], "truncated", size)
        flags = <const char*>cnp.PyArray_DATA(packed)
        row_bytes = 3 * sizeof(float32_t)
        cap = size
        newest = size - 1
    if size == 0:
        raise ValueError("compute_nstep_targets on an empty source")
    cdef cnp.ndarray idx = _indices(indices, size, "compute_nstep_targets")
    cdef intp_t n_rows = cnp.PyArray_DIM(idx, 0)
    ret = np.empty(n_rows, dtype=np.float32)
    boot = np.empty(n_rows, dtype=np.int64)
    disc = np.empty(n_rows, dtype=np.float32)
    cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
    cdef float32_t* op = <float32_t*>cnp.PyArray_DATA(ret)
    cdef int64_t* bp = <int64_t*>cnp.PyArray_DATA(boot)
    cdef float32_t* dp = <float32_t*>cnp.PyArray_DATA(disc)
    cdef intp_t nn = n
    with nogil:
        _nstep(flags, row_bytes, cap, newest, ip, n_rows, nn, g, st, op, bp, dp, _num_threads)
    return ret, boot, disc
