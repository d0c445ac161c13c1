# Token sequences for LLM post-training: DPO preference pairs, variable-length storage and
# first-fit-decreasing sequence packing.
#
# Token ids are uint32 (``token_t``). Inputs of any integer dtype are accepted when every id lies
# in [0, 2**32 - 1]; anything else raises a TypeError/ValueError naming the argument.
from cython.parallel cimport prange
from libc.stdlib cimport malloc, free, qsort
from libc.string cimport memcpy
from _types cimport int64_t, intp_t, token_t
from _checks cimport positive_int
import numpy as np
cimport numpy as cnp

include "_threads.pxi"

cnp.import_array()

cdef enum:
    STORE_FORMAT_VERSION = 1     # VarLenStore.save files
    PAR_MIN_TOKENS = 65536       # pack_sequences fills serially below this many tokens
    _HUGE_PAGE = 2097152         # bytes in an x86-64 / arm64 transparent huge page

cdef int64_t _TOKEN_MAX = 0xFFFFFFFF


# ------------------------------------------------------------------------------------ tokens
cdef str _label(str name, Py_ssize_t index):
    return name if index < 0 else f"{name}[{index}]"


cdef object _tokens(object x, str name, Py_ssize_t index=-1):
    """x as a 1-D, aligned, C-contiguous uint32 array of token ids (``x`` itself when it already
    is one). The error names ``name`` (``name[index]`` when index >= 0)."""
    cdef cnp.ndarray a
    if cnp.PyArray_Check(x):
        a = <cnp.ndarray>x
        if cnp.PyArray_TYPE(a) == cnp.NPY_UINT32 and cnp.PyArray_NDIM(a) == 1 and \
                cnp.PyArray_ISCARRAY_RO(a) and cnp.PyArray_ISNOTSWAPPED(a):
            return x
        arr = x
    else:
        try:
            arr = np.asarray(x)
        except Exception as exc:
            raise TypeError(f"{_label(name, index)} could not be converted to an array of token "
                            f"ids ({exc})") from None
    if arr.ndim != 1:
        raise ValueError(f"{_label(name, index)} must be 1-D (one sequence of token ids), got "
                         f"shape {arr.shape}")
    if arr.size == 0:
        return np.empty(0, dtype=np.uint32)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{_label(name, index)} must hold integer token ids, got dtype "
                        f"{arr.dtype}; convert it with np.asarray(..., dtype=np.uint32)")
    if arr.dtype.kind == "i" or arr.dtype.itemsize > 4:
        lo, hi = arr.min(), arr.max()
        if lo < 0 or hi > _TOKEN_MAX:
            raise ValueError(f"{_label(name, index)} holds token ids outside [0, 2**32 - 1] "
                             f"(min {lo}, max {hi})")
    return np.ascontiguousarray(arr, dtype=np.uint32)


cdef object _frozen(object arr):
    arr.flags.writeable = False
    return arr


# --------------------------------------------------------------------------------- DPOPair
cdef class DPOPair:
    """A DPO preference pair: one prompt, a chosen and a rejected completion (uint32 token ids).

    The arrays are private read-only copies. ``chosen_input_ids`` / ``rejected_input_ids`` are the
    concatenations prompt + completion that go through the model, and ``completion_start``
    (= ``prompt_length``) is the index where the completion starts in both: the DPO loss sums
    the log-probabilities of the tokens from there on.

    >>> pair = DPOPair(np.array([1, 2, 3], np.uint32), np.array([4, 5], np.uint32),
    ...                np.array([6, 7, 8], np.uint32))
    >>> pair.chosen_input_ids, pair.completion_start
    (array([1, 2, 3, 4, 5], dtype=uint32), 3)
    """
    cdef readonly object prompt_tokens        # [P] uint32
    cdef readonly object chosen_tokens        # [C] uint32
    cdef readonly object rejected_tokens      # [R] uint32
    cdef readonly object chosen_input_ids     # [P + C] prompt then chosen
    cdef readonly object rejected_input_ids   # [P + R] prompt then rejected

    def __init__(self, prompt_tokens, chosen_tokens, rejected_tokens):
        prompt = _tokens(prompt_tokens, "prompt_tokens")
        chosen = _tokens(chosen_tokens, "chosen_tokens")
        rejected = _tokens(rejected_tokens, "rejected_tokens")
        self.prompt_tokens = _frozen(prompt.copy())
        self.chosen_tokens = _frozen(chosen.copy())
        self.rejected_tokens = _frozen(rejected.copy())
        self.chosen_input_ids = _frozen(np.concatenate([prompt, chosen]))
        self.rejected_input_ids = _frozen(np.concatenate([prompt, rejected]))

    @property
    def prompt_length(self):
        return self.prompt_tokens.shape[0]

    @property
    def chosen_length(self):
        return self.chosen_tokens.shape[0]

    @property
    def rejected_length(self):
        return self.rejected_tokens.shape[0]

    @property
    def completion_start(self):
        """Index of the first completion token in ``chosen_input_ids`` and ``rejected_input_ids``."""
        return self.prompt_tokens.shape[0]

    def __reduce__(self):
        return DPOPair, (self.prompt_tokens, self.chosen_tokens, self.rejected_tokens)

    def __repr__(self):
        return (f"DPOPair(prompt_length={self.prompt_length}, chosen_length={self.chosen_length}, "
                f"rejected_length={self.rejected_length})")


