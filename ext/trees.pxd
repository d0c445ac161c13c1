# Sum tree and min tree over one array of leaves: the contract of ext/trees.pyx.
#
# Layout: an 8-ary tree stored level by level, leaves first. Level 0 holds the ``capacity``
# leaves; entry j of level l+1 holds the sum and the min of entries 8j .. 8j+7 of level l; the
# last level has one entry, the root. Each level is stored as blocks of 16 doubles, one block
# per 8 entries: their 8 sums, then their 8 mins (two adjacent 64-byte lines, 128-byte
# aligned). So the children of a node are one line of sums (the prefix search reads only that)
# next to one line of mins (an update touches both, and the hardware fetches the pair), and a
# 1M-leaf tree is 7 levels deep instead of a binary tree's 20, which shortens both the update
# walk (leaf to root) and the search (root to leaf). Unused entries hold sum 0 and min +inf. Every inner entry is recomputed from its 8 children, in a fixed order, on each
# write (never updated by adding a delta), so sums do not drift and the tree's contents depend
# only on its leaves, whatever sequence of single or batched updates produced them. The min tree
# is the "augmented" half: the root's min is the minimum leaf, read in O(1).
#
# Everything here is ``noexcept nogil`` and inline: ext/trees.pyx (the SumMinTree class) and
# ext/per.pyx (PrioritizedReplayBuffer) compile their own copy, so no symbol crosses modules.
# Callers own the memory (tree_alloc / tree_free) and check every index before calling.
from libc.math cimport INFINITY
from libc.stdlib cimport malloc, free
from _types cimport float64_t, int64_t, intp_t, uintptr_t
from _rng cimport rng_t, rng_uniform

cdef extern from *:
    # GCC/Clang builtin: start loading a cache line (rw=1: for writing) without waiting for it
    void __builtin_prefetch(const void* addr, int rw, int locality) nogil

cdef enum:
    TREE_MAX_LEVELS = 24   # 8^23 leaves: more than any address space
    TREE_CHUNK = 256       # batched updates recompute ancestors in chunks of this many leaves


cdef struct tree_t:
    float64_t* data                     # every level's blocks, leaves first (see _ts / _tm)
    void* block                         # the allocation data points into (freed by tree_free)
    intp_t off[TREE_MAX_LEVELS]         # offset of level l's first block in data
    intp_t count[TREE_MAX_LEVELS]       # entries in use on level l (count[0] = capacity)
    int n_levels                        # levels including the leaves and the root (>= 2)
    intp_t capacity                     # number of usable leaves


cdef inline int tree_alloc(tree_t* t, intp_t capacity) noexcept nogil:
    """Allocate a tree of ``capacity`` >= 1 leaves (all empty). Returns -1 when out of memory."""
    cdef intp_t n = capacity, total = 0
    cdef int l = 0
    while True:
        t.off[l] = total
        t.count[l] = n
        total += 16 * ((n + 7) // 8)     # one block of 16 doubles per 8 entries
        l += 1
        if n == 1 and l >= 2:
            break
        n = (n + 7) // 8
    t.n_levels = l
    t.capacity = capacity
    t.off[l] = total                     # end of the last level
    t.block = malloc(total * sizeof(float64_t) + 128)
    if t.block == NULL:
        t.data = NULL
        return -1
    t.data = <float64_t*>((<uintptr_t>t.block + 127) & ~(<uintptr_t>127))
    tree_clear(t)
    return 0


cdef inline void tree_free(tree_t* t) noexcept nogil:
    free(t.block)
    t.block = NULL
    t.data = NULL


cdef inline void tree_clear(tree_t* t) noexcept nogil:
    """Every leaf back to empty (sum 0, min +inf)."""
    cdef intp_t b, k
    for b in range(0, t.off[t.n_levels], 16):
        for k in range(8):
            t.data[b + k] = 0.0
            t.data[b + 8 + k] = INFINITY


cdef inline float64_t* _ts(const tree_t* t, int level, intp_t i) noexcept nogil:
    """The sum of entry i of ``level``."""
    return t.data + t.off[level] + 16 * (i >> 3) + (i & 7)


cdef inline float64_t* _tm(const tree_t* t, int level, intp_t i) noexcept nogil:
    """The min of entry i of ``level``."""
    return t.data + t.off[level] + 16 * (i >> 3) + 8 + (i & 7)


cdef inline float64_t _min2(float64_t a, float64_t b) noexcept nogil:
    return a if a < b else b


cdef inline void _tree_pull(tree_t* t, int level, intp_t j) noexcept nogil:
    """Recompute entry j of ``level`` (>= 1) from its 8 children on level - 1."""
    cdef const float64_t* s = t.data + t.off[level - 1] + 16 * j      # children's sums
    cdef const float64_t* m = s + 8                                   # children's mins
    _ts(t, level, j)[0] = ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]))
    _tm(t, level, j)[0] = _min2(_min2(_min2(m[0], m[1]), _min2(m[2], m[3])),
                                     _min2(_min2(m[4], m[5]), _min2(m[6], m[7])))


