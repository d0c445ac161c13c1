# Replay storage: a ring buffer (ReplayBuffer), prioritized replay on the sum/min trees of
# trees.pxd (PrioritizedReplayBuffer), a ring whose older part spills to a memory-mapped file
# (MmapReplayBuffer), an append-only table for on-policy data (ExperienceTable) and the n-step
# return kernel (compute_nstep_targets).
#
# Layout: every field is one C-contiguous array with one row per slot, written through raw
# pointers (``ring_t``). Slot s holds the transition (obs, action, reward, terminated, truncated,
# next_obs) pushed as the (k * capacity + s)-th push; until the ring is full the live slots are
# 0 .. size - 1, then all of them, and ``pos`` is the next slot written (so the newest transition
# is pos - 1 and, once full, the oldest is pos).
#
# Hot paths: ``push`` checks its arguments with a few C comparisons when they are already NumPy
# arrays of the stored dtype and size (converting anything else once, with a clear error), then
# memcpy's; ``sample`` draws its indices from the buffer's own xoshiro256** stream (or a stream
# seeded from ``seed``) and gathers rows without Python objects. Rewards, actions and the
# terminated/truncated flags are stored as float32.
from cython.parallel cimport prange
from libc.math cimport isfinite, pow, powf, sqrt, INFINITY
from libc.string cimport memcpy, memset
from _types cimport float32_t, float64_t, int64_t, intp_t, uint8_t, uint32_t, uint64_t
from _checks cimport is_native_vec, positive_int, as_array, check_real
from _rng cimport rng_t, rng_seed, rng_below, rng_uniform
from trees cimport (tree_t, tree_alloc, tree_free, tree_clear, tree_set, tree_set_many,
                    tree_set_range, tree_leaf, tree_total, tree_min, tree_find_many,
                    tree_prefetch_paths, tree_stratified_masses)
import json
import os
import warnings
from pathlib import Path

import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

# Gathers that move fewer bytes than this run serially (a fork/join costs microseconds).
cdef enum:
    PARALLEL_MIN_BYTES = 4194304
    # Batched tree queries and n-step walks below this many rows run serially.
    PARALLEL_MIN_ROWS = 4096
    MAX_OBS_NDIM = 8

SAVE_FORMAT_VERSION = 1         # ReplayBuffer.save / load
MMAP_FORMAT_VERSION = 1         # MmapReplayBuffer's cold file
MMAP_MAGIC = b"RLOXRPL1"
MMAP_HEADER_BYTES = 4096
MMAP_META_OFFSET = 128

_FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated")


# ============================================================================ ring storage
# One row per slot, row-major: [obs | next_obs | pad to 4 | actions (act_dim float32) | reward |
# terminated | truncated], padded to 16, 32 or 64 bytes when that small (so a sampled row of a
# low-dimensional env is one cache line; the base is 64-byte aligned) and to 16 bytes otherwise.
# Sampling from a large buffer costs one cache miss per row instead of one per field.
cdef struct ring_t:
    char* data               # [capacity, row_bytes]
    intp_t row_bytes         # bytes per slot
    intp_t obs_bytes         # bytes of one observation (obs at offset 0)
    intp_t off_next          # offset of next_obs (= obs_bytes)
    intp_t off_act           # offset of the float32 actions [act_dim]
    intp_t off_rew           # offset of the float32 reward; terminated and truncated follow
    intp_t act_dim           # floats of one action row
    intp_t capacity          # slots
    intp_t pos               # next slot written
    intp_t size              # live slots


cdef extern from *:
    void __builtin_prefetch(const void* addr) nogil


cdef inline float32_t* _f32(const ring_t* g, intp_t s, intp_t off) noexcept nogil:
    return <float32_t*>(g.data + s * g.row_bytes + off)


cdef inline void _copy(char* dst, const char* src, intp_t n) noexcept nogil:
    """memcpy with the common small observation rows spelled out, so the compiler inlines them."""
    if n == 16:
        memcpy(dst, src, 16)
    elif n == 12:
        memcpy(dst, src, 12)
    elif n == 32:
        memcpy(dst, src, 32)
    elif n == 8:
        memcpy(dst, src, 8)
    elif n == 24:
        memcpy(dst, src, 24)
    elif n == 4:
        memcpy(dst, src, 4)
    else:
        memcpy(dst, src, n)


cdef inline void _put_row(ring_t* g, intp_t s, const char* obs, const char* nobs,
                          const float32_t* act, float32_t rew, float32_t te,
                          float32_t tr) noexcept nogil:
    """IN one transition; OUT slot s of g."""
    cdef char* row = g.data + s * g.row_bytes
    cdef float32_t* a = <float32_t*>(row + g.off_act)
    cdef float32_t* f = <float32_t*>(row + g.off_rew)
    cdef intp_t k
    _copy(row, obs, g.obs_bytes)
    _copy(row + g.off_next, nobs, g.obs_bytes)
    for k in range(g.act_dim):
        a[k] = act[k]
    f[0] = rew
    f[1] = te
    f[2] = tr


cdef inline void _put_rows(ring_t* g, intp_t s, const char* obs, const char* nobs,
                           const float32_t* act, const float32_t* rew, const float32_t* te,
                           const float32_t* tr, intp_t n) noexcept nogil:
    """IN rows 0 .. n-1 of contiguous field arrays; OUT slots s .. s+n-1 of g (no wrap)."""
    cdef intp_t r, ob = g.obs_bytes, ad = g.act_dim
    for r in range(n):
        _put_row(g, s + r, obs + r * ob, nobs + r * ob, act + r * ad, rew[r], te[r], tr[r])


cdef inline void _move_rows(ring_t* dst, intp_t d, const ring_t* src, intp_t s,
                            intp_t n) noexcept nogil:
    """Slots s .. s+n-1 of src -> slots d .. d+n-1 of dst (same row layout, no wrap)."""
    memcpy(dst.data + d * dst.row_bytes, src.data + s * src.row_bytes, n * src.row_bytes)


cdef inline void _gather_row(const ring_t* g, intp_t s, intp_t b, char* obs, char* nobs,
                             float32_t* act, float32_t* rew, float32_t* te,
                             float32_t* tr) noexcept nogil:
    """Slot s of g -> row b of each output that is not NULL."""
    cdef const char* row = g.data + s * g.row_bytes
    cdef const float32_t* a = <const float32_t*>(row + g.off_act)
    cdef const float32_t* f = <const float32_t*>(row + g.off_rew)
    cdef intp_t ob = g.obs_bytes, ad = g.act_dim, k
    if obs != NULL:
        _copy(obs + b * ob, row, ob)
    if nobs != NULL:
        _copy(nobs + b * ob, row + g.off_next, ob)
    if act != NULL:
        for k in range(ad):
            act[b * ad + k] = a[k]
    if rew != NULL:
        rew[b] = f[0]
    if te != NULL:
        te[b] = f[1]
    if tr != NULL:
        tr[b] = f[2]


cdef inline const ring_t* _which(const ring_t* hot, const ring_t* cold, intp_t j,
                                 intp_t* slot) noexcept nogil:
    if j < hot.size:
        slot[0] = j
        return hot
    slot[0] = j - hot.size
    return cold


cdef enum:
    PREFETCH_AHEAD = 8


cdef void _gather(const ring_t* hot, const ring_t* cold, const int64_t* idx, intp_t n,
                  char* obs, char* nobs, float32_t* act, float32_t* rew, float32_t* te,
                  float32_t* tr, int n_threads) noexcept nogil:
    """IN idx [n] logical indices (< hot.size: hot slot; else cold slot idx - hot.size);
    OUT row b of each non-NULL output <- transition idx[b]. Rows are independent (prange).
    Small rows are prefetched a few iterations ahead so their cache misses overlap."""
    cdef intp_t b, s, s2
    cdef const ring_t* g
    cdef const ring_t* g2
    cdef intp_t moved = n * hot.row_bytes
    if n_threads <= 1 or n < 2 or moved < PARALLEL_MIN_BYTES:
        if hot.row_bytes <= 64:
            for b in range(n):
                if b + PREFETCH_AHEAD < n:
                    g2 = _which(hot, cold, idx[b + PREFETCH_AHEAD], &s2)
                    __builtin_prefetch(g2.data + s2 * g2.row_bytes)
                g = _which(hot, cold, idx[b], &s)
                _gather_row(g, s, b, obs, nobs, act, rew, te, tr)
        else:
            for b in range(n):
                g = _which(hot, cold, idx[b], &s)
                _gather_row(g, s, b, obs, nobs, act, rew, te, tr)
    else:
        for b in prange(n, nogil=True, schedule="static", num_threads=n_threads):
            _gather_one(hot, cold, idx[b], b, obs, nobs, act, rew, te, tr)


cdef inline void _gather_one(const ring_t* hot, const ring_t* cold, intp_t j, intp_t b,
                             char* obs, char* nobs, float32_t* act, float32_t* rew,
                             float32_t* te, float32_t* tr) noexcept nogil:
    cdef intp_t s
    cdef const ring_t* g = _which(hot, cold, j, &s)
    _gather_row(g, s, b, obs, nobs, act, rew, te, tr)


