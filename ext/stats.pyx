# Running statistics: Welford's update and Chan et al.'s parallel merge.
#
# RunningStats tracks one scalar stream; RunningStatsVec tracks each dimension of a vector
# stream (observations for VecNormalize). Variances are population variances (ddof=0).
from libc.math cimport sqrt, isfinite
from _types cimport float32_t, float64_t, int64_t
from _checks cimport real_array
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"


cdef inline object _real(object x, str name):
    return real_array(x, name, cnp.NPY_DOUBLE)


cdef class RunningStats:
    """Mean and variance of a scalar stream, one pass, numerically stable.

    >>> s = RunningStats(); s.batch_update(np.array([1.0, 2.0, 3.0])); s.mean(), s.std()
    (2.0, 0.816...)
    """
    cdef int64_t _count      # samples seen
    cdef double _mean        # running mean
    cdef double _m2          # sum of squared deviations from the mean

    def __init__(self):
        self.reset()

    def reset(self):
        """Forget every sample."""
        self._count = 0
        self._mean = 0.0
        self._m2 = 0.0

    def update(self, double x):
        """Add one sample (Welford)."""
        if not isfinite(x):
            raise ValueError(f"RunningStats.update got a non-finite sample {x}")
        self._count += 1
        cdef double delta = x - self._mean
        self._mean += delta / self._count
        self._m2 += delta * (x - self._mean)

    cdef void _merge(self, int64_t n_b, double mean_b, double m2_b) noexcept:
        if n_b == 0:
            return
        cdef int64_t n = self._count + n_b
        cdef double delta = mean_b - self._mean
        self._m2 += m2_b + delta * delta * (<double>self._count * n_b / n)
        self._mean += delta * n_b / n
        self._count = n

    def batch_update(self, values):
        """Add a batch of samples (any shape; flattened): batch moments, then Chan's merge."""
        arr = _real(values, "values").reshape(-1)
        cdef const float64_t[::1] x = arr
        cdef Py_ssize_t i, n = x.shape[0]
        cdef double mean = 0.0, m2 = 0.0, d
        if n == 0:
            return
        with nogil:
            for i in range(n):
                mean += x[i]
            mean /= n
            for i in range(n):
                d = x[i] - mean
                m2 += d * d
        if not isfinite(mean) or not isfinite(m2):
            raise ValueError("RunningStats.batch_update got non-finite samples")
        self._merge(n, mean, m2)

    def merge(self, RunningStats other):
        """Fold another RunningStats into this one (as if its samples were added here)."""
        self._merge(other._count, other._mean, other._m2)

    def mean(self):
        """Mean of the samples (0.0 when empty)."""
        return self._mean

    def var(self):
        """Population variance (0.0 with fewer than one sample)."""
        return self._m2 / self._count if self._count > 0 else 0.0

    def std(self):
        """Population standard deviation."""
        return sqrt(self.var())

    def count(self):
        """Number of samples seen."""
        return self._count

    def state_dict(self):
        """Statistics as plain numbers (for JSON or safetensors; no pickle)."""
        return {"count": int(self._count), "mean": float(self._mean), "m2": float(self._m2)}

    def load_state_dict(self, state):
        """Restore from ``state_dict()``."""
        count = int(state["count"])
        if count < 0:
            raise ValueError(f"state count must be >= 0, got {count}")
        self._count, self._mean, self._m2 = count, float(state["mean"]), float(state["m2"])

    def __repr__(self):
        return f"RunningStats(count={self._count}, mean={self._mean:.6g}, std={self.std():.6g})"