cdef inline void _tree_write(tree_t* t, intp_t i, float64_t sum_value,
                             float64_t min_value) noexcept nogil:
    """Leaf i <- (sum_value, min_value), then recompute its ancestors."""
    cdef int l
    _ts(t, 0, i)[0] = sum_value
    _tm(t, 0, i)[0] = min_value
    for l in range(1, t.n_levels):
        i >>= 3
        _tree_pull(t, l, i)


cdef inline void tree_set(tree_t* t, intp_t i, float64_t value) noexcept nogil:
    """Leaf i <- value (0 <= i < capacity), then recompute its ancestors."""
    _tree_write(t, i, value, value)


cdef inline void tree_unset(tree_t* t, intp_t i) noexcept nogil:
    """Leaf i back to empty (sum 0, min +inf)."""
    _tree_write(t, i, 0.0, INFINITY)


cdef inline void _tree_pull_levels(tree_t* t, int level, intp_t lo, intp_t hi) noexcept nogil:
    """Recompute entries lo .. hi of ``level`` and, shifted, of every level above it."""
    cdef intp_t j
    while level < t.n_levels:
        for j in range(lo, hi + 1):
            _tree_pull(t, level, j)
        lo >>= 3
        hi >>= 3
        level += 1


cdef inline void tree_set_many(tree_t* t, const int64_t* idx, const float64_t* values,
                               intp_t n) noexcept nogil:
    """Leaves idx[k] <- values[k] (a repeated index keeps its last value); the same tree as n
    tree_set calls. Leaves are written first, then ancestors are recomputed level by level
    across the chunk (the recomputations of a level do not depend on each other); a level with
    no more entries than the chunk has leaves is recomputed whole, once. Each level's lines are
    prefetched for writing first, so their cache misses overlap instead of queueing."""
    cdef intp_t cur[TREE_CHUNK]
    cdef intp_t lo = 0, m, k
    cdef int l
    while lo < n:
        m = n - lo if n - lo < TREE_CHUNK else TREE_CHUNK
        for k in range(m):
            __builtin_prefetch(_ts(t, 0, idx[lo + k]), 1, 3)
            __builtin_prefetch(_tm(t, 0, idx[lo + k]), 1, 3)
        for k in range(m):
            _ts(t, 0, idx[lo + k])[0] = values[lo + k]
            _tm(t, 0, idx[lo + k])[0] = values[lo + k]
            cur[k] = idx[lo + k] >> 3
        l = 1
        while l < t.n_levels and t.count[l] > m:
            for k in range(m):
                __builtin_prefetch(_ts(t, l, cur[k]), 1, 3)
                __builtin_prefetch(_tm(t, l, cur[k]), 1, 3)
            for k in range(m):
                _tree_pull(t, l, cur[k])
                cur[k] >>= 3
            l += 1
        if l < t.n_levels:
            _tree_pull_levels(t, l, 0, t.count[l] - 1)
        lo += m


cdef inline void tree_prefetch_paths(const tree_t* t, const int64_t* idx,
                                     intp_t n) noexcept nogil:
    """Start loading, for writing, the lines an update of leaves idx[0 .. n-1] touches first
    (the leaf and its parent, sums and mins), so a caller can compute the new values while they
    arrive."""
    cdef intp_t k
    cdef int top = 2 if t.n_levels > 2 else t.n_levels
    cdef int l
    for k in range(n):
        for l in range(top):
            __builtin_prefetch(_ts(t, l, idx[k] >> (3 * l)), 1, 3)
            __builtin_prefetch(_tm(t, l, idx[k] >> (3 * l)), 1, 3)


