# MmapReplayBuffer: the newest transitions in the ReplayBuffer ring of rlox/_ext/buffers.pxd,
# the older ones spilled to a second ring of the same row layout in a memory-mapped file, whose
# format (header, cold ring, hot snapshot) is below.
from libc.string cimport memcpy, memset
from _types cimport float32_t, intp_t, uint32_t, uint64_t
from _checks cimport positive_int
from rlox._ext.buffers cimport ReplayBuffer, ring_t, _move_rows
import json
import os
import warnings

import numpy as np
cimport numpy as cnp

cnp.import_array()

MMAP_FORMAT_VERSION = 1         # MmapReplayBuffer's cold file
MMAP_MAGIC = b"RLOXRPL1"
MMAP_HEADER_BYTES = 4096
MMAP_META_OFFSET = 128


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