cdef class RunningStatsVec:
    """Per-dimension mean and variance of a stream of vectors [dim].

    ``update`` takes one vector [dim] or a batch [B, dim]; ``normalize`` applies
    (x - mean) / sqrt(var + eps), optionally clipped, in one pass.
    """
    cdef readonly Py_ssize_t dim      # vector length
    cdef int64_t _count               # vectors seen
    cdef object _mean_arr             # float64 [dim]
    cdef object _m2_arr               # float64 [dim], sums of squared deviations

    def __init__(self, dim):
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim <= 0:
            raise ValueError(f"dim must be a positive int, got {dim!r}")
        self.dim = dim
        self.reset()

    def reset(self):
        """Forget every sample."""
        self._count = 0
        self._mean_arr = np.zeros(self.dim, dtype=np.float64)
        self._m2_arr = np.zeros(self.dim, dtype=np.float64)

    cdef object _as_batch(self, x, str name):
        arr = _real(x, name)
        if arr.ndim == 1:
            arr = arr.reshape(1, -1)
        if arr.ndim != 2 or arr.shape[1] != self.dim:
            raise ValueError(f"{name} has shape {np.shape(x)}, expected ({self.dim},) or "
                             f"(batch, {self.dim})")
        return arr

    def update(self, batch):
        """Add one vector [dim] or a batch [B, dim] (batch moments, then Chan's merge)."""
        arr = self._as_batch(batch, "batch")
        cdef const float64_t[:, ::1] x = arr
        cdef float64_t[::1] mean = self._mean_arr, m2 = self._m2_arr
        cdef Py_ssize_t B = x.shape[0], D = x.shape[1], i, j
        if B == 0:
            return
        if not np.all(np.isfinite(arr)):
            raise ValueError("RunningStatsVec.update got non-finite samples")
        cdef double n_a = <double>self._count, n = n_a + B, bm, bm2, d
        with nogil:
            for j in range(D):
                bm = 0.0
                for i in range(B):
                    bm += x[i, j]
                bm /= B
                bm2 = 0.0
                for i in range(B):
                    d = x[i, j] - bm
                    bm2 += d * d
                d = bm - mean[j]
                m2[j] += bm2 + d * d * (n_a * B / n)
                mean[j] += d * B / n
        self._count += B

    def merge(self, RunningStatsVec other):
        """Fold another RunningStatsVec of the same dim into this one."""
        if other.dim != self.dim:
            raise ValueError(f"cannot merge RunningStatsVec of dim {other.dim} into dim {self.dim}")
        if other._count == 0:
            return
        n_a, n_b = self._count, other._count
        n = n_a + n_b
        delta = other._mean_arr - self._mean_arr
        self._m2_arr += other._m2_arr + delta * delta * (n_a * n_b / n)
        self._mean_arr += delta * (n_b / n)
        self._count = n

    def mean(self):
        """Per-dimension mean [dim] (a copy)."""
        return self._mean_arr.copy()

    def var(self):
        """Per-dimension population variance [dim]."""
        if self._count == 0:
            return np.zeros(self.dim, dtype=np.float64)
        return self._m2_arr / self._count

    def std(self):
        """Per-dimension population standard deviation [dim]."""
        return np.sqrt(self.var())

    def count(self):
        """Number of vectors seen."""
        return self._count

    def normalize(self, x, clip=None, double eps=1e-8):
        """(x - mean) / sqrt(var + eps), clipped to [-clip, clip] when clip is given.

        x: [dim] or [B, dim]; float32 input gives float32 output, anything else float64.
        """
        if not isfinite(eps) or eps < 0:
            raise ValueError(f"eps must be a finite number >= 0, got {eps}")
        cdef double c = 0.0
        cdef bint do_clip = clip is not None
        if do_clip:
            c = float(clip)
            if not isfinite(c) or c <= 0:
                raise ValueError(f"clip must be a finite number > 0 or None, got {clip}")
        src = np.asarray(x)
        out_dtype = np.float32 if src.dtype == np.float32 else np.float64
        arr = self._as_batch(src, "x")
        out = np.empty(arr.shape, dtype=out_dtype)
        cdef const float64_t[:, ::1] xv = arr
        cdef const float64_t[::1] mean = self._mean_arr
        scale_arr = 1.0 / np.sqrt(self.var() + eps)
        cdef const float64_t[::1] scale = scale_arr
        cdef float32_t[:, ::1] o32
        cdef float64_t[:, ::1] o64
        cdef Py_ssize_t B = xv.shape[0], D = xv.shape[1], i, j
        cdef double y
        cdef bint f32 = out_dtype == np.float32
        if f32:
            o32 = out
        else:
            o64 = out
        with nogil:
            for i in range(B):
                for j in range(D):
                    y = (xv[i, j] - mean[j]) * scale[j]
                    if do_clip:
                        y = c if y > c else (-c if y < -c else y)
                    if f32:
                        o32[i, j] = <float>y
                    else:
                        o64[i, j] = y
        return out.reshape(src.shape) if src.ndim == 1 else out

    def state_dict(self):
        """Statistics as NumPy arrays and an int (for safetensors/JSON; no pickle)."""
        return {"count": int(self._count), "mean": self._mean_arr.copy(), "m2": self._m2_arr.copy()}

    def load_state_dict(self, state):
        """Restore from ``state_dict()``; shapes must match ``dim``."""
        mean = np.asarray(state["mean"], dtype=np.float64).reshape(-1)
        m2 = np.asarray(state["m2"], dtype=np.float64).reshape(-1)
        count = int(state["count"])
        if mean.shape[0] != self.dim or m2.shape[0] != self.dim:
            raise ValueError(f"state has mean/m2 of length {mean.shape[0]}/{m2.shape[0]}, "
                             f"expected dim {self.dim}")
        if count < 0:
            raise ValueError(f"state count must be >= 0, got {count}")
        self._count, self._mean_arr, self._m2_arr = count, mean.copy(), m2.copy()

    def __repr__(self):
        return f"RunningStatsVec(dim={self.dim}, count={self._count})"
