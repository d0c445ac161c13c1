# LLM post-training kernels: GRPO group advantages and token-level KL estimators.
#
# Public functions are re-exported by rlox/llm.py (docs/llm.md has the dtype/shape table).
# Pattern: a thin ``def`` validates and normalises its inputs, then a ``noexcept nogil`` helper
# runs over raw buffers (prange over groups / sequences / token blocks for large inputs).
# The float32 KL rows are reduced by the fused C kernels of rlox_llm.h.
from cython.parallel cimport prange
from libc.math cimport sqrt, expm1, fabs, isfinite, INFINITY
from _types cimport float64_t, float32_t, int64_t, intp_t, uint8_t, floating_t
from _checks cimport as_array, real_array, positive_int
import numpy as np
cimport numpy as cnp

include "_threads.pxi"

cnp.import_array()

cdef extern from "rlox_llm.h" nogil:
    double rlox_kl_row_f32(int estimator, const float *lp, const float *lq,
                           const uint8_t *mask, int64_t n, int64_t *count)
    void rlox_kl_tokens_f32(int estimator, const float *lp, const float *lq,
                            const uint8_t *mask, int64_t n, float *out)
    int rlox_llm_set_simd(int enable)

# The float32 KL kernels use their AVX2 code when the CPU has AVX2 and FMA (chosen once, here).
rlox_llm_set_simd(1)


def _set_kl_simd(bint enable):
    """Testing hook: run the float32 KL kernels on their AVX2 code (``True``, when the CPU has
    it) or on the portable code (``False``). Returns whether the AVX2 code is now in use. Not
    thread-safe: call it only while no KL kernel runs."""
    return bool(rlox_llm_set_simd(enable))

# Inputs smaller than these run serially (an OpenMP fork/join costs a few microseconds).
cdef enum:
    PAR_MIN_ADV = 65536        # rewards
    PAR_MIN_KL = 32768         # tokens
    TOKEN_BLOCK = 8192         # tokens per prange task of the per-token form

cdef enum:
    SCALE_GROUP = 0
    SCALE_BATCH = 1
    SCALE_NONE = 2

# True/False: the boolean ``scale_rewards`` of older TRL releases.
cdef dict _SCALES = {"group": SCALE_GROUP, "batch": SCALE_BATCH, "none": SCALE_NONE,
                     True: SCALE_GROUP, False: SCALE_NONE}
cdef dict _ESTIMATORS = {"k1": 1, "k2": 2, "k3": 3}
cdef dict _REDUCTIONS = {"sum": 0, "mean": 1}


# ------------------------------------------------------------------------------------ helpers
cdef inline object _real(object x, str name, object dtype):
    """x as a native, aligned, C-contiguous array of ``dtype`` (float32/float64); any real dtype
    converts (a copy when it differs), anything else raises TypeError naming the argument."""
    return real_array(x, name, cnp.NPY_FLOAT if dtype is np.float32 else cnp.NPY_DOUBLE)


cdef object _mask_array(object mask, tuple shape, tuple alt_shape):
    """mask as flat C-contiguous uint8 (nonzero = the token counts); its shape must be ``shape``
    or ``alt_shape`` (the same tokens as ``[B, T]`` when the log-probs are flat)."""
    m = as_array(mask, "mask")
    if m.shape != shape and m.shape != alt_shape:
        expected = f"{shape}" if alt_shape == shape else f"{shape} or {alt_shape}"
        raise ValueError(f"mask has shape {m.shape}, expected {expected} (the shape of log_p; "
                         f"1 = count the token, 0 = padding)")
    if m.dtype == np.bool_ or m.dtype == np.uint8:
        return np.ascontiguousarray(m).reshape(-1).view(np.uint8)
    if m.dtype.kind not in "iuf":
        raise TypeError(f"mask has dtype {m.dtype}, expected bool, integer or float (0/1)")
    return np.ascontiguousarray(m != 0).reshape(-1).view(np.uint8)


cdef int _reduction_code(object reduction) except -1:
    code = _REDUCTIONS.get(reduction) if isinstance(reduction, str) else None
    if code is None:
        raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")
    return code