cdef void _layout(ring_t* g, intp_t obs_bytes, intp_t act_dim):
    """Field offsets and row size for one observation of obs_bytes and act_dim floats."""
    cdef intp_t end, row
    g.obs_bytes = obs_bytes
    g.off_next = obs_bytes
    g.off_act = (2 * obs_bytes + 3) // 4 * 4
    g.act_dim = act_dim
    g.off_rew = g.off_act + 4 * act_dim
    end = g.off_rew + 12
    if end <= 64:
        row = 16
        while row < end:
            row *= 2
    else:
        row = (end + 15) // 16 * 16
    g.row_bytes = row


cdef object _aligned_rows(intp_t capacity, intp_t row_bytes):
    """A zeroed uint8 array [capacity, row_bytes] whose data starts on a 64-byte boundary."""
    raw = np.zeros(capacity * row_bytes + 64, dtype=np.uint8)
    cdef intp_t shift = (-(<intp_t>cnp.PyArray_DATA(raw))) & 63
    return raw[shift:shift + capacity * row_bytes].reshape(capacity, row_bytes)


cdef object _field_view(object rows, const ring_t* g, str name, object obs_dtype, intp_t n):
    """A NumPy view of one field over the first n rows of ``rows`` (shape [n, width] or [n])."""
    if name == "obs":
        return rows[:n, :g.obs_bytes].view(obs_dtype)
    if name == "next_obs":
        return rows[:n, g.off_next:g.off_next + g.obs_bytes].view(obs_dtype)
    if name == "actions":
        return rows[:n, g.off_act:g.off_act + 4 * g.act_dim].view(np.float32)
    k = ("rewards", "terminated", "truncated").index(name)
    return rows[:n, g.off_rew + 4 * k:g.off_rew + 4 * k + 4].view(np.float32)[:, 0]

# ============================================================================ argument checks
cdef uint64_t _seed64(object seed) except? 0:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed must be an int or None, got {seed!r} ({type(seed).__name__})")
    return <uint64_t>(int(seed) & 0xFFFFFFFFFFFFFFFF)


cdef object _fresh_seed():
    return int.from_bytes(os.urandom(8), "little")


cdef object _obs_dtype(object obs_dtype):
    dt = np.dtype(obs_dtype)
    if dt != np.float32 and dt != np.uint8:
        raise TypeError(f"obs_dtype must be np.float32 or np.uint8 (image observations), got {dt}")
    return dt


cdef tuple _obs_shape(object obs_dim, object obs_shape):
    """The observation shape from obs_dim and/or obs_shape (which must agree)."""
    if obs_shape is None:
        if obs_dim is None:
            raise TypeError("give obs_dim (an int) or obs_shape (a tuple of ints)")
        return (positive_int(obs_dim, "obs_dim"),)
    if isinstance(obs_shape, (int, np.integer)):
        obs_shape = (obs_shape,)
    shape = tuple(positive_int(d, "obs_shape entries") for d in obs_shape)
    if len(shape) == 0 or len(shape) > MAX_OBS_NDIM:
        raise ValueError(f"obs_shape must have 1 to {MAX_OBS_NDIM} dimensions, got {shape}")
    if obs_dim is not None and positive_int(obs_dim, "obs_dim") != int(np.prod(shape)):
        raise ValueError(f"obs_dim={obs_dim} disagrees with obs_shape={shape} "
                         f"(product {int(np.prod(shape))}); give one of them or make them agree")
    return shape


cdef inline object _real_arr(object x, str name):
    """np.asarray(x) when it holds real numbers (no conversion yet), else TypeError."""
    return check_real(as_array(x, name), name)


cdef object _flags(object x, str name, intp_t n):
    """terminated / truncated of a batch -> float32 [n] of 0.0 / 1.0."""
    arr = _real_arr(x, name).reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, expected {n} (one per transition)")
    return np.ascontiguousarray(arr != 0, dtype=np.float32)


cdef double _reward_slow(object x) except? -1.0:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(f"reward must be a real number, got {x!r} ({type(x).__name__})") from None


cdef inline double _reward(object x) except? -1.0:
    cdef double r = (<double>x) if type(x) is float else _reward_slow(x)
    if not isfinite(r):
        raise ValueError(f"reward must be finite, got {r}")
    return r


cdef cnp.ndarray _indices(object indices, intp_t n_live, str what):
    """indices -> int64 C-contiguous 1-D (the array itself when it already is one), each in
    [0, n_live); checked in one C loop."""
    cdef cnp.ndarray idx
    if is_native_vec(indices, cnp.NPY_INT64, -1):
        idx = <cnp.ndarray>indices
    else:
        arr = np.asarray(indices)
        if arr.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {arr.dtype}")
        idx = np.ascontiguousarray(arr.reshape(-1), dtype=np.int64)
    cdef const int64_t* p = <const int64_t*>cnp.PyArray_DATA(idx)
    cdef intp_t k, n = cnp.PyArray_DIM(idx, 0)
    for k in range(n):
        if <uint64_t>p[k] >= <uint64_t>n_live:       # negative values wrap to huge
            raise IndexError(f"{what}: index {p[k]} out of range for a buffer holding {n_live} "
                             f"transitions (valid: 0 .. {n_live - 1})")
    return idx


