# The contract of the replay-buffer kernels: the ring layout and the ReplayBuffer base class
# that ext/per.pyx (PrioritizedReplayBuffer), ext/mmap_buffer.pyx (MmapReplayBuffer) and
# ext/nstep.pyx (compute_nstep_targets) build on, as scikit-learn's _tree.pxd does for its trees.
# ext/buffers.pyx implements it; ext/experience_table.pyx shares its argument checks.
#
# This file sits beside the compiled module (rlox/_ext/buffers.*.so) rather than in ext/:
# Cython imports a cimported class's type from the module its .pxd names, and only a .pxd at
# rlox/_ext/buffers.pxd is named ``rlox._ext.buffers`` (ext/ is not a Python package).
#
# Ring layout: one row per slot, row-major: [obs | next_obs | pad to 4 | actions (act_dim
# float32) | reward | terminated | truncated], padded to 16, 32 or 64 bytes when that small (so
# a sampled row of a low-dimensional env is one cache line; the base is 64-byte aligned) and to
# 16 bytes otherwise. Sampling from a large buffer costs one cache miss per row instead of one
# per field. Slot s holds the (k * capacity + s)-th push; until the ring is full the live slots
# are 0 .. size - 1, then all of them, and ``pos`` is the next slot written (so the newest
# transition is pos - 1 and, once full, the oldest is pos).
from libc.math cimport isfinite
from libc.string cimport memcpy
from _types cimport float32_t, intp_t, int64_t, uint64_t
from _checks cimport is_native_vec, as_array, check_real, real_array
from _rng cimport rng_t
cimport numpy as cnp

cdef enum:
    # Gathers that move fewer bytes than this run serially (a fork/join costs microseconds).
    PARALLEL_MIN_BYTES = 4194304
    # Batched tree queries and n-step walks below this many rows run serially.
    PARALLEL_MIN_ROWS = 4096
    MAX_OBS_NDIM = 8


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


cdef inline void _move_rows(ring_t* dst, intp_t d, const ring_t* src, intp_t s,
                            intp_t n) noexcept nogil:
    """Slots s .. s+n-1 of src -> slots d .. d+n-1 of dst (same row layout, no wrap)."""
    memcpy(dst.data + d * dst.row_bytes, src.data + s * src.row_bytes, n * src.row_bytes)


cdef class ReplayBuffer:
    cdef ring_t _ring            # the in-memory ring
    cdef ring_t _cold            # empty here; MmapReplayBuffer's spilled part
    cdef rng_t _rng              # the buffer's own xoshiro256** stream
    cdef object _seed            # the seed it started from (saved with the buffer)
    cdef readonly tuple obs_shape
    cdef readonly object obs_dtype
    cdef readonly intp_t obs_dim
    cdef readonly intp_t act_dim
    cdef int _obs_typenum        # NumPy type number of obs_dtype
    cdef int _obs_ndim           # len(obs_shape)
    cdef intp_t _obs_dims[MAX_OBS_NDIM]
    cdef bint _spills            # overflowing rows must reach the cold ring (none skipped)
    cdef object _rows            # uint8 [capacity, row_bytes], the ring's memory

    cdef _setup(self, intp_t capacity, obs_dim, act_dim, obs_shape, obs_dtype, seed)
    cdef intp_t _live(self) noexcept
    cdef int _check_ready(self) except -1
    # argument conversion: the value itself when it is already a ready row, else a checked copy
    cdef object _obs_arg(self, object x, str name)
    cdef bint _shape_ok(self, cnp.ndarray a) noexcept
    cdef object _convert_obs(self, object x, str name)
    cdef object _action_arg(self, object x)
    cdef object _obs_batch(self, object x, str name, intp_t n)
    cdef object _action_batch(self, object x, intp_t n)
    # writing; subclasses hook _evict (rows about to be overwritten) and the two stores
    cdef intp_t _push_one(self, obs, action, reward, terminated, truncated, next_obs) except -1
    cdef intp_t _store_one(self, const char* obs, const char* nobs, const float32_t* act,
                           float32_t rew, float32_t te, float32_t tr) except -1
    cdef int _evict(self, intp_t first, intp_t n) except -1
    cdef intp_t _store_rows(self, const char* obs, const char* nobs, const float32_t* act,
                            const float32_t* rew, const float32_t* te, const float32_t* tr,
                            intp_t n) except -1
    cdef tuple _batch_args(self, obs, actions, rewards, terminated, truncated, next_obs)
    cdef intp_t _push_rows(self, tuple args) except -1
    # reading
    cdef dict _gather_dict(self, cnp.ndarray idx, tuple fields=*)
    cdef dict _gather_all(self, cnp.ndarray idx)
    cdef intp_t _batch_size(self, object batch_size) except -1
    cdef rng_t* _stream(self, object seed, rng_t* local) except NULL


# ---------------------------------------------------------------- argument checks (shared)
cdef inline object _real_arr(object x, str name):
    """np.asarray(x) when it holds real numbers (no conversion yet), else TypeError."""
    return check_real(as_array(x, name), name)


cdef inline object _flags(object x, str name, intp_t n):
    """terminated / truncated of a batch -> float32 [n] of 0.0 / 1.0."""
    arr = _real_arr(x, name).reshape(-1)
    if arr.shape[0] != n:
        raise ValueError(f"{name} has {arr.shape[0]} entries, expected {n} (one per transition)")
    return real_array(arr != 0, name, cnp.NPY_FLOAT)


cdef inline double _reward_slow(object x) except? -1.0:
    try:
        return float(x)
    except (TypeError, ValueError):
        raise TypeError(f"reward must be a real number, got {x!r} ({type(x).__name__})") from None


cdef inline double _reward(object x) except? -1.0:
    cdef double r = (<double>x) if type(x) is float else _reward_slow(x)
    if not isfinite(r):
        raise ValueError(f"reward must be finite, got {r}")
    return r


cdef inline cnp.ndarray _indices(object indices, intp_t n_live, str what):
    """indices -> int64 C-contiguous 1-D (the array itself when it already is one), each in
    [0, n_live); checked in one C loop."""
    cdef cnp.ndarray idx
    if is_native_vec(indices, cnp.NPY_INT64, -1):
        idx = <cnp.ndarray>indices
    else:
        arr = as_array(indices, "indices")
        if arr.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {arr.dtype}")
        idx = cnp.PyArray_FROM_OTF(arr.reshape(-1), cnp.NPY_INT64,
                                   cnp.NPY_ARRAY_IN_ARRAY | cnp.NPY_ARRAY_FORCECAST)
    cdef const int64_t* p = <const int64_t*>cnp.PyArray_DATA(idx)
    cdef intp_t k, n = cnp.PyArray_DIM(idx, 0)
    for k in range(n):
        if <uint64_t>p[k] >= <uint64_t>n_live:       # negative values wrap to huge
            raise IndexError(f"{what}: index {p[k]} out of range for a buffer holding {n_live} "
                             f"transitions (valid: 0 .. {n_live - 1})")
    return idx