# ---------------------------------------------------------------------------- group advantages
cdef void _group_row(const floating_t *r, floating_t *out, intp_t g, int scale, double eps,
                     double batch_std) noexcept nogil:
    """IN r [g]; OUT out [g]: one group's advantages (sums in float64)."""
    cdef intp_t i
    cdef double mean = 0.0, ss = 0.0, d, denom = 1.0, inv
    cdef bint all_equal = True
    for i in range(g):
        mean += r[i]
        all_equal = all_equal & (r[i] == r[0])
    if all_equal:
        # a single completion, or every reward equal: no signal, exactly zero advantage
        # (a NaN reward compares unequal, so it propagates instead of being hidden)
        for i in range(g):
            out[i] = 0
        return
    mean /= g
    if scale == SCALE_GROUP:
        for i in range(g):
            d = r[i] - mean
            ss += d * d
        denom = sqrt(ss / (g - 1)) + eps
    elif scale == SCALE_BATCH:
        denom = batch_std + eps
    inv = 1.0 / denom          # one division per group (within 2 ulp of dividing each value)
    for i in range(g):
        out[i] = <floating_t>((r[i] - mean) * inv)


cdef double _sample_std(const floating_t *r, intp_t n) noexcept nogil:
    """Standard deviation with ddof=1 (0 for fewer than two values), two passes in float64."""
    cdef intp_t i
    cdef double mean = 0.0, ss = 0.0, d
    if n < 2:
        return 0.0
    for i in range(n):
        mean += r[i]
    mean /= n
    for i in range(n):
        d = r[i] - mean
        ss += d * d
    return sqrt(ss / (n - 1))


cdef void _group_advantages(const floating_t *r, floating_t *out, intp_t n, intp_t g, int scale,
                            double eps, int n_threads) noexcept nogil:
    """IN r [n]; OUT out [n]; n_groups = n / g groups of g, prange over groups."""
    cdef intp_t n_groups = n // g, k
    cdef double batch_std = _sample_std(r, n) if scale == SCALE_BATCH else 0.0
    if n >= PAR_MIN_ADV and n_groups > 1 and n_threads > 1:
        for k in prange(n_groups, nogil=True, schedule="static", num_threads=n_threads):
            _group_row(r + k * g, out + k * g, g, scale, eps, batch_std)
    else:
        for k in range(n_groups):
            _group_row(r + k * g, out + k * g, g, scale, eps, batch_std)


cdef object _advantages(object rewards, object group_size, double eps, object scale):
    arr = as_array(rewards, "rewards")
    # float32 stays float32 (any byte order), the rest float64
    arr = _real(arr, "rewards", np.float32 if arr.dtype.type is np.float32 else np.float64)
    if arr.ndim != 1:
        raise ValueError(f"rewards must be 1-D [n_prompts * group_size], got shape {arr.shape}; "
                         f"flatten a [n_prompts, group_size] matrix with .reshape(-1)")
    code = _SCALES.get(scale) if isinstance(scale, (str, bool)) else None
    if code is None:
        raise ValueError(f"scale must be 'group', 'batch' or 'none', got {scale!r}")
    if not (isfinite(eps) and eps >= 0.0):
        raise ValueError(f"eps must be a finite number >= 0, got {eps}")
    cdef intp_t n = arr.shape[0], g
    if group_size is None:
        g = n if n > 0 else 1
    else:
        g = positive_int(group_size, "group_size")
        if n % g != 0:
            raise ValueError(f"rewards has length {n}, which group_size={g} does not divide; "
                             f"the length must be n_prompts * group_size")
    out = np.empty_like(arr)
    cdef void *rp = cnp.PyArray_DATA(<cnp.ndarray>arr)
    cdef void *op = cnp.PyArray_DATA(<cnp.ndarray>out)
    cdef int sc = code
    cdef bint f32 = arr.dtype == np.float32
    with nogil:
        if f32:
            _group_advantages[float](<float *>rp, <float *>op, n, g, sc, eps, _num_threads)
        else:
            _group_advantages[double](<double *>rp, <double *>op, n, g, sc, eps, _num_threads)
    return out