# ============================================================================ ReplayBuffer
cdef class ReplayBuffer:
    """Fixed-capacity ring buffer of transitions with uniform sampling (with replacement).

    ``ReplayBuffer(capacity, obs_dim, act_dim=1, *, obs_shape=None, obs_dtype=np.float32,
    seed=None)``. Observations are stored as ``obs_dtype`` (float32, or uint8 for image
    observations, which are stored without conversion and must be pushed as uint8);
    actions, rewards and the terminated/truncated flags as float32. At capacity the oldest
    transition is overwritten.

    ``push(obs, action, reward, terminated, truncated, next_obs)`` stores one transition:
    ``obs``/``next_obs`` of shape ``obs_shape`` (or flat ``(obs_dim,)``), ``action`` of shape
    ``(act_dim,)`` (a plain number when ``act_dim == 1``). The fast path is a float32 (or uint8)
    C-contiguous 1-D array; other arrays are converted once.
    ``push_batch(obs, actions, rewards, terminated, truncated, next_obs)`` stores N transitions
    in one copy: ``obs [N, *obs_shape]`` (or ``[N, obs_dim]`` or flat ``[N * obs_dim]``),
    ``actions [N, act_dim]`` (or ``[N]`` when ``act_dim == 1``), the rest ``[N]``.

    ``sample(batch_size, seed=None)`` returns a dict of new NumPy arrays: ``obs``, ``next_obs``
    ``[B, *obs_shape]``, ``actions [B, act_dim]``, ``rewards``, ``terminated``, ``truncated``
    ``[B]`` float32 and ``indices [B]`` int64 (the slots drawn, for ``compute_nstep_targets``).
    With ``seed`` the draw depends only on the seed and the buffer's contents; without it the
    buffer's own random stream advances. Not thread-safe: use one buffer per thread.
    """
    cdef ring_t _ring
    cdef ring_t _cold            # empty here; MmapReplayBuffer's spilled part
    cdef rng_t _rng
    cdef object _seed
    cdef readonly tuple obs_shape
    cdef readonly object obs_dtype
    cdef readonly intp_t obs_dim
    cdef readonly intp_t act_dim
    cdef int _obs_typenum
    cdef int _obs_ndim
    cdef intp_t _obs_dims[MAX_OBS_NDIM]
    cdef bint _spills            # overflowing rows must reach the cold ring (none skipped)
    cdef object _rows            # uint8 [capacity, row_bytes], the ring's memory

    def __cinit__(self, *args, **kwargs):
        memset(&self._ring, 0, sizeof(ring_t))
        memset(&self._cold, 0, sizeof(ring_t))
        self._spills = False

    def __init__(self, capacity, obs_dim=None, act_dim=1, *, obs_shape=None,
                 obs_dtype=np.float32, seed=None):
        self._setup(positive_int(capacity, "capacity"), obs_dim, act_dim, obs_shape,
                    obs_dtype, seed)

    cdef _setup(self, intp_t capacity, obs_dim, act_dim, obs_shape, obs_dtype, seed):
        self.obs_shape = _obs_shape(obs_dim, obs_shape)
        self.obs_dtype = _obs_dtype(obs_dtype)
        self.obs_dim = int(np.prod(self.obs_shape))
        self.act_dim = positive_int(act_dim, "act_dim")
        self._obs_typenum = cnp.NPY_UINT8 if self.obs_dtype == np.uint8 else cnp.NPY_FLOAT
        self._obs_ndim = len(self.obs_shape)
        for k, d in enumerate(self.obs_shape):
            self._obs_dims[k] = d
        self._seed = _fresh_seed() if seed is None else int(seed)
        rng_seed(&self._rng, _seed64(self._seed))
        _layout(&self._ring, self.obs_dim * self.obs_dtype.itemsize, self.act_dim)
        self._rows = _aligned_rows(capacity, self._ring.row_bytes)
        self._ring.data = <char*>cnp.PyArray_DATA(self._rows)
        self._ring.capacity = capacity
        self._ring.pos = 0
        self._ring.size = 0

    # ------------------------------------------------------------------ sizes
    @property
    def capacity(self):
        """Most transitions held at once."""
        return self._ring.capacity

    def __len__(self):
        return self._ring.size

    cdef intp_t _live(self) noexcept:
        return self._ring.size + self._cold.size

    @property
    def pos(self):
        """Next slot written (the newest transition is ``pos - 1``, modulo capacity)."""
        return self._ring.pos

    def __repr__(self):
        return (f"{type(self).__name__}(capacity={self.capacity}, obs_shape={self.obs_shape}, "
                f"obs_dtype={self.obs_dtype}, act_dim={self.act_dim}, len={len(self)})")

    cdef int _check_ready(self) except -1:
        if self._ring.capacity == 0:
            raise RuntimeError(f"{type(self).__name__} is not initialised (or was closed)")
        return 0

    # ------------------------------------------------------------------ argument conversion
    cdef object _obs_arg(self, object x, str name):
        """x itself when it is a ready row (the fast path), else a converted copy."""
        if type(x) is cnp.ndarray:
            a = <cnp.ndarray>x
            if (cnp.PyArray_TYPE(a) == self._obs_typenum and cnp.PyArray_ISCARRAY_RO(a)
                    and cnp.PyArray_ISNOTSWAPPED(a) and self._shape_ok(a)):
                return x
        return self._convert_obs(x, name)

    cdef bint _shape_ok(self, cnp.ndarray a) noexcept:
        cdef int nd = cnp.PyArray_NDIM(a), k
        if nd == 1:
            return cnp.PyArray_DIM(a, 0) == self.obs_dim
        if nd != self._obs_ndim:
            return False
        for k in range(nd):
            if cnp.PyArray_DIM(a, k) != self._obs_dims[k]:
                return False
        return True

    cdef object _convert_obs(self, object x, str name):
        arr = _real_arr(x, name)
        if self._obs_typenum == cnp.NPY_UINT8 and arr.dtype != np.uint8:
            raise TypeError(f"{name} has dtype {arr.dtype}, but this buffer stores uint8 "
                            f"observations without conversion: pass uint8 arrays (or create "
                            f"the buffer with obs_dtype=np.float32)")
        if arr.shape != self.obs_shape and arr.shape != (self.obs_dim,):
            expected = (f"{self.obs_shape}" if self._obs_ndim == 1
                        else f"{self.obs_shape} or ({self.obs_dim},)")
            raise ValueError(f"{name} has shape {arr.shape}, expected {expected}")
        return np.ascontiguousarray(arr.reshape(-1), dtype=self.obs_dtype)

    cdef object _action_arg(self, object x):
        arr = _real_arr(x, "action")
        if arr.size != self.act_dim or arr.ndim > 1:
            raise ValueError(f"action has shape {arr.shape}, expected ({self.act_dim},)"
                             + (" or a number" if self.act_dim == 1 else ""))
        return np.ascontiguousarray(arr.reshape(-1), dtype=np.float32)

    cdef object _obs_batch(self, object x, str name, intp_t n):
        arr = _real_arr(x, name)
        if self._obs_typenum == cnp.NPY_UINT8 and arr.dtype != np.uint8:
            raise TypeError(f"{name} has dtype {arr.dtype}, but this buffer stores uint8 "
                            f"observations without conversion: pass uint8 arrays")
        if not (arr.shape == (n,) + self.obs_shape or arr.shape == (n, self.obs_dim)
                or arr.shape == (n * self.obs_dim,)):
            raise ValueError(f"{name} has shape {arr.shape}, expected {(n,) + self.obs_shape}"
                             f" for {n} transitions (or ({n}, {self.obs_dim}) or flat "
                             f"({n * self.obs_dim},))")
        return np.ascontiguousarray(arr.reshape(n, self.obs_dim), dtype=self.obs_dtype)

    cdef object _action_batch(self, object x, intp_t n):
        arr = _real_arr(x, "actions")
        ok = arr.shape == (n, self.act_dim) or arr.shape == (n * self.act_dim,)
        if not ok:
            raise ValueError(f"actions has shape {arr.shape}, expected ({n}, {self.act_dim})"
                             + (f" or ({n},)" if self.act_dim == 1 else
                                f" or flat ({n * self.act_dim},)"))
        return np.ascontiguousarray(arr.reshape(n, self.act_dim), dtype=np.float32)

    # ------------------------------------------------------------------ writing
    cdef intp_t _push_one(self, obs, action, reward, terminated, truncated,
                          next_obs) except -1:
        """Check and convert one transition, then store it; returns its slot."""
        self._check_ready()
        o = obs if is_native_vec(obs, self._obs_typenum, self.obs_dim) else self._obs_arg(obs, "obs")
        n = (next_obs if is_native_vec(next_obs, self._obs_typenum, self.obs_dim)
             else self._obs_arg(next_obs, "next_obs"))
        cdef float32_t a1
        cdef const float32_t* ap
        if self.act_dim == 1 and (type(action) is float or type(action) is int):
            a1 = <float32_t>(<double>action)
            ap = &a1
            a = None
        else:
            a = action if is_native_vec(action, cnp.NPY_FLOAT, self.act_dim) else self._action_arg(action)
            ap = <const float32_t*>cnp.PyArray_DATA(a)
        cdef double r = _reward(reward)
        cdef float32_t te = 1.0 if terminated else 0.0
        cdef float32_t tr = 1.0 if truncated else 0.0
        return self._store_one(<const char*>cnp.PyArray_DATA(o),
                               <const char*>cnp.PyArray_DATA(n), ap, <float32_t>r, te, tr)

    cdef intp_t _store_one(self, const char* obs, const char* nobs, const float32_t* act,
                           float32_t rew, float32_t te, float32_t tr) except -1:
        cdef ring_t* g = &self._ring
        cdef intp_t s = g.pos
        if g.size == g.capacity:
            self._evict(s, 1)
        _put_row(g, s, obs, nobs, act, rew, te, tr)
        g.pos = s + 1 if s + 1 < g.capacity else 0
        if g.size < g.capacity:
            g.size += 1
        return s

    cdef int _evict(self, intp_t first, intp_t n) except -1:
        """Hook: live slots first .. first+n-1 (no wrap) are about to be overwritten."""
        return 0

    cdef intp_t _store_rows(self, const char* obs, const char* nobs, const float32_t* act,
                            const float32_t* rew, const float32_t* te, const float32_t* tr,
                            intp_t n) except -1:
        """Row r goes to slot (pos + r) % capacity, as n single pushes would put it. Returns the
        first row written: rows that this same call would overwrite are skipped (unless the
        buffer spills them to a cold ring)."""
        cdef ring_t* g = &self._ring
        cdef intp_t cap = g.capacity, skip = 0, r, chunk, ob = g.obs_bytes, ad = g.act_dim
        if n > cap and not self._spills:
            skip = n - cap
            g.pos = (g.pos + skip) % cap
            g.size = cap
        r = skip
        while r < n:
            chunk = n - r
            if chunk > cap - g.pos:
                chunk = cap - g.pos
            if g.size == cap:
                self._evict(g.pos, chunk)
            _put_rows(g, g.pos, obs + r * ob, nobs + r * ob, act + r * ad, rew + r, te + r,
                      tr + r, chunk)
            g.pos = (g.pos + chunk) % cap
            g.size = g.size + chunk if g.size + chunk < cap else cap
            r += chunk
        return skip

    def push(self, obs, action, reward, terminated, truncated, next_obs):
        """Store one transition (see the class docstring for shapes)."""
        self._push_one(obs, action, reward, terminated, truncated, next_obs)

    cdef tuple _batch_args(self, obs, actions, rewards, terminated, truncated, next_obs):
        rew = _real_arr(rewards, "rewards").reshape(-1)
        cdef intp_t n = rew.shape[0]
        rew = np.ascontiguousarray(rew, dtype=np.float32)
        if n and not np.isfinite(rew).all():
            bad = int(np.flatnonzero(~np.isfinite(rew))[0])
            raise ValueError(f"rewards must be finite, got {rew[bad]} at index {bad}")
        return (self._obs_batch(obs, "obs", n), self._action_batch(actions, n), rew,
                _flags(terminated, "terminated", n), _flags(truncated, "truncated", n),
                self._obs_batch(next_obs, "next_obs", n))

    cdef intp_t _push_rows(self, tuple args) except -1:
        o, a, r, te, tr, nx = args
        return self._store_rows(<const char*>cnp.PyArray_DATA(o), <const char*>cnp.PyArray_DATA(nx),
                                <const float32_t*>cnp.PyArray_DATA(a),
                                <const float32_t*>cnp.PyArray_DATA(r),
                                <const float32_t*>cnp.PyArray_DATA(te),
                                <const float32_t*>cnp.PyArray_DATA(tr), r.shape[0])

    def push_batch(self, obs, actions, rewards, terminated, truncated, next_obs):
        """Store N transitions with one copy per field (equal to N calls of ``push``)."""
        self._check_ready()
        args = self._batch_args(obs, actions, rewards, terminated, truncated, next_obs)
        if args[2].shape[0]:
            self._push_rows(args)

    def clear(self):
        """Forget every transition (capacity and shapes unchanged)."""
        self._ring.pos = 0
        self._ring.size = 0

    # ------------------------------------------------------------------ reading
    cdef dict _gather_dict(self, cnp.ndarray idx, tuple fields=_FIELDS):
        """New arrays holding the transitions at logical indices idx (checked by the caller)."""
        cdef intp_t n = cnp.PyArray_DIM(idx, 0)
        cdef cnp.npy_intp dims[MAX_OBS_NDIM + 1]
        cdef cnp.npy_intp d2[2]
        cdef int k
        dims[0] = n
        for k in range(self._obs_ndim):
            dims[k + 1] = self._obs_dims[k]
        d2[0] = n
        d2[1] = self.act_dim
        out = {}
        cdef char* op = NULL
        cdef char* np_ = NULL
        cdef float32_t* ap = NULL
        cdef float32_t* rp = NULL
        cdef float32_t* tp = NULL
        cdef float32_t* up = NULL
        for f in fields:
            if f == "obs" or f == "next_obs":
                arr = cnp.PyArray_EMPTY(self._obs_ndim + 1, dims, self._obs_typenum, 0)
                if f == "obs":
                    op = <char*>cnp.PyArray_DATA(arr)
                else:
                    np_ = <char*>cnp.PyArray_DATA(arr)
            elif f == "actions":
                arr = cnp.PyArray_EMPTY(2, d2, cnp.NPY_FLOAT, 0)
                ap = <float32_t*>cnp.PyArray_DATA(arr)
            elif f in ("rewards", "terminated", "truncated"):
                arr = cnp.PyArray_EMPTY(1, dims, cnp.NPY_FLOAT, 0)
                if f == "rewards":
                    rp = <float32_t*>cnp.PyArray_DATA(arr)
                elif f == "terminated":
                    tp = <float32_t*>cnp.PyArray_DATA(arr)
                else:
                    up = <float32_t*>cnp.PyArray_DATA(arr)
            else:
                raise ValueError(f"unknown field {f!r}; fields are {_FIELDS}")
            out[f] = arr
        cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
        if n * self._ring.row_bytes >= PARALLEL_MIN_BYTES:
            with nogil:
                _gather(&self._ring, &self._cold, ip, n, op, np_, ap, rp, tp, up, _num_threads)
        else:
            _gather(&self._ring, &self._cold, ip, n, op, np_, ap, rp, tp, up, 1)
        return out

    cdef dict _gather_all(self, cnp.ndarray idx):
        """_gather_dict for every field, without the per-field dispatch (the sampling path)."""
        cdef intp_t n = cnp.PyArray_DIM(idx, 0)
        cdef cnp.npy_intp dims[MAX_OBS_NDIM + 1]
        cdef cnp.npy_intp d2[2]
        cdef int k
        dims[0] = n
        for k in range(self._obs_ndim):
            dims[k + 1] = self._obs_dims[k]
        d2[0] = n
        d2[1] = self.act_dim
        o = cnp.PyArray_EMPTY(self._obs_ndim + 1, dims, self._obs_typenum, 0)
        nx = cnp.PyArray_EMPTY(self._obs_ndim + 1, dims, self._obs_typenum, 0)
        a = cnp.PyArray_EMPTY(2, d2, cnp.NPY_FLOAT, 0)
        r = cnp.PyArray_EMPTY(1, dims, cnp.NPY_FLOAT, 0)
        te = cnp.PyArray_EMPTY(1, dims, cnp.NPY_FLOAT, 0)
        tr = cnp.PyArray_EMPTY(1, dims, cnp.NPY_FLOAT, 0)
        cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
        cdef char* op = <char*>cnp.PyArray_DATA(o)
        cdef char* xp = <char*>cnp.PyArray_DATA(nx)
        cdef float32_t* ap = <float32_t*>cnp.PyArray_DATA(a)
        cdef float32_t* rp = <float32_t*>cnp.PyArray_DATA(r)
        cdef float32_t* tp = <float32_t*>cnp.PyArray_DATA(te)
        cdef float32_t* up = <float32_t*>cnp.PyArray_DATA(tr)
        if n * self._ring.row_bytes >= PARALLEL_MIN_BYTES:
            with nogil:
                _gather(&self._ring, &self._cold, ip, n, op, xp, ap, rp, tp, up, _num_threads)
        else:
            _gather(&self._ring, &self._cold, ip, n, op, xp, ap, rp, tp, up, 1)
        return {"obs": o, "next_obs": nx, "actions": a, "rewards": r, "terminated": te,
                "truncated": tr, "indices": idx}

    cdef intp_t _batch_size(self, object batch_size) except -1:
        cdef intp_t n = positive_int(batch_size, "batch_size")
        if self._live() == 0:
            raise ValueError(f"cannot sample from an empty {type(self).__name__}: push "
                             f"transitions first")
        return n

    cdef rng_t* _stream(self, object seed, rng_t* local) except NULL:
        if seed is None:
            return &self._rng
        rng_seed(local, _seed64(seed))
        return local

    def sample(self, batch_size, seed=None):
        """``batch_size`` transitions drawn uniformly with replacement (dict of arrays)."""
        self._check_ready()
        cdef intp_t n = self._batch_size(batch_size), b
        cdef rng_t local
        cdef rng_t* rng = self._stream(seed, &local)
        cdef cnp.npy_intp dim = n
        cdef cnp.ndarray idx = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
        cdef int64_t* ip = <int64_t*>cnp.PyArray_DATA(idx)
        cdef uint64_t live = self._live()
        for b in range(n):
            ip[b] = <int64_t>rng_below(rng, live)
        return self._gather_all(idx)

    def gather(self, indices, fields=None):
        """The transitions at ``indices`` (as returned in ``sample(...)["indices"]``).

        ``fields``: names to return (default: all six fields plus ``indices``), e.g.
        ``("next_obs",)`` to fetch the bootstrap observations of ``compute_nstep_targets``.
        """
        self._check_ready()
        idx = _indices(indices, self._live(), "gather")
        if fields is None:
            return self._gather_all(idx)
        if isinstance(fields, str):
            fields = (fields,)
        return self._gather_dict(idx, tuple(fields))

    # ------------------------------------------------------------------ save / load
    def _state(self):
        """(metadata, arrays) describing the buffer exactly; subclasses add their parts."""
        cdef intp_t n = self._ring.size
        rng_state = np.array([self._rng.s[0], self._rng.s[1], self._rng.s[2], self._rng.s[3]],
                             dtype=np.uint64)
        meta = {"format": "rlox-replay-buffer", "version": SAVE_FORMAT_VERSION,
                "class": type(self).__name__, "capacity": int(self._ring.capacity),
                "obs_shape": list(self.obs_shape), "obs_dtype": str(self.obs_dtype),
                "act_dim": int(self.act_dim), "pos": int(self._ring.pos), "size": int(n),
                "seed": str(self._seed)}
        arrays = {name: self._field(name, n) for name in _FIELDS}
        arrays["rng_state"] = rng_state
        return meta, arrays

    def _restore(self, dict meta, dict arrays):
        cdef intp_t n = meta["size"], pos = meta["pos"], cap = self._ring.capacity
        if not (0 <= n <= cap and 0 <= pos < cap and (n == cap or pos == n)):
            raise ValueError(f"inconsistent saved buffer: size={n}, pos={pos}, capacity={cap}")
        for name in _FIELDS:
            if name not in arrays:
                raise ValueError(f"the saved buffer lacks the array {name!r}")
            src = np.asarray(arrays[name])
            dst = self._field(name, n)
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ValueError(f"saved array {name!r} has shape {src.shape} and dtype "
                                 f"{src.dtype}, expected {dst.shape} and {dst.dtype}")
            dst[...] = src
        state = np.asarray(arrays["rng_state"], dtype=np.uint64)
        for k in range(4):
            self._rng.s[k] = int(state[k])
        self._ring.size = n
        self._ring.pos = pos

    def _field(self, str name, n):
        """A writable view of one field over slots 0 .. n-1 (for save/load and tests)."""
        return _field_view(self._rows, &self._ring, name, self.obs_dtype, n)

    @classmethod
    def _from_meta(cls, dict meta):
        return cls(meta["capacity"], act_dim=meta["act_dim"], obs_shape=tuple(meta["obs_shape"]),
                   obs_dtype=meta["obs_dtype"], seed=int(meta["seed"]))

    def save(self, path):
        """Write the buffer (contents, write position, random stream) to ``path``.

        ``path`` ending in ``.npz``: one uncompressed NumPy archive with the metadata as a JSON
        string; any other path: a directory of ``<field>.npy`` files plus ``meta.json``.
        Nothing is pickled. ``type(buf).load(path)`` restores it exactly.
        """
        meta, arrays = self._state()
        _write_state(path, meta, arrays)

    @classmethod
    def load(cls, path):
        """A new buffer restored from ``save(path)`` (the same class must load it)."""
        meta, arrays = _read_state(path)
        if meta.get("class") != cls.__name__:
            raise ValueError(f"{path} holds a {meta.get('class')}, not a {cls.__name__}; load "
                             f"it with rlox.{meta.get('class')}.load")
        buf = cls._from_meta(meta)
        buf._restore(meta, arrays)
        return buf


