# SumMinTree: the sum tree and min tree of ext/trees.pxd as a Python object, with batched
# updates and batched prefix-sum queries that run without the GIL. PrioritizedReplayBuffer
# (ext/per.pyx) embeds the same inline functions; this class exposes them for direct use and
# for the tests, which check it against a brute-force oracle.
from cython.parallel cimport prange
from libc.math cimport isfinite, INFINITY
from _types cimport float64_t, int64_t, intp_t, uint64_t
from _rng cimport rng_t, rng_seed
from _checks cimport as_array, check_real, positive_int, real_array
from trees cimport (tree_t, tree_alloc, tree_free, tree_clear, tree_unset, tree_set_many,
                    tree_leaf, tree_total, tree_min, tree_find_many, tree_stratified_masses)
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

# Below this many queries a batched find runs serially (a fork/join costs microseconds).
cdef enum:
    PARALLEL_MIN_QUERIES = 4096


cdef void _find_many(const tree_t* t, const float64_t* masses, int64_t* out, intp_t n,
                     int n_threads) noexcept nogil:
    """IN masses [n]; OUT out [n]. Queries are independent, so prange splits them in blocks."""
    cdef intp_t b, n_blocks = (n + 255) // 256
    if n_threads <= 1 or n < PARALLEL_MIN_QUERIES:
        tree_find_many(t, masses, out, n)
    else:
        for b in prange(n_blocks, nogil=True, schedule="static", num_threads=n_threads):
            tree_find_many(t, masses + 256 * b, out + 256 * b,
                           256 if 256 * (b + 1) <= n else n - 256 * b)


