# Proportional prioritized replay (PrioritizedReplayBuffer): the ReplayBuffer ring of
# rlox/_ext/buffers.pxd plus a sum tree and a min tree over the priorities (ext/trees.pxd).
from cython.parallel cimport prange
from libc.math cimport isfinite, pow, powf, sqrt, INFINITY
from _types cimport float32_t, float64_t, int64_t, intp_t
from _checks cimport is_native_vec, positive_int
from _rng cimport rng_t, rng_uniform
from trees cimport (tree_t, tree_alloc, tree_free, tree_clear, tree_set, tree_set_many,
                    tree_set_range, tree_leaf, tree_total, tree_min, tree_find_many,
                    tree_prefetch_paths, tree_stratified_masses)
from rlox._ext.buffers cimport (ReplayBuffer, PARALLEL_MIN_ROWS, _indices, _real_arr)
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"


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