def _write_state(path, meta, arrays):
    path = Path(path)
    meta_json = json.dumps(meta)
    if path.suffix == ".npz":
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(path, meta=np.array(meta_json), **arrays)
    else:
        path.mkdir(parents=True, exist_ok=True)
        for name, arr in arrays.items():
            np.save(path / f"{name}.npy", np.ascontiguousarray(arr), allow_pickle=False)
        (path / "meta.json").write_text(meta_json)


def _read_state(path):
    path = Path(path)
    if path.suffix == ".npz":
        if not path.is_file():
            raise FileNotFoundError(f"no saved buffer at {path}")
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        meta = json.loads(str(arrays.pop("meta")))
    else:
        if not (path / "meta.json").is_file():
            raise FileNotFoundError(f"no saved buffer at {path} (expected {path / 'meta.json'})")
        meta = json.loads((path / "meta.json").read_text())
        arrays = {p.stem: np.load(p, allow_pickle=False) for p in path.glob("*.npy")}
    if meta.get("format") != "rlox-replay-buffer":
        raise ValueError(f"{path} is not a saved rlox replay buffer")
    if meta.get("version") != SAVE_FORMAT_VERSION:
        raise ValueError(f"{path} has format version {meta.get('version')}; this rlox reads "
                         f"version {SAVE_FORMAT_VERSION}")
    return meta, arrays