# ------------------------------------------------------------------------------ VarLenStore
cdef class VarLenStore:
    """Variable-length token sequences stored back to back in one growing uint32 buffer.

    Sequence ``i`` is ``values[offsets[i]:offsets[i + 1]]``. ``push`` copies only the new
    tokens; both buffers double their capacity when full, so a push is amortised O(1) per token.
    ``get(i)``, ``offsets`` and ``values`` are read-only NumPy views (no copy).

    >>> store = VarLenStore(); store.push(np.array([1, 2, 3], np.uint32)); store.get(0)
    array([1, 2, 3], dtype=uint32)
    """
    cdef cnp.ndarray _values     # uint32 [token capacity]; the first _offsets[_n] are in use
    cdef cnp.ndarray _offsets    # int64 [sequence capacity + 1]; _offsets[0] == 0
    cdef Py_ssize_t _n           # sequences stored

    def __init__(self):
        self._values = np.empty(1024, dtype=np.uint32)
        self._offsets = np.zeros(65, dtype=np.int64)
        self._n = 0

    cdef inline int64_t *_off(self) noexcept:
        return <int64_t *>cnp.PyArray_DATA(self._offsets)

    cdef inline int64_t _total(self) noexcept:
        return self._off()[self._n]

    cdef int _reserve(self, int64_t tokens, Py_ssize_t sequences) except -1:
        """Make room for ``tokens`` tokens and ``sequences`` sequences in all (doubling)."""
        cdef Py_ssize_t cap
        if tokens > self._values.shape[0]:
            cap = max(tokens, 2 * self._values.shape[0])
            grown = np.empty(cap, dtype=np.uint32)
            grown[:self._total()] = self._values[:self._total()]
            self._values = grown
        if sequences + 1 > self._offsets.shape[0]:
            cap = max(sequences + 1, 2 * self._offsets.shape[0])
            grown = np.empty(cap, dtype=np.int64)
            grown[:self._n + 1] = self._offsets[:self._n + 1]
            self._offsets = grown
        return 0

    def push(self, tokens):
        """Append one sequence (1-D integer token ids, any length); returns its index."""
        t = _tokens(tokens, "tokens")
        cdef int64_t n_tok = t.shape[0], start = self._total()
        self._reserve(start + n_tok, self._n + 1)
        if n_tok > 0:
            memcpy(<token_t *>cnp.PyArray_DATA(self._values) + start,
                   cnp.PyArray_DATA(<cnp.ndarray>t), n_tok * sizeof(token_t))
        self._n += 1
        self._off()[self._n] = start + n_tok
        return self._n - 1

    def get(self, i):
        """Sequence ``i`` (negative counts from the end) as a read-only uint32 view."""
        if isinstance(i, bool) or not isinstance(i, (int, np.integer)):
            raise TypeError(f"VarLenStore index must be an int, got {type(i).__name__} {i!r}")
        k = int(i) + self._n if i < 0 else int(i)
        if not 0 <= k < self._n:
            raise IndexError(f"index {i} is out of range for a VarLenStore of {self._n} "
                             f"sequences")
        cdef int64_t *off = self._off()
        return _frozen(self._values[off[k]:off[k + 1]])

    def __getitem__(self, i):
        return self.get(i)

    def len(self):
        """Number of sequences (also ``len(store)``)."""
        return self._n

    def __len__(self):
        return self._n

    def total_tokens(self):
        """Number of tokens over all sequences."""
        return self._total()

    @property
    def offsets(self):
        """``[len + 1]`` int64, read-only: sequence i is ``values[offsets[i]:offsets[i + 1]]``."""
        return _frozen(self._offsets[:self._n + 1])

    @property
    def values(self):
        """``[total_tokens]`` uint32, read-only: every sequence back to back."""
        return _frozen(self._values[:self._total()])

    @property
    def capacity(self):
        """Tokens the value buffer holds before it next grows (doubling)."""
        return self._values.shape[0]

    def save(self, path):
        """Write the store to ``path`` as an uncompressed ``.npz`` (``offsets``, ``values`` and
        ``format_version``; no pickled objects). The name is used as given."""
        with open(path, "wb") as f:
            np.savez(f, format_version=np.int64(STORE_FORMAT_VERSION), offsets=self.offsets,
                     values=self.values)

    @staticmethod
    def load(path):
        """Read a store written by ``save`` (never unpickles); checks the offsets are valid."""
        with np.load(path, allow_pickle=False) as data:
            missing = {"format_version", "offsets", "values"} - set(data.files)
            if missing:
                raise ValueError(f"{path} is not a VarLenStore file: it lacks {sorted(missing)}")
            version = int(data["format_version"])
            if version != STORE_FORMAT_VERSION:
                raise ValueError(f"{path} has VarLenStore format version {version}; this rlox "
                                 f"reads version {STORE_FORMAT_VERSION}")
            offsets, values = data["offsets"], data["values"]
        if offsets.dtype != np.int64 or offsets.ndim != 1 or offsets.shape[0] < 1:
            raise ValueError(f"{path}: offsets must be 1-D int64 with at least one entry, got "
                             f"{offsets.dtype} of shape {offsets.shape}")
        if values.dtype != np.uint32 or values.ndim != 1:
            raise ValueError(f"{path}: values must be 1-D uint32, got {values.dtype} of shape "
                             f"{values.shape}")
        if offsets[0] != 0 or offsets[offsets.shape[0] - 1] != values.shape[0] or \
                np.any(np.diff(offsets) < 0):
            raise ValueError(f"{path}: offsets must start at 0, never decrease and end at the "
                             f"number of values ({values.shape[0]})")
        cdef VarLenStore store = VarLenStore()
        store._n = offsets.shape[0] - 1
        store._values = np.array(values, dtype=np.uint32, copy=True)
        if store._values.shape[0] == 0:
            store._values = np.empty(1024, dtype=np.uint32)
        store._offsets = np.array(offsets, dtype=np.int64, copy=True)
        return store

    def __repr__(self):
        return f"VarLenStore(len={self._n}, total_tokens={self._total()})"