cdef class SumMinTree:
    """A sum tree and a min tree over ``capacity`` non-negative leaves.

    ``update(indices, values)`` sets leaves (a repeated index keeps its last value);
    ``total()`` is the sum of the leaves and ``min()`` the smallest leaf set so far, both O(1);
    ``find(masses)`` returns, for each mass m in [0, total), the leaf i whose prefix interval
    [prefix(i), prefix(i) + leaf(i)) holds m: sampling masses uniformly in [0, total) samples
    leaves with probability leaf / total. Leaves never set (or ``reset``) are empty: they count
    0 in the sum, are ignored by ``min`` and are never found.

    >>> t = SumMinTree(4); t.update([0, 1, 2, 3], [1.0, 2.0, 3.0, 4.0])
    >>> t.total(), t.min(), t.find([0.5, 1.0, 9.99]).tolist()
    (10.0, 1.0, [0, 1, 3])
    """
    cdef tree_t _tree

    def __cinit__(self, capacity):
        self._tree.block = NULL
        self._tree.data = NULL
        if tree_alloc(&self._tree, positive_int(capacity, "capacity")) != 0:
            raise MemoryError(f"cannot allocate a tree of {capacity} leaves")

    def __dealloc__(self):
        tree_free(&self._tree)

    @property
    def capacity(self):
        """Number of leaves."""
        return self._tree.capacity

    def __len__(self):
        return self._tree.capacity

    cdef cnp.ndarray _indices(self, indices):
        idx = as_array(indices, "indices")
        if idx.dtype.kind not in "iu":
            raise TypeError(f"indices must be integers, got dtype {idx.dtype}")
        idx = real_array(idx.reshape(-1), "indices", cnp.NPY_INT64)
        if idx.size and (idx.min() < 0 or idx.max() >= self._tree.capacity):
            bad = idx[(idx < 0) | (idx >= self._tree.capacity)][0]
            raise IndexError(f"index {bad} out of range for a tree of capacity "
                             f"{self._tree.capacity}")
        return idx

    def update(self, indices, values):
        """Set leaves ``indices`` to ``values`` (finite, >= 0); a scalar value is broadcast."""
        cdef cnp.ndarray idx = self._indices(indices)
        val = check_real(as_array(values, "values"), "values")
        if val.ndim == 0:
            val = np.full(idx.shape[0], val, dtype=np.float64)
        else:
            val = real_array(val.reshape(-1), "values", cnp.NPY_DOUBLE)
        if val.shape[0] != idx.shape[0]:
            raise ValueError(f"got {idx.shape[0]} indices but {val.shape[0]} values")
        if val.size and not (np.isfinite(val).all() and (val >= 0).all()):
            bad = val[~(np.isfinite(val) & (val >= 0))][0]
            raise ValueError(f"tree values must be finite and >= 0, got {bad}")
        cdef intp_t n = idx.shape[0]
        cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
        cdef const float64_t* vp = <const float64_t*>cnp.PyArray_DATA(val)
        with nogil:
            tree_set_many(&self._tree, ip, vp, n)

    def reset(self, indices):
        """Make leaves ``indices`` empty again."""
        cdef cnp.ndarray idx = self._indices(indices)
        cdef intp_t k, n = idx.shape[0]
        cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
        with nogil:
            for k in range(n):
                tree_unset(&self._tree, ip[k])

    def clear(self):
        """Every leaf empty."""
        tree_clear(&self._tree)

    def get(self, indices):
        """Leaf values at ``indices`` (float64; 0 for empty leaves)."""
        cdef cnp.ndarray idx = self._indices(indices)
        cdef intp_t k, n = idx.shape[0]
        out = np.empty(n, dtype=np.float64)
        cdef float64_t[::1] o = out
        cdef const int64_t* ip = <const int64_t*>cnp.PyArray_DATA(idx)
        for k in range(n):
            o[k] = tree_leaf(&self._tree, ip[k])
        return out

    def total(self):
        """Sum of all leaves."""
        return tree_total(&self._tree)

    def min(self):
        """Smallest leaf set so far (``inf`` when the tree is empty)."""
        return tree_min(&self._tree)

    def find(self, masses):
        """Leaf index for each prefix mass in ``masses`` (each in [0, total)); int64 array.

        One call answers the whole batch without the GIL (threads split queries above 4,096).
        """
        m = real_array(check_real(as_array(masses, "masses"), "masses").reshape(-1), "masses",
                       cnp.NPY_DOUBLE)
        cdef double total = tree_total(&self._tree)
        if total <= 0.0:
            raise ValueError("find on a tree whose total is 0: set some leaves > 0 first")
        if m.size and not (np.isfinite(m).all() and (m >= 0).all() and (m <= total).all()):
            bad = m[~(np.isfinite(m) & (m >= 0) & (m <= total))][0]
            raise ValueError(f"masses must lie in [0, total={total}], got {bad}")
        cdef intp_t n = m.shape[0]
        out = np.empty(n, dtype=np.int64)
        cdef const float64_t* mp = <const float64_t*>cnp.PyArray_DATA(m)
        cdef int64_t* op = <int64_t*>cnp.PyArray_DATA(out)
        with nogil:
            _find_many(&self._tree, mp, op, n, _num_threads)
        return out

    def sample_stratified(self, batch_size, seed):
        """``batch_size`` leaves, one uniform mass per equal segment of the total (int64)."""
        cdef intp_t n = positive_int(batch_size, "batch_size")
        if tree_total(&self._tree) <= 0.0:
            raise ValueError("sampling a tree whose total is 0: set some leaves > 0 first")
        cdef rng_t rng
        rng_seed(&rng, <uint64_t>(int(seed) & 0xFFFFFFFFFFFFFFFF))
        masses = np.empty(n, dtype=np.float64)
        out = np.empty(n, dtype=np.int64)
        cdef float64_t* mp = <float64_t*>cnp.PyArray_DATA(masses)
        cdef int64_t* op = <int64_t*>cnp.PyArray_DATA(out)
        with nogil:
            tree_stratified_masses(&self._tree, &rng, mp, n)
            _find_many(&self._tree, mp, op, n, _num_threads)
        return out