# ============================================================================ prioritized replay
cdef class PrioritizedReplayBuffer(ReplayBuffer):
    """Proportional prioritized replay (Schaul et al. 2016) on a sum tree and a min tree.

    ``PrioritizedReplayBuffer(capacity, obs_dim, act_dim=1, alpha=0.6, beta=0.4, eps=1e-6,
    *, obs_shape=None, obs_dtype=np.float32, seed=None)``.

    Priorities are non-negative finite numbers, typically ``|TD error|``; the buffer stores
    ``(priority + eps) ** alpha`` per transition, so none has probability zero.
    ``push(..., priority=None)`` / ``push_batch(..., priorities=None)`` default to the largest
    priority seen so far (1.0 at the start), so new transitions are replayed at least once.

    ``sample(batch_size, seed=None, beta=None)`` draws with P(i) = p_i^alpha / sum_k p_k^alpha
    by *stratified* sampling: the total mass is cut into ``batch_size`` equal segments and one
    uniform draw is made in each (Schaul et al., appendix B.2.1, as SB3 and cpprb do); all the
    prefix-sum queries run in one call without the GIL. Besides the ReplayBuffer keys it returns
    ``weights [B]`` float32, the importance-sampling weights (N * P(i))^-beta divided by the
    largest weight over the whole buffer, (N * min_k P(k))^-beta, read in O(1) from the min tree;
    and ``indices [B]`` int64 for ``update_priorities(indices, priorities)``. A stale index (its
    slot overwritten since sampling) updates the transition now in that slot.
    """
    cdef tree_t _tree
    cdef readonly double alpha
    cdef readonly double beta
    cdef readonly double eps
    cdef double _max_priority

    def __cinit__(self, *args, **kwargs):
        self._tree.block = NULL
        self._tree.data = NULL

    def __dealloc__(self):
        tree_free(&self._tree)

    def __init__(self, capacity, obs_dim=None, act_dim=1, alpha=0.6, beta=0.4, eps=1e-6, *,
                 obs_shape=None, obs_dtype=np.float32, seed=None):
        cdef intp_t cap = positive_int(capacity, "capacity")
        self.alpha = _nonneg(alpha, "alpha")
        self.beta = _unit(beta, "beta")
        self.eps = _nonneg(eps, "eps")
        self._setup(cap, obs_dim, act_dim, obs_shape, obs_dtype, seed)
        tree_free(&self._tree)
        if tree_alloc(&self._tree, cap) != 0:
            raise MemoryError(f"cannot allocate priority trees for {cap} transitions")
        self._max_priority = 1.0

    @property
    def max_priority(self):
        """The largest priority pushed or updated so far (the default for new transitions)."""
        return self._max_priority

    def set_beta(self, beta):
        """Set the importance-sampling exponent (annealed from beta0 toward 1.0)."""
        self.beta = _unit(beta, "beta")

    cdef double _leaf(self, double p) noexcept:
        return _priority_leaf(p, self.eps, self.alpha)

    cdef double _priority_arg(self, object priority) except -1.0:
        cdef double p
        if priority is None:
            return self._max_priority
        try:
            p = priority
        except TypeError:
            raise TypeError(f"priority must be a real number or None, got {priority!r}") from None
        if not isfinite(p) or p < 0.0:
            raise ValueError(f"priority must be finite and >= 0 (e.g. |TD error|), got {p}")
        return p

    def push(self, obs, action, reward, terminated, truncated, next_obs, priority=None):
        """Store one transition with ``priority`` (default: the largest seen so far)."""
        cdef double p = self._priority_arg(priority)
        cdef intp_t s = self._push_one(obs, action, reward, terminated, truncated, next_obs)
        tree_set(&self._tree, s, self._leaf(p))
        if p > self._max_priority:
            self._max_priority = p

    def push_batch(self, obs, actions, rewards, terminated, truncated, next_obs,
                   priorities=None):
        """Store N transitions; ``priorities [N]`` (default: the largest seen so far)."""
        self._check_ready()
        args = self._batch_args(obs, actions, rewards, terminated, truncated, next_obs)
        cdef intp_t n = args[2].shape[0], cap = self._ring.capacity
        if n == 0:
            return
        if priorities is None:
            pri = np.full(n, self._max_priority, dtype=np.float64)
        else:
            pri = np.ascontiguousarray(_priorities(priorities, n), dtype=np.float64)
        cdef intp_t pos0 = self._ring.pos, skip, first, m
        skip = self._push_rows(args)
        leaves = np.empty(n - skip, dtype=np.float64)          # rows written, in slot order
        cdef float64_t* lp = <float64_t*>cnp.PyArray_DATA(leaves)
        cdef const float64_t* pp = <const float64_t*>cnp.PyArray_DATA(pri)
        for m in range(n - skip):
            lp[m] = _priority_leaf(pp[skip + m], self.eps, self.alpha)
        first = (pos0 + skip) % cap
        m = n - skip if n - skip < cap - first else cap - first
        tree_set_range(&self._tree, first, lp, m)               # up to the end of the ring
        tree_set_range(&self._tree, 0, lp + m, n - skip - m)    # the wrapped rest, if any
        cdef double pmax = pri.max()
        if pmax > self._max_priority:
            self._max_priority = pmax

    def update_priorities(self, indices, priorities):
        """Set the priorities of the transitions at ``indices`` (finite, >= 0; e.g. |TD error|).

        Every index and priority is checked before any is applied; a repeated index keeps its
        last priority.
        """
        cdef cnp.ndarray idx = _indices(indices, self._ring.size, "update_priorities")
        cdef intp_t n = cnp.PyArray_DIM(idx, 0), k
        cdef cnp.ndarray pri = _priorities(priorities, n)
        cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
        cdef bint f32 = cnp.PyArray_TYPE(pri) == cnp.NPY_FLOAT
        cdef const float32_t* fp = <const float32_t*>cnp.PyArray_DATA(pri)
        cdef const float64_t* dp = <const float64_t*>cnp.PyArray_DATA(pri)
        cdef double a = self.alpha, e = self.eps, pmax = self._max_priority, p
        cdef float64_t leaves[256]
        cdef intp_t lo = 0, m
        while lo < n:                     # chunks: leaf values first, then one batched update
            m = n - lo if n - lo < 256 else 256
            tree_prefetch_paths(&self._tree, ip + lo, m)     # in flight while we compute
            for k in range(m):
                p = fp[lo + k] if f32 else dp[lo + k]
                leaves[k] = _priority_leaf(p, e, a)
                if p > pmax:
                    pmax = p
            tree_set_many(&self._tree, ip + lo, leaves, m)
            lo += m
        self._max_priority = pmax

    def priorities(self, indices=None):
        """Stored priorities (p + eps) ** alpha of ``indices`` (default: every live slot)."""
        if indices is None:
            indices = np.arange(self._ring.size)
        cdef cnp.ndarray idx = _indices(indices, self._ring.size, "priorities")
        cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
        cdef intp_t k, n = cnp.PyArray_DIM(idx, 0)
        out = np.empty(n, dtype=np.float64)
        cdef float64_t* o = <float64_t*>cnp.PyArray_DATA(out)
        for k in range(n):
            o[k] = tree_leaf(&self._tree, ip[k])
        return out

    def sample(self, batch_size, seed=None, beta=None):
        """``batch_size`` transitions by priority (stratified), with ``weights`` and ``indices``."""
        self._check_ready()
        cdef intp_t n = self._batch_size(batch_size), b
        cdef double bt = self.beta if beta is None else _unit(beta, "beta")
        cdef rng_t local
        cdef rng_t* rng = self._stream(seed, &local)
        cdef double total = tree_total(&self._tree), seg = total / n, mn = tree_min(&self._tree)
        if not total > 0.0:
            raise ValueError("every priority is 0 (eps=0): update some priorities above 0 first")
        cdef cnp.npy_intp dim = n
        cdef cnp.ndarray idx = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_INT64, 0)
        cdef cnp.ndarray w = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_FLOAT, 0)
        cdef int64_t* ip = <int64_t*>cnp.PyArray_DATA(idx)
        cdef float32_t* wp = <float32_t*>cnp.PyArray_DATA(w)
        cdef float64_t chunk[256]
        cdef float64_t* masses
        cdef cnp.ndarray m
        cdef intp_t lo = 0, c, n_blocks
        if n < PARALLEL_MIN_ROWS or _num_threads <= 1:
            while lo < n:                # stratified masses, then one batched search per chunk
                c = n - lo if n - lo < 256 else 256
                for b in range(c):
                    chunk[b] = (lo + b + rng_uniform(rng)) * seg
                tree_find_many(&self._tree, chunk, ip + lo, c)
                lo += c
        else:
            m = cnp.PyArray_EMPTY(1, &dim, cnp.NPY_DOUBLE, 0)
            masses = <float64_t*>cnp.PyArray_DATA(m)
            tree_stratified_masses(&self._tree, rng, masses, n)
            n_blocks = (n + 255) // 256
            with nogil:
                for b in prange(n_blocks, schedule="static", num_threads=_num_threads):
                    tree_find_many(&self._tree, masses + 256 * b, ip + 256 * b,
                                   256 if 256 * (b + 1) <= n else n - 256 * b)
        # w_i = (N P_i)^-beta / (N P_min)^-beta = (leaf_i / leaf_min)^-beta, in float32
        for b in range(n):
            wp[b] = _is_weight(tree_leaf(&self._tree, ip[b]) / mn, bt)
        out = self._gather_all(idx)
        out["weights"] = w
        return out

    def clear(self):
        """Forget every transition and priority (the running max priority restarts at 1)."""
        ReplayBuffer.clear(self)
        tree_clear(&self._tree)
        self._max_priority = 1.0

    def _state(self):
        meta, arrays = ReplayBuffer._state(self)
        meta.update(alpha=self.alpha, beta=self.beta, eps=self.eps,
                    max_priority=self._max_priority)
        arrays["priority_leaves"] = self.priorities()
        return meta, arrays

    def _restore(self, dict meta, dict arrays):
        ReplayBuffer._restore(self, meta, arrays)
        leaves = np.ascontiguousarray(arrays["priority_leaves"], dtype=np.float64)
        if leaves.shape != (self._ring.size,):
            raise ValueError(f"saved priority_leaves has shape {leaves.shape}, expected "
                             f"({self._ring.size},)")
        cdef const float64_t[::1] lv = leaves
        cdef intp_t k
        tree_clear(&self._tree)
        for k in range(lv.shape[0]):
            tree_set(&self._tree, k, lv[k])
        self._max_priority = meta["max_priority"]

    @classmethod
    def _from_meta(cls, dict meta):
        return cls(meta["capacity"], act_dim=meta["act_dim"], alpha=meta["alpha"],
                   beta=meta["beta"], eps=meta["eps"], obs_shape=tuple(meta["obs_shape"]),
                   obs_dtype=meta["obs_dtype"], seed=int(meta["seed"]))