def compute_group_advantages(rewards, double eps=1e-4, scale="group"):
    """GRPO advantages of one group of completions of the same prompt.

    ``(r - mean(r)) / (std(r) + eps)`` with the sample standard deviation (ddof=1), the formula
    of TRL's GRPOTrainer. A group whose rewards are all equal, or of size one, gets zeros.

    Args:
        rewards: ``[G]``; float32 stays float32, any other real dtype (and lists) become float64.
        eps: added to the std (TRL: 1e-4).
        scale: ``"group"`` (divide by the std), ``"batch"`` (the same here: the batch is the
            group) or ``"none"`` (mean-centred only, Dr. GRPO). ``True``/``False`` mean
            ``"group"``/``"none"`` (older TRL's boolean ``scale_rewards``).

    Returns:
        ``[G]`` advantages, the dtype of ``rewards`` (sums are accumulated in float64).
    """
    return _advantages(rewards, None, eps, scale)


def compute_batch_group_advantages(rewards, group_size, double eps=1e-4, scale="group"):
    """GRPO advantages of a whole batch of groups in one call (prange over groups).

    Args:
        rewards: ``[n_prompts * group_size]``, completions of prompt ``p`` at
            ``p * group_size : (p + 1) * group_size`` (TRL's layout). float32 stays float32, any
            other real dtype becomes float64.
        group_size: completions per prompt (TRL's ``num_generations``); must divide the length.
        eps: added to the std (TRL: 1e-4).
        scale: ``"group"``: ``(r - group mean) / (group std + eps)``; ``"batch"``:
            ``(r - group mean) / (std of the whole batch + eps)``; ``"none"``: ``r - group mean``
            (Dr. GRPO). Standard deviations are sample ones (ddof=1), as ``torch.std``.

    Returns:
        ``[n_prompts * group_size]`` advantages, the dtype of ``rewards``. Groups whose rewards
        are all equal, or of size one, get exactly 0. Sums are accumulated in float64.
    """
    return _advantages(rewards, group_size, eps, scale)


# ------------------------------------------------------------------------------- token KL, f64
cdef inline double _k3_64(double x) noexcept nogil:
    """exp(x) - x - 1 in float64 to a few ulp. expm1(x) - x still cancels as x -> 0 (relative
    error 3e-11 at x = 1e-5), so |x| < 0.1 takes the Taylor series up to x^11 (truncation
    below 1e-16 relative). +inf at x = +inf, where the plain formula gives inf - inf = NaN
    (the float32 kernel does the same)."""
    if fabs(x) < 0.1:
        return x * x * (1.0 / 2 + x * (1.0 / 6 + x * (1.0 / 24 + x * (1.0 / 120 + x * (
            1.0 / 720 + x * (1.0 / 5040 + x * (1.0 / 40320 + x * (1.0 / 362880 + x * (
            1.0 / 3628800 + x / 39916800)))))))))
    if x == INFINITY:
        return INFINITY
    return expm1(x) - x


cdef inline double _est64(int est, double lp, double lq) noexcept nogil:
    cdef double d = lp - lq
    if est == 1:
        return d
    if est == 2:
        return 0.5 * d * d
    return _k3_64(-d)


cdef double _row64(int est, const float64_t *lp, const float64_t *lq, const uint8_t *mask,
                   intp_t n, int64_t *count) noexcept nogil:
    """Sum of one estimator over one row; *count receives the number of counted tokens."""
    cdef intp_t i
    cdef int64_t c = 0
    cdef double total = 0.0
    if mask == NULL:
        if est == 1:
            for i in range(n):
                total += lp[i] - lq[i]
        elif est == 2:
            for i in range(n):
                total += 0.5 * (lp[i] - lq[i]) * (lp[i] - lq[i])
        else:
            for i in range(n):
                total += _k3_64(lq[i] - lp[i])
        c = n
    else:
        for i in range(n):
            if mask[i] != 0:
                total += _est64(est, lp[i], lq[i])
                c += 1
    count[0] = c
    return total


cdef inline double _row(bint f32, int est, const char *lp, const char *lq, const uint8_t *mask,
                        intp_t n, int64_t *count) noexcept nogil:
    if f32:
        return rlox_kl_row_f32(est, <const float *>lp, <const float *>lq, mask, n, count)
    return _row64(est, <const float64_t *>lp, <const float64_t *>lq, mask, n, count)