# ---------------------------------------------------------------------------- pack_sequences
ctypedef struct _item:
    int64_t length
    int64_t index


cdef int _longer_first(const void *a, const void *b) noexcept nogil:
    """qsort order: length descending, then input index ascending (a deterministic FFD)."""
    cdef const _item *x = <const _item *>a
    cdef const _item *y = <const _item *>b
    if x.length != y.length:
        return -1 if x.length > y.length else 1
    return -1 if x.index < y.index else (1 if x.index > y.index else 0)


cdef int _sort_longest_first(_item *items, intp_t m, int64_t max_length) noexcept nogil:
    """Sort items[:m] by length descending, ties in input (index) order. Lengths lie in
    [1, max_length], so a counting sort does it in O(m + max_length) when max_length is not
    much larger than m, else qsort. Returns -1 when out of memory."""
    cdef intp_t k, L = max_length
    cdef int64_t total = 0, c
    cdef int64_t *start
    cdef _item *tmp
    if L > 4 * m + 1024:
        qsort(items, m, sizeof(_item), _longer_first)
        return 0
    start = <int64_t *>malloc((L + 1) * sizeof(int64_t))
    tmp = <_item *>malloc((m if m > 0 else 1) * sizeof(_item))
    if start == NULL or tmp == NULL:
        free(start)
        free(tmp)
        return -1
    for k in range(L + 1):
        start[k] = 0
    for k in range(m):
        start[items[k].length] += 1
    for k in range(L, -1, -1):               # longest first: start[len] = count of longer ones
        c = start[k]
        start[k] = total
        total += c
    for k in range(m):                       # items arrive in index order: stable
        tmp[start[items[k].length]] = items[k]
        start[items[k].length] += 1
    memcpy(items, tmp, m * sizeof(_item))
    free(tmp)
    free(start)
    return 0