cdef inline double _priority_leaf(double p, double eps, double alpha) noexcept nogil:
    """The stored tree leaf (p + eps) ** alpha: exact for alpha 0, 0.5 and 1; otherwise powf,
    single precision (relative error below 1e-6, as in float32 trees; sums stay in double)
    at about half the cost of double pow, with double pow outside float's comfortable range."""
    cdef double x = p + eps
    if alpha == 1.0:
        return x
    if alpha == 0.5:
        return sqrt(x)
    if alpha == 0.0:
        return 1.0
    if 1e-30 < x < 1e30:
        return powf(<float>x, <float>alpha)
    return pow(x, alpha)


cdef inline float32_t _is_weight(double ratio, double beta) noexcept nogil:
    """ratio ** -beta for ratio = leaf / min leaf >= 1, in float32 (the weights' dtype)."""
    if beta == 0.0:
        return 1.0
    if beta == 1.0:
        return <float32_t>(1.0 / ratio)
    if ratio < 1e30:
        return powf(<float>ratio, <float>-beta)
    return <float32_t>pow(ratio, -beta)


cdef double _nonneg(object x, str name) except -1.0:
    cdef double v = float(x)
    if not isfinite(v) or v < 0.0:
        raise ValueError(f"{name} must be a finite number >= 0, got {x!r}")
    return v


cdef double _unit(object x, str name) except -1.0:
    cdef double v = float(x)
    if not isfinite(v) or v < 0.0 or v > 1.0:
        raise ValueError(f"{name} must be a number in [0, 1], got {x!r}")
    return v


cdef cnp.ndarray _priorities(object priorities, intp_t n):
    """priorities -> a C-contiguous 1-D float64 or float32 array of n finite values >= 0 (the
    array itself when it already is one: TD errors from torch are usually float32)."""
    cdef cnp.ndarray pri
    if is_native_vec(priorities, cnp.NPY_DOUBLE, -1) or is_native_vec(priorities, cnp.NPY_FLOAT, -1):
        pri = <cnp.ndarray>priorities
    else:
        pri = np.ascontiguousarray(_real_arr(priorities, "priorities").reshape(-1),
                                   dtype=np.float64)
    if cnp.PyArray_DIM(pri, 0) != n:
        raise ValueError(f"got {cnp.PyArray_DIM(pri, 0)} priorities for {n} transitions")
    cdef bint f32 = cnp.PyArray_TYPE(pri) == cnp.NPY_FLOAT
    cdef const float32_t* fp = <const float32_t*>cnp.PyArray_DATA(pri)
    cdef const float64_t* dp = <const float64_t*>cnp.PyArray_DATA(pri)
    cdef double v
    cdef intp_t k
    for k in range(n):
        v = fp[k] if f32 else dp[k]
        if not (v >= 0.0 and v < INFINITY):          # false for NaN too
            raise ValueError(f"priorities must be finite and >= 0 (e.g. |TD error|), got "
                             f"{v} at position {k}")
    return pri


# ============================================================================ memory-mapped spill
cdef struct mmap_header_t:
    char magic[8]            # MMAP_MAGIC
    uint32_t version         # MMAP_FORMAT_VERSION
    uint32_t meta_len        # bytes of JSON metadata at MMAP_META_OFFSET
    uint64_t cold_pos        # next cold slot written
    uint64_t cold_size       # live cold slots
    uint64_t hot_pos         # hot ring position at the last flush
    uint64_t hot_size        # hot transitions saved at the last flush
    uint64_t clean           # 1: the hot snapshot is current (flushed, nothing pushed since)
    uint64_t n_pushed        # transitions pushed over the file's life


def _mmap_layout(intp_t row_bytes, intp_t hot_cap, intp_t cold_cap):
    """Byte offsets of the cold ring and the hot snapshot in the file (rows laid out as in
    memory, each section 4 KiB aligned), and the file size."""
    cold = MMAP_HEADER_BYTES
    hot = cold + (cold_cap * row_bytes + 4095) // 4096 * 4096
    size = hot + (hot_cap * row_bytes + 4095) // 4096 * 4096
    return {"row_bytes": int(row_bytes), "cold": int(cold), "hot": int(hot)}, int(size)