cdef inline const uint8_t *_at(const uint8_t *mask, intp_t off) noexcept nogil:
    """mask + off, or NULL when there is no mask."""
    if mask == NULL:
        return NULL
    return mask + off


cdef inline double _reduced_row(bint f32, int est, int reduction, const char *lp,
                                const char *lq, const uint8_t *mask, intp_t n) noexcept nogil:
    """One row's sum, or its mean over the counted tokens (0.0 when none count)."""
    cdef int64_t c = 0
    cdef double s = _row(f32, est, lp, lq, mask, n, &c)
    if reduction == 1:
        return s / c if c > 0 else 0.0
    return s


cdef void _batch_rows(bint f32, int est, int reduction, const char *lp, const char *lq,
                      const uint8_t *mask, const int64_t *lengths, intp_t n_seq, intp_t seq_len,
                      double *out, int n_threads) noexcept nogil:
    """IN lp, lq (and mask) [n_seq * seq_len], lengths [n_seq] or NULL; OUT out [n_seq]."""
    cdef intp_t b, off
    cdef intp_t item = 4 if f32 else 8
    if n_seq > 1 and n_seq * seq_len >= PAR_MIN_KL and n_threads > 1:
        for b in prange(n_seq, nogil=True, schedule="static", num_threads=n_threads):
            off = b * seq_len
            out[b] = _reduced_row(f32, est, reduction, lp + off * item, lq + off * item,
                                  _at(mask, off), seq_len if lengths == NULL else lengths[b])
    else:
        for b in range(n_seq):
            off = b * seq_len
            out[b] = _reduced_row(f32, est, reduction, lp + off * item, lq + off * item,
                                  _at(mask, off), seq_len if lengths == NULL else lengths[b])


cdef tuple _pair(object log_p, object log_q, object dtype):
    lp = _real(log_p, "log_p", dtype)
    lq = _real(log_q, "log_q", dtype)
    if lp.shape != lq.shape:
        raise ValueError(f"log_p has shape {lp.shape} but log_q has shape {lq.shape}; "
                         f"they must match (one log-probability per token)")
    return lp, lq


cdef object _single(object log_p, object log_q, object mask, object reduction, int est,
                    bint f32, str fname):
    lp, lq = _pair(log_p, log_q, np.float32 if f32 else np.float64)
    if lp.ndim != 1:
        raise ValueError(f"log_p must be 1-D [T] (one sequence), got shape {lp.shape}; use "
                         f"{fname.replace('compute_token', 'compute_batch_token')} for a batch")
    cdef int red = _reduction_code(reduction)
    cdef intp_t n = lp.shape[0]
    cdef const uint8_t *mp = NULL
    cdef double s
    if mask is not None:
        m = _mask_array(mask, lp.shape, lp.shape)
        mp = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>m)
    cdef const char *a = <const char *>cnp.PyArray_DATA(<cnp.ndarray>lp)
    cdef const char *b = <const char *>cnp.PyArray_DATA(<cnp.ndarray>lq)
    with nogil:
        s = _reduced_row(f32, est, red, a, b, mp, n)
    return s


