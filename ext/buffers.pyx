# Replay storage, the ring core: ReplayBuffer (uniform sampling, save / load as .npz or a
# directory of .npy files) and the row kernels every replay buffer shares. The contract, the
# ring layout and the ReplayBuffer base class, is rlox/_ext/buffers.pxd; built on it:
#   ext/per.pyx            PrioritizedReplayBuffer (sum / min trees of trees.pxd)
#   ext/mmap_buffer.pyx    MmapReplayBuffer (older transitions spilled to a memory-mapped file)
#   ext/nstep.pyx          compute_nstep_targets (n-step returns walked along the ring)
#   ext/experience_table.pyx  ExperienceTable (append-only columns for on-policy data)
#
# Hot paths: ``push`` checks its arguments with a few C comparisons when they are already NumPy
# arrays of the stored dtype and size (converting anything else once, with a clear error), then
# memcpy's; ``sample`` draws its indices from the buffer's own xoshiro256** stream (or a stream
# seeded from ``seed``) and gathers rows without Python objects. Rewards, actions and the
# terminated/truncated flags are stored as float32.
from cython.parallel cimport prange
from libc.string cimport memcpy, memset
from _types cimport float32_t, int64_t, intp_t, uint64_t
from _checks cimport is_native_vec, positive_int
from _rng cimport rng_t, rng_seed, rng_below
import json
import os
from pathlib import Path

import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

SAVE_FORMAT_VERSION = 1         # ReplayBuffer.save / load

_FIELDS = ("obs", "next_obs", "actions", "rewards", "terminated", "truncated")

# The classes that moved to their own modules stay importable from here.
_MOVED = {"PrioritizedReplayBuffer": "per", "MmapReplayBuffer": "mmap_buffer",
          "ExperienceTable": "experience_table", "compute_nstep_targets": "nstep"}


def __getattr__(name):
    if name in _MOVED:
        import importlib
        return getattr(importlib.import_module(f"rlox._ext.{_MOVED[name]}"), name)
    raise AttributeError(f"module 'rlox._ext.buffers' has no attribute {name!r}")


# ============================================================================ ring storage
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