cdef class MmapReplayBuffer(ReplayBuffer):
    """A replay buffer whose newest ``hot_capacity`` transitions live in memory and whose older
    ones (up to ``total_capacity`` in all) are spilled to a memory-mapped file.

    ``MmapReplayBuffer(hot_capacity, total_capacity, obs_dim, act_dim=1, cold_path, *,
    obs_shape=None, obs_dtype=np.float32, seed=None, resume=False)``. The push / push_batch /
    sample API is ReplayBuffer's, over all live transitions (``indices`` count the hot ones
    first, then the cold ones). When the hot ring is full each push moves its oldest transition
    to the cold ring in the file, which in turn overwrites its own oldest at capacity.

    The file starts with a 4 KiB header (magic, format version, JSON metadata with shapes,
    dtypes and capacities, and the live counts), then the cold ring and a snapshot area for the
    hot ring. ``flush()`` (also called by ``close()`` and on leaving a ``with`` block) writes
    the hot ring to the snapshot and syncs the file; ``MmapReplayBuffer.open(path)`` or
    ``resume=True`` brings the buffer back in another process. A file written since its last
    flush reopens with its cold transitions only (with a warning). Opening a file that is not
    such a buffer, has another format version, is truncated, or (with ``resume=True``) holds
    other shapes or capacities raises ValueError. ``save``/``load`` do not apply: the file is
    the saved form. For Atari-scale observations use ``obs_dim=84*84*4, obs_dtype=np.uint8``.
    """
    cdef object _map
    cdef mmap_header_t* _hdr
    cdef readonly object cold_path
    cdef readonly intp_t hot_capacity
    cdef readonly intp_t total_capacity
    cdef intp_t _cold_cap
    cdef object _layout

    def __init__(self, hot_capacity, total_capacity, obs_dim=None, act_dim=1, cold_path=None,
                 *, obs_shape=None, obs_dtype=np.float32, seed=None, resume=False):
        cdef intp_t hot = positive_int(hot_capacity, "hot_capacity")
        cdef intp_t total = positive_int(total_capacity, "total_capacity")
        if total < hot:
            raise ValueError(f"total_capacity ({total}) must be >= hot_capacity ({hot})")
        if cold_path is None:
            raise TypeError("MmapReplayBuffer needs cold_path, the file that holds spilled "
                            "transitions")
        self._spills = True
        self._setup(hot, obs_dim, act_dim, obs_shape, obs_dtype, seed)
        self.hot_capacity = hot
        self.total_capacity = total
        self._cold_cap = total - hot
        self.cold_path = str(cold_path)
        self._layout, size = _mmap_layout(self._ring.row_bytes, hot, self._cold_cap)
        if resume and os.path.exists(self.cold_path):
            self._open_existing(expect=True)
        else:
            self._create(size)

    @classmethod
    def open(cls, cold_path, *, seed=None):
        """Reopen a buffer from its file, with the shapes and capacities stored in it."""
        meta = _mmap_read_meta(str(cold_path))
        return cls(meta["hot_capacity"], meta["total_capacity"], act_dim=meta["act_dim"],
                   cold_path=cold_path, obs_shape=tuple(meta["obs_shape"]),
                   obs_dtype=meta["obs_dtype"], seed=seed, resume=True)

    def _meta(self):
        return {"format": "rlox-mmap-replay", "obs_shape": list(self.obs_shape),
                "obs_dtype": str(self.obs_dtype), "act_dim": int(self.act_dim),
                "hot_capacity": int(self.hot_capacity),
                "total_capacity": int(self.total_capacity), "layout": self._layout}

    def _create(self, size):
        path = self.cold_path
        try:
            with open(path, "wb") as f:
                f.truncate(size)          # sparse: pages cost disk only once written
        except OSError as e:
            raise OSError(e.errno, f"MmapReplayBuffer cannot create its cold file {path!r}: "
                                   f"{e.strerror}") from e
        self._map_file(size)
        meta = json.dumps(self._meta()).encode()
        if MMAP_META_OFFSET + len(meta) > MMAP_HEADER_BYTES:
            raise ValueError("observation shape too long to describe in the file header")
        self._map[MMAP_META_OFFSET:MMAP_META_OFFSET + len(meta)] = np.frombuffer(meta, np.uint8)
        cdef bytes magic = MMAP_MAGIC
        memcpy(self._hdr.magic, <const char*>magic, 8)
        self._hdr.version = MMAP_FORMAT_VERSION
        self._hdr.meta_len = len(meta)
        self._hdr.cold_pos = 0
        self._hdr.cold_size = 0
        self._hdr.hot_pos = 0
        self._hdr.hot_size = 0
        self._hdr.clean = 1
        self._hdr.n_pushed = 0

    def _map_file(self, size):
        try:
            self._map = np.memmap(self.cold_path, dtype=np.uint8, mode="r+", shape=(size,))
        except (OSError, ValueError) as e:
            raise OSError(f"MmapReplayBuffer cannot map {self.cold_path!r}: {e}") from e
        cdef char* base = <char*>cnp.PyArray_DATA(self._map)
        self._hdr = <mmap_header_t*>base
        self._cold = self._ring                 # same row layout
        self._cold.data = base + <intp_t>self._layout["cold"]
        self._cold.capacity = self._cold_cap
        self._cold.pos = 0
        self._cold.size = 0

    cdef ring_t _snapshot(self):
        """The hot-snapshot area of the file as a ring."""
        cdef char* base = <char*>cnp.PyArray_DATA(self._map)
        cdef ring_t s = self._ring
        s.data = base + <intp_t>self._layout["hot"]
        s.pos = 0
        s.size = 0
        return s

    def _open_existing(self, expect):
        meta = _mmap_read_meta(self.cold_path)
        mine = self._meta()
        diffs = [f"{k}: file has {meta.get(k)!r}, requested {mine[k]!r}"
                 for k in ("obs_shape", "obs_dtype", "act_dim", "hot_capacity",
                           "total_capacity", "layout") if meta.get(k) != mine[k]]
        if diffs:
            raise ValueError(f"{self.cold_path} holds an incompatible replay buffer ("
                             + "; ".join(diffs) + ")")
        _, size = _mmap_layout(self._ring.row_bytes, self.hot_capacity, self._cold_cap)
        if os.path.getsize(self.cold_path) < size:
            raise ValueError(f"{self.cold_path} is truncated: {os.path.getsize(self.cold_path)} "
                             f"bytes, expected {size}")
        self._map_file(size)
        cdef mmap_header_t* h = self._hdr
        if h.cold_size > <uint64_t>self._cold_cap or h.hot_size > <uint64_t>self.hot_capacity \
                or (self._cold_cap and h.cold_pos >= <uint64_t>self._cold_cap) \
                or h.hot_pos >= <uint64_t>self.hot_capacity:
            raise ValueError(f"{self.cold_path} has inconsistent counts in its header")
        self._cold.pos = h.cold_pos
        self._cold.size = h.cold_size
        cdef ring_t snap
        if h.clean:
            snap = self._snapshot()
            if h.hot_size:
                _move_rows(&self._ring, 0, &snap, 0, h.hot_size)
            self._ring.pos = h.hot_pos
            self._ring.size = h.hot_size
        else:
            warnings.warn(f"{self.cold_path} was written after its last flush(): the "
                          f"{int(h.hot_size)} in-memory transitions of that run are lost; "
                          f"reopening with the {int(h.cold_size)} spilled ones",
                          _rlox_warning(), stacklevel=3)

    cdef int _check_open(self) except -1:
        if self._map is None:
            raise ValueError(f"MmapReplayBuffer at {self.cold_path!r} is closed")
        return 0

    cdef void _dirty(self) noexcept:
        if self._hdr.clean:
            self._hdr.clean = 0

    cdef int _evict(self, intp_t first, intp_t n) except -1:
        """Hot slots first .. first+n-1 (the oldest, in age order) -> the cold ring."""
        cdef ring_t* c = &self._cold
        cdef intp_t done = 0, chunk
        if c.capacity == 0:
            return 0
        if n > c.capacity:             # only the newest cold_capacity of them survive
            done = n - c.capacity
            c.pos = (c.pos + done) % c.capacity
            c.size = c.capacity
        while done < n:
            chunk = n - done
            if chunk > c.capacity - c.pos:
                chunk = c.capacity - c.pos
            _move_rows(c, c.pos, &self._ring, first + done, chunk)
            c.pos = (c.pos + chunk) % c.capacity
            c.size = c.size + chunk if c.size + chunk < c.capacity else c.capacity
            done += chunk
        self._hdr.cold_pos = c.pos
        self._hdr.cold_size = c.size
        return 0

    cdef intp_t _store_one(self, const char* obs, const char* nobs, const float32_t* act,
                           float32_t rew, float32_t te, float32_t tr) except -1:
        self._check_open()
        self._dirty()
        self._hdr.n_pushed += 1
        return ReplayBuffer._store_one(self, obs, nobs, act, rew, te, tr)

    cdef intp_t _store_rows(self, const char* obs, const char* nobs, const float32_t* act,
                            const float32_t* rew, const float32_t* te, const float32_t* tr,
                            intp_t n) except -1:
        self._check_open()
        self._dirty()
        self._hdr.n_pushed += n
        return ReplayBuffer._store_rows(self, obs, nobs, act, rew, te, tr, n)

    @property
    def capacity(self):
        """Most transitions held at once (``total_capacity``)."""
        return self.total_capacity

    def __len__(self):
        return self._ring.size + self._cold.size

    @property
    def n_spilled(self):
        """Transitions currently in the cold file."""
        return self._cold.size

    def sample(self, batch_size, seed=None):
        """``batch_size`` transitions drawn uniformly over the hot and cold parts."""
        self._check_open()
        return ReplayBuffer.sample(self, batch_size, seed)

    def gather(self, indices, fields=None):
        self._check_open()
        return ReplayBuffer.gather(self, indices, fields)

    def clear(self):
        """Forget every transition, in memory and in the file."""
        self._check_open()
        ReplayBuffer.clear(self)
        self._cold.pos = 0
        self._cold.size = 0
        self._hdr.cold_pos = 0
        self._hdr.cold_size = 0
        self._dirty()

    def flush(self):
        """Write the hot ring to the file's snapshot area and sync the file to disk."""
        self._check_open()
        cdef ring_t snap = self._snapshot()
        if self._ring.size:
            _move_rows(&snap, 0, &self._ring, 0, self._ring.size)
        self._hdr.hot_pos = self._ring.pos
        self._hdr.hot_size = self._ring.size
        self._hdr.clean = 1
        self._map.flush()

    def close(self):
        """flush(), then unmap the file; the buffer cannot be used afterwards."""
        if self._map is None:
            return
        self.flush()
        self._hdr = NULL
        memset(&self._cold, 0, sizeof(ring_t))
        self._ring.capacity = 0
        self._map = None

    @property
    def closed(self):
        return self._map is None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def save(self, path):
        """Not applicable: the cold file is the saved form (``flush()``, then ``open``)."""
        raise TypeError("MmapReplayBuffer persists itself: call flush() (or close()) and reopen "
                        "with rlox.MmapReplayBuffer.open(cold_path)")

    @classmethod
    def load(cls, path):
        """Not applicable: use ``MmapReplayBuffer.open(cold_path)``."""
        raise TypeError("MmapReplayBuffer persists itself: reopen it with "
                        "rlox.MmapReplayBuffer.open(cold_path)")