cdef object _batch(object log_p, object log_q, object seq_len, object mask, object lengths,
                   object reduction, int est, bint f32):
    lp, lq = _pair(log_p, log_q, np.float32 if f32 else np.float64)
    cdef intp_t T, B
    if lp.ndim == 2:
        B, T = lp.shape[0], lp.shape[1]
        if seq_len is not None and seq_len != T:
            raise ValueError(f"seq_len={seq_len!r} but log_p has shape {lp.shape}; for 2-D "
                             f"[B, T] input seq_len must be T or None")
    elif lp.ndim == 1:
        if seq_len is None:
            raise ValueError(f"seq_len is required for flat [B * T] log_p (got shape {lp.shape})")
        T = positive_int(seq_len, "seq_len")
        if lp.shape[0] % T != 0:
            raise ValueError(f"log_p has length {lp.shape[0]}, which seq_len={T} does not "
                             f"divide; the length must be n_sequences * seq_len")
        B = lp.shape[0] // T
    else:
        raise ValueError(f"log_p must be flat [B * T] or 2-D [B, T], got shape {lp.shape}")
    cdef int red = _reduction_code(reduction)
    cdef const uint8_t *mp = NULL
    cdef const int64_t *lenp = NULL
    if mask is not None and lengths is not None:
        raise ValueError("pass either mask or lengths, not both")
    if mask is not None:
        m = _mask_array(mask, lp.shape, (B, T))
        mp = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>m)
    if lengths is not None:
        la = as_array(lengths, "lengths")
        if la.dtype.kind not in "iu":
            raise TypeError(f"lengths has dtype {la.dtype}, expected an integer dtype")
        if la.shape != (B,):
            raise ValueError(f"lengths has shape {la.shape}, expected ({B},): one length per "
                             f"sequence")
        if B > 0 and (la.min() < 0 or la.max() > T):
            raise ValueError(f"lengths must lie in [0, seq_len={T}], got values in "
                             f"[{la.min()}, {la.max()}]")
        la = np.ascontiguousarray(la, dtype=np.int64)
        lenp = <const int64_t *>cnp.PyArray_DATA(<cnp.ndarray>la)
    out = np.empty(B, dtype=np.float64)
    cdef const char *a = <const char *>cnp.PyArray_DATA(<cnp.ndarray>lp)
    cdef const char *b = <const char *>cnp.PyArray_DATA(<cnp.ndarray>lq)
    cdef double *op = <double *>cnp.PyArray_DATA(<cnp.ndarray>out)
    with nogil:
        _batch_rows(f32, est, red, a, b, mp, lenp, B, T, op, _num_threads)
    return out.astype(np.float32) if f32 else out


_SINGLE_DOC = """{name}(log_p, log_q, mask=None, reduction="sum")

    {what} of one sequence, summed over its tokens.

    ``{formula}`` per token, with ``log_p`` the policy's and ``log_q`` the reference model's
    log-probabilities of the sampled tokens.

    Args:
        log_p: ``[T]``, {dtype} (other real dtypes are converted, one copy).
        log_q: ``[T]``, same length.
        mask: optional ``[T]`` bool/uint8 (or 0/1 numbers): only tokens with a nonzero mask count.
        reduction: ``"sum"`` (default) or ``"mean"`` over the counted tokens (0.0 when none).

    Returns:
        float.
    """

_BATCH_DOC = """{name}(log_p, log_q, seq_len=None, mask=None, lengths=None, reduction="sum")

    {what} of every sequence of a batch in one call (prange over sequences).

    ``{formula}`` per token, fused in one pass without temporaries.

    Args:
        log_p: flat ``[B * seq_len]`` or ``[B, T]``, {dtype} (other real dtypes are converted,
            one copy).
        log_q: same shape.
        seq_len: ``T``; required for flat input, optional (must equal ``T``) for 2-D input.
        mask: optional, shape of ``log_p`` (or ``[B, T]`` for flat ``log_p``); bool/uint8 (or 0/1
            numbers). Tokens with a zero mask do not count (padding), and their values never
            reach the sum (a NaN under the mask is harmless).
        lengths: optional ``[B]`` integers in ``[0, T]``: only the first ``lengths[b]`` tokens of
            sequence ``b`` count (right padding). Not together with ``mask``.
        reduction: ``"sum"`` (default) or ``"mean"`` over the counted tokens (0.0 when none).

    Returns:
        ``[B]`` {dtype}: one value per sequence (accumulated in float64).{extra}
    """

_F32_EXTRA = ("\n\n    The float32 kernel runs our vectorised float32 exp (relative error about 1e-7,"
              "\n    accurate also for tiny differences); each row is summed in float32 lanes"
              "\n    flushed into a float64 total every 1024 tokens.")

_K1 = ("KL estimate k1", "log_p - log_q")
_K2 = ("KL estimate k2", "0.5 * (log_p - log_q) ** 2")
_K3 = ("Schulman's k3 KL estimate (TRL's GRPO per-token KL)",
       "exp(log_q - log_p) - (log_q - log_p) - 1")


def compute_token_kl(log_p, log_q, mask=None, reduction="sum"):
    return _single(log_p, log_q, mask, reduction, 1, False, "compute_token_kl")