cdef inline void tree_set_range(tree_t* t, intp_t first, const float64_t* values,
                                intp_t n) noexcept nogil:
    """Leaves first .. first+n-1 <- values[0 .. n-1], then each level's affected range once:
    O(n + depth) for a contiguous block (push_batch)."""
    cdef intp_t k
    if n <= 0:
        return
    for k in range(n):
        _ts(t, 0, first + k)[0] = values[k]
        _tm(t, 0, first + k)[0] = values[k]
    _tree_pull_levels(t, 1, first >> 3, (first + n - 1) >> 3)


cdef inline float64_t tree_leaf(const tree_t* t, intp_t i) noexcept nogil:
    return _ts(t, 0, i)[0]


cdef inline float64_t tree_total(const tree_t* t) noexcept nogil:
    return _ts(t, t.n_levels - 1, 0)[0]


cdef inline float64_t tree_min(const tree_t* t) noexcept nogil:
    """Minimum over the leaves set so far (+inf when none is)."""
    return _tm(t, t.n_levels - 1, 0)[0]


cdef inline intp_t tree_find(const tree_t* t, float64_t mass) noexcept nogil:
    """The leaf i with prefix(i) <= mass < prefix(i) + leaf(i), prefix(i) = sum of leaves < i.

    IN 0 <= mass < total. At each level the walk takes the first child whose sum exceeds the
    remaining mass, skipping empty children. Rounding can leave ``mass`` a hair above a node's
    children; the walk then takes the last non-empty child, so it always ends on a leaf whose
    value is > 0 (the last such leaf when mass >= total). Zero-valued leaves are never returned
    while the total is > 0.
    """
    cdef intp_t j = 0
    cdef int l, q, pick, last
    cdef const float64_t* c
    for l in range(t.n_levels - 1, 0, -1):
        c = t.data + t.off[l - 1] + 16 * j          # the 8 children's sums
        pick = -1
        last = 0
        for q in range(8):
            if c[q] > 0.0:
                last = q
                if mass < c[q]:
                    pick = q
                    break
                mass -= c[q]
        if pick < 0:
            pick = last
            mass = c[last]
        j = 8 * j + pick
    return j


cdef enum:
    FIND_GROUP = 16


cdef inline void tree_find_many(const tree_t* t, const float64_t* masses, int64_t* out,
                                intp_t n) noexcept nogil:
    """OUT out[k] = tree_find(masses[k]) for k < n, walking FIND_GROUP searches in lockstep:
    each level's lines are prefetched for the whole group before any is scanned, so the cache
    misses of independent searches overlap instead of each search waiting for its own."""
    cdef intp_t j[FIND_GROUP]
    cdef float64_t mass[FIND_GROUP]
    cdef intp_t lo = 0, g, m
    cdef int l, q, pick, last
    cdef const float64_t* c
    while lo < n:
        m = n - lo if n - lo < FIND_GROUP else FIND_GROUP
        for g in range(m):
            j[g] = 0
            mass[g] = masses[lo + g]
        for l in range(t.n_levels - 1, 0, -1):
            for g in range(m):
                __builtin_prefetch(t.data + t.off[l - 1] + 16 * j[g], 0, 3)
            for g in range(m):
                c = t.data + t.off[l - 1] + 16 * j[g]
                pick = -1
                last = 0
                for q in range(8):
                    if c[q] > 0.0:
                        last = q
                        if mass[g] < c[q]:
                            pick = q
                            break
                        mass[g] -= c[q]
                if pick < 0:
                    pick = last
                    mass[g] = c[last]
                j[g] = 8 * j[g] + pick
        for g in range(m):
            out[lo + g] = j[g]
        lo += m


cdef inline void tree_stratified_masses(const tree_t* t, rng_t* rng, float64_t* masses,
                                        intp_t n) noexcept nogil:
    """OUT masses[k] = (k + u_k) * total / n, u_k ~ U[0, 1): one draw per equal segment of the
    total mass (stratified sampling, Schaul et al. 2016, appendix B.2.1)."""
    cdef float64_t seg = tree_total(t) / n
    cdef intp_t k
    for k in range(n):
        masses[k] = (k + rng_uniform(rng)) * seg