cdef int _first_fit_decreasing(const int64_t *lengths, intp_t n, int64_t max_length,
                               int64_t *row, int64_t *offset, int64_t *by_row,
                               int64_t *row_start, intp_t *n_rows) noexcept nogil:
    """IN lengths [n] (each <= max_length). OUT row, offset [n] ((-1, 0) for an empty
    sequence); by_row [n], row_start [n + 1]: row r holds sequences by_row[row_start[r] :
    row_start[r + 1]], in offset order; *n_rows. Returns -1 when out of memory, -2 if the tree
    had no row with room (an internal error: the bound below rules it out).

    First-fit decreasing. The rows' free space lives in a max-tree whose leaves are rows in
    opening order, every unopened row counted as empty: the leftmost leaf with room is then the
    first open row with room, or else the next row to open, and finding it costs O(log n). The
    descent is branch-free (its direction is data, not a jump the CPU must guess), and an
    update stops at the first ancestor whose maximum does not change."""
    cdef intp_t m = 0, i, k, size = 1, node, leaf, rows = 0, bound
    cdef int64_t length, a, b, v, total = 0
    cdef _item *items = <_item *>malloc((n if n > 0 else 1) * sizeof(_item))
    if items == NULL:
        return -1
    for i in range(n):
        row[i] = -1
        offset[i] = 0
        if lengths[i] > 0:
            items[m].length = lengths[i]
            items[m].index = i
            total += lengths[i]
            m += 1
    if _sort_longest_first(items, m, max_length) != 0:
        free(items)
        return -1
    # First fit never leaves two rows at most half full (the later one's sequences would have
    # fitted in the earlier one), so it opens fewer than 2 * total / max_length + 1 rows: the
    # tree needs no more leaves than that (a shallower descent than one leaf per sequence).
    bound = 2 * (total // max_length) + 2
    if bound > m:
        bound = m
    while size < bound:
        size *= 2
    cdef int64_t *tree = <int64_t *>malloc(2 * size * sizeof(int64_t))   # tree[1] is the root
    if tree == NULL:
        free(items)
        return -1
    for k in range(size):
        tree[size + k] = max_length if k < bound else -1
    for k in range(size - 1, 0, -1):
        tree[k] = tree[2 * k] if tree[2 * k] >= tree[2 * k + 1] else tree[2 * k + 1]
    for k in range(m):
        length = items[k].length
        node = 1
        while node < size:                       # descend to the leftmost leaf with room
            node = 2 * node + (tree[2 * node] < length)
        if tree[node] < length:                  # cannot happen (the bound above); never
            free(tree)                           # let a broken invariant write past a row
            free(items)
            return -2
        leaf = node - size
        row[items[k].index] = leaf
        offset[items[k].index] = max_length - tree[node]
        tree[node] -= length
        if leaf + 1 > rows:
            rows = leaf + 1
        node //= 2
        while node >= 1:
            a = tree[2 * node]
            b = tree[2 * node + 1]
            v = a if a >= b else b
            if tree[node] == v:                  # unchanged here, so unchanged above
                break
            tree[node] = v
            node //= 2
    # group the sequences by row (counting sort, stable: placement order is offset order)
    for k in range(rows + 1):
        row_start[k] = 0
    for k in range(m):
        row_start[row[items[k].index] + 1] += 1
    for k in range(rows):
        row_start[k + 1] += row_start[k]
    for k in range(rows):                        # the tree's leaves become write cursors
        tree[size + k] = row_start[k]
    for k in range(m):
        leaf = row[items[k].index]
        by_row[tree[size + leaf]] = items[k].index
        tree[size + leaf] += 1
    n_rows[0] = rows
    free(tree)
    free(items)
    return 0


cdef void _fill_row(const token_t **src, const int64_t *lengths, const int64_t *seqs,
                    intp_t n_seqs, int64_t max_length, int64_t pad_id, int64_t *ids,
                    int64_t *att, int64_t *pos, int64_t *sid) noexcept nogil:
    """OUT one row [max_length] of each output: its sequences back to back, then padding."""
    cdef intp_t j
    cdef int64_t t, at = 0, i, n
    cdef const token_t *tok
    for j in range(n_seqs):
        i = seqs[j]
        n = lengths[i]
        tok = src[i]
        # one simple loop per output: each vectorises (the compiler checks aliasing per loop)
        for t in range(n):
            ids[at + t] = tok[t]
        for t in range(n):
            att[at + t] = 1
        for t in range(n):
            pos[at + t] = t
        for t in range(n):
            sid[at + t] = i
        at += n
    for t in range(at, max_length):
        ids[t] = pad_id
    for t in range(at, max_length):
        att[t] = 0
    for t in range(at, max_length):
        pos[t] = 0
    for t in range(at, max_length):
        sid[t] = -1


cdef void _fill(const token_t **src, const int64_t *lengths, const int64_t *by_row,
                const int64_t *row_start, intp_t n_rows, int64_t max_length, int64_t pad_id,
                int64_t *ids, int64_t *att, int64_t *pos, int64_t *sid,
                int n_threads) noexcept nogil:
    """OUT ids, att, pos, sid [n_rows * max_length], every cell written once; prange over rows."""
    cdef intp_t r
    cdef int64_t at
    if n_threads > 1 and n_rows > 1 and n_rows * max_length >= PAR_MIN_TOKENS:
        for r in prange(n_rows, nogil=True, schedule="static", num_threads=n_threads):
            at = r * max_length
            _fill_row(src, lengths, by_row + row_start[r], row_start[r + 1] - row_start[r],
                      max_length, pad_id, ids + at, att + at, pos + at, sid + at)
    else:
        for r in range(n_rows):
            at = r * max_length
            _fill_row(src, lengths, by_row + row_start[r], row_start[r + 1] - row_start[r],
                      max_length, pad_id, ids + at, att + at, pos + at, sid + at)


def pack_sequences(sequences, max_length, truncate=False, pad_id=0):
    """Pack variable-length sequences into rows of ``max_length`` tokens, first-fit decreasing.

    Sequences are taken longest first (ties in input order) and each goes into the first row
    with room for it, at the end of that row's tokens; a sequence is never split. Rows hold
    whole sequences back to back, then padding.

    Args:
        sequences: a list (any iterable) of 1-D integer token-id arrays (ids in [0, 2**32 - 1]),
            or a ``VarLenStore`` (packed without copying its tokens).
        max_length: tokens per row (int >= 1).
        truncate: a sequence longer than ``max_length`` raises ValueError unless this is True;
            then only its first ``max_length`` tokens are packed.
        pad_id: token id of padding (any int64; default 0).

    Returns:
        dict of NumPy arrays, ``R`` rows, ``n`` input sequences:

        * ``input_ids`` ``[R, max_length]`` int64: tokens, ``pad_id`` on padding.
        * ``attention_mask`` ``[R, max_length]`` int64: 1 on tokens, 0 on padding.
        * ``position_ids`` ``[R, max_length]`` int64: 0, 1, ... restarting at each sequence
          (0 on padding).
        * ``sequence_ids`` ``[R, max_length]`` int64: index of the input sequence owning each
          token, -1 on padding. ``sequence_ids[:, :, None] == sequence_ids[:, None, :]``
          (restricted to tokens) is the block-diagonal attention mask.
        * ``placement`` ``[n, 2]`` int64: ``(row, offset)`` of each input sequence, so
          ``input_ids[row, offset:offset + lengths[i]]`` is sequence ``i``; ``(-1, 0)`` for an
          empty sequence, which takes no space.
        * ``lengths`` ``[n]`` int64: tokens packed per sequence (after truncation).
    """
    cdef intp_t L = positive_int(max_length, "max_length")
    if isinstance(pad_id, bool) or not isinstance(pad_id, (int, np.integer)):
        raise TypeError(f"pad_id must be an int, got {type(pad_id).__name__} {pad_id!r}")
    if not -(1 << 63) <= pad_id < (1 << 63):
        raise ValueError(f"pad_id must fit in int64, got {pad_id}")
    cdef int64_t pad = pad_id
    cdef bint trunc = bool(truncate)
    cdef intp_t n, i
    cdef VarLenStore store = None
    keep = None                       # the token arrays the pointers below point into
    if isinstance(sequences, VarLenStore):
        store = <VarLenStore>sequences
        n = store._n
    else:
        if isinstance(sequences, np.ndarray) and sequences.ndim == 1 and sequences.dtype != object:
            raise TypeError("sequences must be a list of 1-D token-id arrays (or a VarLenStore), "
                            "got one 1-D array; wrap a single sequence as [seq]")
        try:
            items = iter(sequences)
        except TypeError:
            raise TypeError(f"sequences must be a list of 1-D token-id arrays (or a "
                            f"VarLenStore), got {type(sequences).__name__}") from None
        keep = [_tokens(s, "sequences", i) for i, s in enumerate(items)]
        n = len(keep)
    lengths = np.empty(n, dtype=np.int64)
    cdef int64_t *len_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>lengths)
    cdef const token_t **src = <const token_t **>malloc((n if n > 0 else 1) * sizeof(token_t *))
    if src == NULL:
        raise MemoryError("pack_sequences: out of memory")
    cdef const token_t *base
    cdef const int64_t *offs
    try:
        if store is not None:
            keep = store._values      # holds the buffer even if the store grows meanwhile
            base = <const token_t *>cnp.PyArray_DATA(store._values)
            offs = <const int64_t *>cnp.PyArray_DATA(store._offsets)
            for i in range(n):
                src[i] = base + offs[i]
                len_p[i] = offs[i + 1] - offs[i]
        else:
            for i in range(n):
                src[i] = <const token_t *>cnp.PyArray_DATA(<cnp.ndarray>keep[i])
                len_p[i] = cnp.PyArray_DIM(<cnp.ndarray>keep[i], 0)
        for i in range(n):
            if len_p[i] > L:
                if not trunc:
                    raise ValueError(f"sequences[{i}] has {len_p[i]} tokens, more than "
                                     f"max_length={L}; pass truncate=True to pack only the "
                                     f"first {L} tokens of such sequences")
                len_p[i] = L
        return _pack(src, lengths, n, L, pad)
    finally:
        free(src)