def compute_token_kl_f32(log_p, log_q, mask=None, reduction="sum"):
    return _single(log_p, log_q, mask, reduction, 1, True, "compute_token_kl_f32")


def compute_token_kl_squared(log_p, log_q, mask=None, reduction="sum"):
    return _single(log_p, log_q, mask, reduction, 2, False, "compute_token_kl_squared")


def compute_token_kl_squared_f32(log_p, log_q, mask=None, reduction="sum"):
    return _single(log_p, log_q, mask, reduction, 2, True, "compute_token_kl_squared_f32")


def compute_token_kl_schulman(log_p, log_q, mask=None, reduction="sum"):
    return _single(log_p, log_q, mask, reduction, 3, False, "compute_token_kl_schulman")


def compute_token_kl_schulman_f32(log_p, log_q, mask=None, reduction="sum"):
    return _single(log_p, log_q, mask, reduction, 3, True, "compute_token_kl_schulman_f32")


def compute_batch_token_kl(log_p, log_q, seq_len=None, mask=None, lengths=None, reduction="sum"):
    return _batch(log_p, log_q, seq_len, mask, lengths, reduction, 1, False)


def compute_batch_token_kl_f32(log_p, log_q, seq_len=None, mask=None, lengths=None,
                               reduction="sum"):
    return _batch(log_p, log_q, seq_len, mask, lengths, reduction, 1, True)


def compute_batch_token_kl_squared(log_p, log_q, seq_len=None, mask=None, lengths=None,
                                   reduction="sum"):
    return _batch(log_p, log_q, seq_len, mask, lengths, reduction, 2, False)


def compute_batch_token_kl_squared_f32(log_p, log_q, seq_len=None, mask=None, lengths=None,
                                       reduction="sum"):
    return _batch(log_p, log_q, seq_len, mask, lengths, reduction, 2, True)


def compute_batch_token_kl_schulman(log_p, log_q, seq_len=None, mask=None, lengths=None,
                                    reduction="sum"):
    return _batch(log_p, log_q, seq_len, mask, lengths, reduction, 3, False)


def compute_batch_token_kl_schulman_f32(log_p, log_q, seq_len=None, mask=None, lengths=None,
                                        reduction="sum"):
    return _batch(log_p, log_q, seq_len, mask, lengths, reduction, 3, True)


for _f, _k, _dt in [
    (compute_token_kl, _K1, "float64"), (compute_token_kl_f32, _K1, "float32"),
    (compute_token_kl_squared, _K2, "float64"), (compute_token_kl_squared_f32, _K2, "float32"),
    (compute_token_kl_schulman, _K3, "float64"), (compute_token_kl_schulman_f32, _K3, "float32"),
]:
    _f.__doc__ = _SINGLE_DOC.format(name=_f.__name__, what=_k[0], formula=_k[1], dtype=_dt)
for _f, _k, _dt in [
    (compute_batch_token_kl, _K1, "float64"), (compute_batch_token_kl_f32, _K1, "float32"),
    (compute_batch_token_kl_squared, _K2, "float64"),
    (compute_batch_token_kl_squared_f32, _K2, "float32"),
    (compute_batch_token_kl_schulman, _K3, "float64"),
    (compute_batch_token_kl_schulman_f32, _K3, "float32"),
]:
    _f.__doc__ = _BATCH_DOC.format(name=_f.__name__, what=_k[0], formula=_k[1], dtype=_dt,
                                   extra=_F32_EXTRA if _dt == "float32" else "")


# --------------------------------------------------------------------------- per-token (B, T)
cdef void _tokens64(int est, const float64_t *lp, const float64_t *lq, const uint8_t *mask,
                    intp_t n, float64_t *out) noexcept nogil:
    cdef intp_t i
    for i in range(n):
        out[i] = _est64(est, lp[i], lq[i]) if (mask == NULL or mask[i] != 0) else 0.0