def _rlox_warning():
    from rlox.errors import RloxWarning
    return RloxWarning


def _mmap_read_meta(str path):
    """Check the header of a cold file and return its JSON metadata."""
    try:
        with open(path, "rb") as f:
            head = f.read(MMAP_HEADER_BYTES)
    except OSError as e:
        raise OSError(e.errno, f"cannot open the replay file {path!r}: {e.strerror}") from e
    if len(head) < MMAP_HEADER_BYTES or head[:8] != MMAP_MAGIC:
        raise ValueError(f"{path!r} is not an rlox MmapReplayBuffer file (bad or missing header)")
    version = int.from_bytes(head[8:12], "little")
    meta_len = int.from_bytes(head[12:16], "little")
    if version != MMAP_FORMAT_VERSION:
        raise ValueError(f"{path!r} has format version {version}; this rlox reads version "
                         f"{MMAP_FORMAT_VERSION}")
    if not 0 < meta_len <= MMAP_HEADER_BYTES - MMAP_META_OFFSET:
        raise ValueError(f"{path!r} has a corrupt header (metadata length {meta_len})")
    try:
        meta = json.loads(head[MMAP_META_OFFSET:MMAP_META_OFFSET + meta_len].decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path!r} has a corrupt header: {e}") from e
    if meta.get("format") != "rlox-mmap-replay":
        raise ValueError(f"{path!r} is not an rlox MmapReplayBuffer file")
    return meta


# ============================================================================ ExperienceTable
cdef class ExperienceTable:
    """Append-only columnar table of transitions for on-policy data.

    ``ExperienceTable(obs_dim, act_dim=1)``; ``push(obs, action, reward, terminated,
    truncated=False)`` appends a row, ``push_batch(obs, actions, rewards, terminated,
    truncated=None)`` appends N rows; ``observations()`` ``[N, obs_dim]``, ``actions()``
    ``[N, act_dim]``, ``rewards()``, ``terminated()``, ``truncated()`` ``[N]`` (all float32)
    return read-only views of the rows so far, which later pushes never change (storage grows
    by doubling into new arrays, and ``clear()`` starts new ones). ``columns()`` gives all five.
    """
    cdef readonly intp_t obs_dim
    cdef readonly intp_t act_dim
    cdef intp_t _n
    cdef intp_t _cap
    cdef object _obs, _act, _rew, _term, _trunc
    cdef float32_t* _po
    cdef float32_t* _pa
    cdef float32_t* _pr
    cdef float32_t* _pt
    cdef float32_t* _pu

    def __init__(self, obs_dim, act_dim=1):
        self.obs_dim = positive_int(obs_dim, "obs_dim")
        self.act_dim = positive_int(act_dim, "act_dim")
        self._n = 0
        self._alloc(1024)

    cdef _alloc(self, intp_t cap):
        cdef intp_t n = self._n
        obs = np.empty((cap, self.obs_dim), dtype=np.float32)
        act = np.empty((cap, self.act_dim), dtype=np.float32)
        rew = np.empty(cap, dtype=np.float32)
        term = np.empty(cap, dtype=np.float32)
        trunc = np.empty(cap, dtype=np.float32)
        if n:
            obs[:n] = self._obs[:n]
            act[:n] = self._act[:n]
            rew[:n] = self._rew[:n]
            term[:n] = self._term[:n]
            trunc[:n] = self._trunc[:n]
        self._obs, self._act, self._rew, self._term, self._trunc = obs, act, rew, term, trunc
        self._po = <float32_t*>cnp.PyArray_DATA(obs)
        self._pa = <float32_t*>cnp.PyArray_DATA(act)
        self._pr = <float32_t*>cnp.PyArray_DATA(rew)
        self._pt = <float32_t*>cnp.PyArray_DATA(term)
        self._pu = <float32_t*>cnp.PyArray_DATA(trunc)
        self._cap = cap

    cdef int _reserve(self, intp_t extra) except -1:
        cdef intp_t cap = self._cap
        if self._n + extra <= cap:
            return 0
        while cap < self._n + extra:
            cap *= 2
        self._alloc(cap)
        return 0

    def __len__(self):
        return self._n

    def push(self, obs, action, reward, terminated, truncated=False):
        """Append one row: obs ``(obs_dim,)``, action ``(act_dim,)`` or a number."""
        o = obs if is_native_vec(obs, cnp.NPY_FLOAT, self.obs_dim) else _row(obs, "obs", self.obs_dim)
        cdef float32_t a1
        cdef const float32_t* ap
        if self.act_dim == 1 and (type(action) is float or type(action) is int):
            a1 = <float32_t>(<double>action)
            ap = &a1
        else:
            a = (action if is_native_vec(action, cnp.NPY_FLOAT, self.act_dim)
                 else _row(action, "action", self.act_dim))
            ap = <const float32_t*>cnp.PyArray_DATA(a)
        cdef double r = _reward(reward)
        self._reserve(1)
        cdef intp_t n = self._n, k
        memcpy(self._po + n * self.obs_dim, cnp.PyArray_DATA(o), self.obs_dim * sizeof(float32_t))
        for k in range(self.act_dim):
            self._pa[n * self.act_dim + k] = ap[k]
        self._pr[n] = <float32_t>r
        self._pt[n] = 1.0 if terminated else 0.0
        self._pu[n] = 1.0 if truncated else 0.0
        self._n = n + 1

    def push_batch(self, obs, actions, rewards, terminated, truncated=None):
        """Append N rows: obs ``[N, obs_dim]`` (or flat), actions ``[N, act_dim]``, rest ``[N]``."""
        rew = np.ascontiguousarray(_real_arr(rewards, "rewards").reshape(-1), dtype=np.float32)
        cdef intp_t n = rew.shape[0]
        if n and not np.isfinite(rew).all():
            raise ValueError("rewards must be finite")
        o = _real_arr(obs, "obs")
        if o.size != n * self.obs_dim or not (o.ndim == 1 or o.shape == (n, self.obs_dim)):
            raise ValueError(f"obs has shape {o.shape}, expected ({n}, {self.obs_dim})")
        a = _real_arr(actions, "actions")
        if a.size != n * self.act_dim or not (a.ndim == 1 or a.shape == (n, self.act_dim)):
            raise ValueError(f"actions has shape {a.shape}, expected ({n}, {self.act_dim})")
        te = _flags(terminated, "terminated", n)
        tr = np.zeros(n, dtype=np.float32) if truncated is None else _flags(truncated, "truncated", n)
        self._reserve(n)
        cdef intp_t s = self._n
        self._obs[s:s + n] = o.reshape(n, self.obs_dim)
        self._act[s:s + n] = a.reshape(n, self.act_dim)
        self._rew[s:s + n] = rew
        self._term[s:s + n] = te
        self._trunc[s:s + n] = tr
        self._n = s + n

    cdef object _view(self, object arr):
        v = arr[:self._n]
        v.flags.writeable = False
        return v

    def observations(self):
        return self._view(self._obs)

    def actions(self):
        return self._view(self._act)

    def rewards(self):
        return self._view(self._rew)

    def terminated(self):
        return self._view(self._term)

    def truncated(self):
        return self._view(self._trunc)

    def columns(self):
        """All columns as a dict of read-only arrays."""
        return {"obs": self.observations(), "actions": self.actions(), "rewards": self.rewards(),
                "terminated": self.terminated(), "truncated": self.truncated()}

    def clear(self):
        """Drop every row (views handed out before keep their data)."""
        self._n = 0
        self._alloc(self._cap)

    def __repr__(self):
        return f"ExperienceTable(obs_dim={self.obs_dim}, act_dim={self.act_dim}, len={self._n})"


cdef object _row(object x, str name, intp_t size):
    arr = _real_arr(x, name)
    if arr.size != size or arr.ndim > 1:
        raise ValueError(f"{name} has shape {arr.shape}, expected ({size},)")
    return np.ascontiguousarray(arr.reshape(-1), dtype=np.float32)


# ============================================================================ n-step returns
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
    if isinstance(source, MmapReplayBuffer):
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