cdef object _huge_aligned_empty(intp_t rows, intp_t cols):
    """An uninitialised C-contiguous int64 [rows, cols] array whose data starts on a 2 MiB
    boundary when it is large (a view into a slightly larger buffer).

    The outputs of pack_sequences are written once, right after allocation, so the cost is the
    kernel faulting their pages in. NumPy asks for transparent huge pages on large arrays, but a
    huge page only covers 2 MiB-aligned spans: an unaligned 27 MB array starts and ends on up to
    2 MiB of 4 KiB pages, which fault about 3x slower per byte. Aligning the start trims
    pack_sequences of 10k sequences by about a tenth; the extra memory is under 2 MiB."""
    cdef intp_t n = rows * cols, off
    if n * 8 < 8 * _HUGE_PAGE:
        return np.empty((rows, cols), dtype=np.int64)
    raw = np.empty(n + _HUGE_PAGE // 8, dtype=np.int64)
    off = ((_HUGE_PAGE - <intp_t>cnp.PyArray_DATA(<cnp.ndarray>raw) % _HUGE_PAGE) % _HUGE_PAGE) // 8
    return raw[off:off + n].reshape(rows, cols)


cdef dict _pack(const token_t **src, object lengths, intp_t n, intp_t L, int64_t pad):
    """Place and fill (lengths already truncated and checked against L)."""
    row, offset = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
    by_row, row_start = np.empty(max(n, 1), dtype=np.int64), np.empty(n + 1, dtype=np.int64)
    cdef const int64_t *len_p = <const int64_t *>cnp.PyArray_DATA(<cnp.ndarray>lengths)
    cdef int64_t *row_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>row)
    cdef int64_t *off_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>offset)
    cdef int64_t *by_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>by_row)
    cdef int64_t *start_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>row_start)
    cdef intp_t n_rows = 0
    cdef int status
    with nogil:
        status = _first_fit_decreasing(len_p, n, L, row_p, off_p, by_p, start_p, &n_rows)
    if status == -2:
        raise RuntimeError("pack_sequences: internal error, the row tree ran out of rows; "
                           "please report it with the sequence lengths and max_length")
    if status != 0:
        raise MemoryError("pack_sequences: out of memory")
    ids = _huge_aligned_empty(n_rows, L)
    att = _huge_aligned_empty(n_rows, L)
    pos = _huge_aligned_empty(n_rows, L)
    sid = _huge_aligned_empty(n_rows, L)
    cdef int64_t *ids_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>ids)
    cdef int64_t *att_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>att)
    cdef int64_t *pos_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>pos)
    cdef int64_t *sid_p = <int64_t *>cnp.PyArray_DATA(<cnp.ndarray>sid)
    with nogil:
        _fill(src, len_p, by_p, start_p, n_rows, L, pad, ids_p, att_p, pos_p, sid_p, _num_threads)
    return {"input_ids": ids, "attention_mask": att, "position_ids": pos, "sequence_ids": sid,
            "placement": np.stack([row, offset], axis=1), "lengths": lengths}