cdef void _tokens_block(bint f32, int est, const char *lp, const char *lq, const uint8_t *mask,
                        intp_t start, intp_t n, char *out) noexcept nogil:
    """Tokens [start, start + n) of the flat arrays."""
    if f32:
        rlox_kl_tokens_f32(est, <const float *>lp + start, <const float *>lq + start,
                           _at(mask, start), n, <float *>out + start)
    else:
        _tokens64(est, <const float64_t *>lp + start, <const float64_t *>lq + start,
                  _at(mask, start), n, <float64_t *>out + start)


cdef void _tokens(bint f32, int est, const char *lp, const char *lq, const uint8_t *mask,
                  intp_t n, char *out, int n_threads) noexcept nogil:
    """IN lp, lq (and mask) [n]; OUT out [n]; prange over blocks of TOKEN_BLOCK tokens."""
    cdef intp_t n_blocks = (n + TOKEN_BLOCK - 1) // TOKEN_BLOCK, k, start
    if n >= PAR_MIN_KL and n_threads > 1:
        for k in prange(n_blocks, nogil=True, schedule="static", num_threads=n_threads):
            start = k * TOKEN_BLOCK
            _tokens_block(f32, est, lp, lq, mask, start,
                          TOKEN_BLOCK if n - start > TOKEN_BLOCK else n - start, out)
    else:
        _tokens_block(f32, est, lp, lq, mask, 0, n, out)


def compute_token_kl_per_token(log_p, log_q, estimator="k3", mask=None, seq_len=None):
    """Per-token KL values, for use inside a loss (no reduction).

    Args:
        log_p: ``[B, T]``, or flat ``[B * T]`` with ``seq_len``, or ``[T]``. float32 when both
            inputs are float32, otherwise float64 (other real dtypes are converted).
        log_q: same shape.
        estimator: ``"k1"`` (``log_p - log_q``), ``"k2"`` (``0.5 * (log_p - log_q) ** 2``) or
            ``"k3"`` (``exp(log_q - log_p) - (log_q - log_p) - 1``, TRL's GRPO per-token KL).
        mask: optional, shape of ``log_p`` (or ``[B, seq_len]``); masked-off tokens get exactly 0.
        seq_len: reshape flat input to ``[B, seq_len]``.

    Returns:
        ``[B, T]`` (``[T]`` for 1-D input without ``seq_len``). Wrap it with
        ``torch.from_numpy`` (zero copy) to use it in a torch loss.
    """
    est = _ESTIMATORS.get(estimator) if isinstance(estimator, str) else None
    if est is None:
        raise ValueError(f"estimator must be 'k1', 'k2' or 'k3', got {estimator!r}")
    a_p, a_q = as_array(log_p, "log_p"), as_array(log_q, "log_q")
    dtype = np.float32 if a_p.dtype.type is np.float32 and a_q.dtype.type is np.float32 else np.float64
    lp, lq = _pair(a_p, a_q, dtype)
    if lp.ndim > 2:
        raise ValueError(f"log_p must be [T], [B * T] or [B, T], got shape {lp.shape}")
    shape = lp.shape
    if seq_len is not None:
        T = positive_int(seq_len, "seq_len")
        if lp.ndim == 2 and T != lp.shape[1]:
            raise ValueError(f"seq_len={T} but log_p has shape {lp.shape}; for 2-D [B, T] "
                             f"input seq_len must be T or None")
        if lp.size % T != 0:
            raise ValueError(f"log_p has length {lp.size}, which seq_len={T} does not "
                             f"divide; the length must be n_sequences * seq_len")
        shape = (lp.size // T, T)
    cdef const uint8_t *mp = NULL
    if mask is not None:
        m = _mask_array(mask, lp.shape, shape)
        mp = <const uint8_t *>cnp.PyArray_DATA(<cnp.ndarray>m)
    out = np.empty(shape, dtype=dtype)
    cdef const char *a = <const char *>cnp.PyArray_DATA(<cnp.ndarray>lp)
    cdef const char *b = <const char *>cnp.PyArray_DATA(<cnp.ndarray>lq)
    cdef char *o = <char *>cnp.PyArray_DATA(<cnp.ndarray>out)
    cdef intp_t n = lp.size
    cdef bint f32 = dtype is np.float32
    cdef int est_c = est
    with nogil:
        _tokens(f32, est_c, a, b, mp, n, o, _num_threads)
    return out
