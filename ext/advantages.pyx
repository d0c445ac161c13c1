# Advantage estimators: GAE (Schulman et al. 2016) and V-trace (Espeholt et al. 2018).
#
# Convention for every kernel here: ``dones[t] == 1`` means the episode ended with transition t,
# so nothing is bootstrapped through it (the value after t is multiplied by zero). For a
# truncated episode the caller folds gamma * V(final obs) into rewards[t] before calling.
from cython.parallel cimport prange
from libc.math cimport exp, isfinite
from _types cimport float32_t, float64_t, floating_t
from _checks cimport outputs_pair, real_array, positive_int
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

# Below this many total steps the batched kernel runs serially (fork/join costs microseconds).
cdef enum:
    PARALLEL_MIN_STEPS = 16384


# ------------------------------------------------------------------------- argument checking
# Arrays go through _checks.real_array (dtype, byte order, alignment, contiguity in one place);
# these two names are kept for the kernels of this file.
cdef inline object _real(object x, str name, object dtype):
    """x as a native, aligned, C-contiguous array of ``dtype`` (float32/float64), or TypeError."""
    return real_array(x, name, cnp.NPY_FLOAT if dtype is np.float32 else cnp.NPY_DOUBLE)


cdef inline object _fast(object x, str name, int typenum, object dtype):
    """x itself when it is already a native array of ``typenum``, else one checked copy."""
    return real_array(x, name, typenum)


cdef inline object _empty_like(cnp.ndarray a, int typenum):
    return cnp.PyArray_EMPTY(cnp.PyArray_NDIM(a), cnp.PyArray_DIMS(a), typenum, 0)


cdef void _check_rate(double value, str name) except *:
    if not isfinite(value) or value < 0.0 or value > 1.0:
        raise ValueError(f"{name} must be a finite number in [0, 1], got {value}")


cdef object _flat(object arr, str name):
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    return arr


# ------------------------------------------------------------------------- GAE core
cdef inline void _gae_row(const floating_t* r, const floating_t* v, const floating_t* d,
                          floating_t last_value, Py_ssize_t n, floating_t gamma, floating_t lam,
                          floating_t* adv, floating_t* ret) noexcept nogil:
    """One trajectory, one fused backward pass: IN r, v, d [n]; OUT adv, ret [n].

    A_t = delta_t + c_t * A_{t+1} (c_t = gamma * lam * (1 - d_t)) is a chain of dependent
    multiply-adds. Unrolled once, A_t = delta_t + c_t * delta_{t+1} + c_t * c_{t+1} * A_{t+2}
    makes even and odd steps two independent chains, so the CPU runs them side by side.
    """
    cdef floating_t next_value = last_value, m, c, delta, a
    cdef floating_t delta_next = 0, c_next = 0     # delta_{t+1}, c_{t+1} (zero past the end)
    cdef floating_t a_next = 0, a_next2 = 0        # A_{t+1}, A_{t+2}
    cdef floating_t gl = gamma * lam
    cdef Py_ssize_t t
    for t in range(n - 1, -1, -1):
        m = 1 - d[t]
        c = gl * m
        delta = r[t] + gamma * next_value * m - v[t]
        a = delta + c * delta_next + (c * c_next) * a_next2
        adv[t] = a
        ret[t] = a + v[t]
        a_next2 = a_next
        a_next = a
        delta_next = delta
        c_next = c
        next_value = v[t]


cdef void _gae_rows(const floating_t* r, const floating_t* v, const floating_t* d,
                    const floating_t* last, Py_ssize_t n_envs, Py_ssize_t n_steps,
                    floating_t gamma, floating_t lam, floating_t* adv, floating_t* ret,
                    int n_threads) noexcept nogil:
    """Env-major rows: row e covers [e * n_steps, (e + 1) * n_steps); prange over envs."""
    cdef Py_ssize_t e, off
    if n_threads <= 1 or n_envs < 2 or n_envs * n_steps < PARALLEL_MIN_STEPS:
        for e in range(n_envs):
            off = e * n_steps
            _gae_row(r + off, v + off, d + off, last[e], n_steps, gamma, lam, adv + off, ret + off)
    else:
        for e in prange(n_envs, nogil=True, schedule="static", num_threads=n_threads):
            _gae_row(r + e * n_steps, v + e * n_steps, d + e * n_steps, last[e], n_steps,
                     gamma, lam, adv + e * n_steps, ret + e * n_steps)


def compute_gae(rewards, values, dones, last_value, gamma, lam, out=None):
    """Generalised advantage estimation for one trajectory, float64.

    rewards, values, dones: [T] (dones[t] == 1: the episode ended with transition t).
    last_value: V(s_T), the value after the last step. Returns (advantages, returns), each [T]
    float64, with returns == advantages + values. An empty trajectory gives empty arrays.
    out: optional (advantages, returns) float64 [T] arrays to write into (and return): reusing
    them across calls saves the page faults of fresh large arrays, most of a long call's time.
    """
    cdef double g = float(gamma), l = float(lam), lv = float(last_value)
    _check_rate(g, "gamma")
    _check_rate(l, "lam")
    if not isfinite(lv):
        raise ValueError(f"last_value must be finite, got {lv}")
    cdef cnp.ndarray r = _flat(_fast(rewards, "rewards", cnp.NPY_DOUBLE, np.float64), "rewards")
    cdef cnp.ndarray v = _flat(_fast(values, "values", cnp.NPY_DOUBLE, np.float64), "values")
    cdef cnp.ndarray d = _flat(_fast(dones, "dones", cnp.NPY_DOUBLE, np.float64), "dones")
    cdef Py_ssize_t n = cnp.PyArray_DIM(r, 0)
    if cnp.PyArray_DIM(v, 0) != n or cnp.PyArray_DIM(d, 0) != n:
        raise ValueError(f"rewards, values and dones must have the same length; got "
                         f"{n}, {v.shape[0]} and {d.shape[0]}")
    pair = outputs_pair(out, (<object>r).shape, cnp.NPY_DOUBLE, (r, v, d))
    cdef cnp.ndarray adv = _empty_like(r, cnp.NPY_DOUBLE) if pair is None else pair[0]
    cdef cnp.ndarray ret = _empty_like(r, cnp.NPY_DOUBLE) if pair is None else pair[1]
    if n == 0:
        return adv, ret
    with nogil:
        _gae_row[double](<double*>cnp.PyArray_DATA(r), <double*>cnp.PyArray_DATA(v),
                         <double*>cnp.PyArray_DATA(d), lv, n, g, l,
                         <double*>cnp.PyArray_DATA(adv), <double*>cnp.PyArray_DATA(ret))
    return adv, ret


cdef tuple _batched(rewards, values, dones, last_values, n_steps, gamma, lam, object dtype):
    cdef double g = float(gamma), l = float(lam)
    _check_rate(g, "gamma")
    _check_rate(l, "lam")
    cdef int typenum = cnp.NPY_FLOAT if dtype is np.float32 else cnp.NPY_DOUBLE
    r = _fast(rewards, "rewards", typenum, dtype)
    v = _fast(values, "values", typenum, dtype)
    d = _fast(dones, "dones", typenum, dtype)
    lv = _fast(last_values, "last_values", typenum, dtype).reshape(-1)
    if r.shape != v.shape or r.shape != d.shape:
        raise ValueError(f"rewards, values and dones must have the same shape; got "
                         f"{r.shape}, {v.shape} and {d.shape}")
    cdef Py_ssize_t T = positive_int(n_steps, "n_steps"), total, n_envs, i
    if r.ndim == 2:
        if r.shape[1] != T:
            raise ValueError(f"2-D inputs must have shape (n_envs, n_steps) = (?, {T}), got {r.shape}")
    elif r.ndim != 1:
        raise ValueError(f"rewards must be 1-D (env-major, n_envs * n_steps) or 2-D "
                         f"(n_envs, n_steps), got shape {r.shape}")
    total = r.size
    if total % T != 0:
        raise ValueError(f"n_steps={T} does not divide the length {total} of rewards; the flat "
                         f"arrays must hold n_envs * n_steps env-major values")
    n_envs = total // T
    if lv.shape[0] != n_envs:
        raise ValueError(f"last_values has length {lv.shape[0]}, expected n_envs = "
                         f"{total} // {T} = {n_envs}")
    for i in range(n_envs):
        if not isfinite(lv[i]):
            raise ValueError(f"last_values must be finite, got {lv[i]} at index {i}")
    return r, v, d, lv, g, l, n_envs, T


cdef tuple _gae_batched(rewards, values, dones, last_values, n_steps, gamma, lam, bint f32, out):
    """Shared body of the two batched entry points (f32 selects the float32 kernel)."""
    dtype = np.float32 if f32 else np.float64
    cdef int typenum = cnp.NPY_FLOAT if f32 else cnp.NPY_DOUBLE
    r, v, d, lv, g, l, n_envs, T = _batched(rewards, values, dones, last_values, n_steps,
                                           gamma, lam, dtype)
    pair = outputs_pair(out, (<object>r).shape, typenum, (r, v, d, lv))
    cdef cnp.ndarray adv = _empty_like(r, typenum) if pair is None else pair[0]
    cdef cnp.ndarray ret = _empty_like(r, typenum) if pair is None else pair[1]
    if r.size == 0:
        return adv, ret
    cdef Py_ssize_t ne = n_envs, nt = T
    cdef double gg = g, ll = l
    cdef void* rp = cnp.PyArray_DATA(r)
    cdef void* vp = cnp.PyArray_DATA(v)
    cdef void* dp = cnp.PyArray_DATA(d)
    cdef void* lp = cnp.PyArray_DATA(lv)
    cdef void* ap = cnp.PyArray_DATA(adv)
    cdef void* tp = cnp.PyArray_DATA(ret)
    with nogil:
        if f32:
            _gae_rows[float](<float*>rp, <float*>vp, <float*>dp, <float*>lp, ne, nt, <float>gg,
                             <float>ll, <float*>ap, <float*>tp, _num_threads)
        else:
            _gae_rows[double](<double*>rp, <double*>vp, <double*>dp, <double*>lp, ne, nt, gg, ll,
                              <double*>ap, <double*>tp, _num_threads)
    return adv, ret


def compute_gae_batched(rewards, values, dones, last_values, n_steps, gamma, lam, out=None):
    """GAE for all envs in one call, float64.

    rewards, values, dones: env-major flat [N * T] ([env0_step0, env0_step1, ...]) or 2-D [N, T];
    last_values: [N]; n_steps: T. Returns (advantages, returns) shaped like ``rewards``.
    Threads split envs (prange), so results are identical at any thread count.
    out: optional (advantages, returns) arrays shaped like ``rewards`` (float64, C-contiguous,
    writeable, not overlapping the inputs) to write into and return; a training loop that
    reuses them skips allocating (and page-faulting) two fresh arrays per call.
    """
    return _gae_batched(rewards, values, dones, last_values, n_steps, gamma, lam, False, out)


def compute_gae_batched_f32(rewards, values, dones, last_values, n_steps, gamma, lam, out=None):
    """As ``compute_gae_batched`` but float32 end to end (inputs of other real dtypes are
    converted to float32, which costs one copy; float32 inputs are used in place; ``out`` arrays
    are float32)."""
    return _gae_batched(rewards, values, dones, last_values, n_steps, gamma, lam, True, out)


# ------------------------------------------------------------------------- V-trace
cdef void _vtrace(const floating_t* log_rhos, const floating_t* r, const floating_t* v,
                  const floating_t* d, floating_t bootstrap, Py_ssize_t n, floating_t gamma,
                  floating_t rho_bar, floating_t c_bar, floating_t* vs,
                  floating_t* pg_adv) noexcept nogil:
    """IN log_rhos, r, v, d [n]; OUT vs, pg_adv [n]. Two backward passes, no temporaries."""
    cdef Py_ssize_t t
    cdef floating_t rho, clipped_rho, c, discount, next_v, delta, acc = 0, next_vs
    # vs_t - V(x_t) = delta_t + discount_t * c_t * (vs_{t+1} - V(x_{t+1}))
    next_v = bootstrap
    for t in range(n - 1, -1, -1):
        rho = exp(log_rhos[t])
        clipped_rho = rho if rho < rho_bar else rho_bar
        c = rho if rho < c_bar else c_bar
        discount = gamma * (1 - d[t])
        delta = clipped_rho * (r[t] + discount * next_v - v[t])
        acc = delta + discount * c * acc
        vs[t] = v[t] + acc
        next_v = v[t]
    # pg advantage: clipped_rho_t * (r_t + discount_t * vs_{t+1} - V(x_t))
    next_vs = bootstrap
    for t in range(n - 1, -1, -1):
        rho = exp(log_rhos[t])
        clipped_rho = rho if rho < rho_bar else rho_bar
        discount = gamma * (1 - d[t])
        pg_adv[t] = clipped_rho * (r[t] + discount * next_vs - v[t])
        next_vs = vs[t]


def compute_vtrace(log_rhos, rewards, values, dones, bootstrap_value, gamma, rho_bar=1.0,
                   c_bar=1.0):
    """V-trace targets and policy-gradient advantages for one trajectory.

    log_rhos = log pi(a|x) - log mu(a|x), rewards, values, dones: [T]; bootstrap_value: V(x_T).
    Returns (vs, pg_advantages), each [T], in float32 when every array input is float32,
    otherwise float64. dones[t] == 1 zeroes the discount after step t.
    """
    cdef double g = float(gamma), rb = float(rho_bar), cb = float(c_bar), bv = float(bootstrap_value)
    _check_rate(g, "gamma")
    if not isfinite(rb) or rb <= 0:
        raise ValueError(f"rho_bar must be a finite number > 0, got {rb}")
    if not isfinite(cb) or cb <= 0:
        raise ValueError(f"c_bar must be a finite number > 0, got {cb}")
    if not isfinite(bv):
        raise ValueError(f"bootstrap_value must be finite, got {bv}")
    arrays = [np.asarray(a) for a in (log_rhos, rewards, values, dones)]
    all_f32 = all(a.dtype.type is np.float32 for a in arrays)   # any byte order
    dtype = np.float32 if all_f32 else np.float64
    names = ("log_rhos", "rewards", "values", "dones")
    lr, r, v, d = [_flat(_real(a, nm, dtype), nm) for a, nm in zip(arrays, names)]
    n = lr.shape[0]
    if r.shape[0] != n or v.shape[0] != n or d.shape[0] != n:
        raise ValueError(f"log_rhos, rewards, values and dones must have the same length; got "
                         f"{n}, {r.shape[0]}, {v.shape[0]} and {d.shape[0]}")
    vs = np.empty(n, dtype=dtype)
    pg = np.empty(n, dtype=dtype)
    if n == 0:
        return vs, pg
    cdef const float32_t[::1] lr32, r32, v32, d32
    cdef float32_t[::1] vs32, pg32
    cdef const float64_t[::1] lr64, r64, v64, d64
    cdef float64_t[::1] vs64, pg64
    cdef Py_ssize_t nn = n
    if all_f32:
        lr32, r32, v32, d32, vs32, pg32 = lr, r, v, d, vs, pg
        with nogil:
            _vtrace[float](&lr32[0], &r32[0], &v32[0], &d32[0], <float>bv, nn, <float>g, <float>rb,
                    <float>cb, &vs32[0], &pg32[0])
    else:
        lr64, r64, v64, d64, vs64, pg64 = lr, r, v, d, vs, pg
        with nogil:
            _vtrace[double](&lr64[0], &r64[0], &v64[0], &d64[0], bv, nn, g, rb, cb, &vs64[0], &pg64[0])
    return vs, pg


# ------------------------------------------------------------------------- batched V-trace
cdef void _vtrace_col(const floating_t* log_rhos, const floating_t* r, const floating_t* v,
                      const floating_t* d, floating_t bootstrap, Py_ssize_t n, Py_ssize_t stride,
                      floating_t gamma, floating_t rho_bar, floating_t c_bar, floating_t* vs,
                      floating_t* pg_adv) noexcept nogil:
    """One column of time-major [T, N] arrays (element t at offset t * stride): the same two
    backward passes as ``_vtrace``. IN log_rhos, r, v, d; OUT vs, pg_adv."""
    cdef Py_ssize_t t, o
    cdef floating_t rho, clipped_rho, c, discount, next_v = bootstrap, delta, acc = 0, next_vs
    for t in range(n - 1, -1, -1):
        o = t * stride
        rho = exp(log_rhos[o])
        clipped_rho = rho if rho < rho_bar else rho_bar
        c = rho if rho < c_bar else c_bar
        discount = gamma * (1 - d[o])
        delta = clipped_rho * (r[o] + discount * next_v - v[o])
        acc = delta + discount * c * acc
        vs[o] = v[o] + acc
        next_v = v[o]
    next_vs = bootstrap
    for t in range(n - 1, -1, -1):
        o = t * stride
        rho = exp(log_rhos[o])
        clipped_rho = rho if rho < rho_bar else rho_bar
        discount = gamma * (1 - d[o])
        pg_adv[o] = clipped_rho * (r[o] + discount * next_vs - v[o])
        next_vs = vs[o]


cdef void _vtrace_cols(const floating_t* lr, const floating_t* r, const floating_t* v,
                       const floating_t* d, const floating_t* boot, Py_ssize_t T, Py_ssize_t N,
                       floating_t gamma, floating_t rho_bar, floating_t c_bar, floating_t* vs,
                       floating_t* pg, int n_threads) noexcept nogil:
    """Columns are independent trajectories: prange over them (serial below the threshold)."""
    cdef Py_ssize_t j
    if n_threads <= 1 or N < 2 or N * T < PARALLEL_MIN_STEPS:
        for j in range(N):
            _vtrace_col(lr + j, r + j, v + j, d + j, boot[j], T, N, gamma, rho_bar, c_bar, vs + j, pg + j)
    else:
        for j in prange(N, nogil=True, schedule="static", num_threads=n_threads):
            _vtrace_col(lr + j, r + j, v + j, d + j, boot[j], T, N, gamma, rho_bar, c_bar, vs + j, pg + j)


def compute_vtrace_batched(log_rhos, rewards, values, dones, bootstrap_values, gamma, rho_bar=1.0,
                           c_bar=1.0):
    """V-trace for N trajectories at once (Espeholt et al. 2018, eq. 1 and the pg advantage).

    log_rhos = log pi(a|x) - log mu(a|x), rewards, values, dones: time-major [T, N] (column j is
    trajectory j); bootstrap_values: [N], V(x_T) of each column. Returns (vs, pg_advantages),
    each [T, N], float32 when every array input is float32, otherwise float64. dones[t, j] == 1
    zeroes the discount after step t of column j. Threads split columns (prange), so results
    are identical at any thread count.
    """
    cdef double g = float(gamma), rb = float(rho_bar), cb = float(c_bar)
    _check_rate(g, "gamma")
    if not isfinite(rb) or rb <= 0:
        raise ValueError(f"rho_bar must be a finite number > 0, got {rb}")
    if not isfinite(cb) or cb <= 0:
        raise ValueError(f"c_bar must be a finite number > 0, got {cb}")
    arrays = [np.asarray(a) for a in (log_rhos, rewards, values, dones, bootstrap_values)]
    all_f32 = all(a.dtype == np.float32 for a in arrays)
    dtype = np.float32 if all_f32 else np.float64
    names = ("log_rhos", "rewards", "values", "dones", "bootstrap_values")
    lr, r, v, d, boot = [_real(a, nm, dtype) for a, nm in zip(arrays, names)]
    if lr.ndim != 2:
        raise ValueError(f"log_rhos must be 2-D time-major [T, N], got shape {lr.shape}; for one "
                         f"trajectory use compute_vtrace or reshape it to (T, 1)")
    if r.shape != lr.shape or v.shape != lr.shape or d.shape != lr.shape:
        raise ValueError(f"log_rhos, rewards, values and dones must have the same shape [T, N]; got "
                         f"{lr.shape}, {r.shape}, {v.shape} and {d.shape}")
    cdef Py_ssize_t T = lr.shape[0], N = lr.shape[1], j
    if boot.shape != (N,):
        raise ValueError(f"bootstrap_values has shape {boot.shape}, expected ({N},): one V(x_T) per "
                         f"column of the [T, N] = {lr.shape} inputs")
    if not np.isfinite(boot).all():
        j = int(np.flatnonzero(~np.isfinite(boot))[0])
        raise ValueError(f"bootstrap_values must be finite, got {boot[j]} at index {j}")
    vs = np.empty((T, N), dtype=dtype)
    pg = np.empty((T, N), dtype=dtype)
    if T == 0 or N == 0:
        return vs, pg
    cdef void* lp = cnp.PyArray_DATA(lr)
    cdef void* rp = cnp.PyArray_DATA(r)
    cdef void* vp = cnp.PyArray_DATA(v)
    cdef void* dp = cnp.PyArray_DATA(d)
    cdef void* bp = cnp.PyArray_DATA(boot)
    cdef void* sp = cnp.PyArray_DATA(vs)
    cdef void* gp = cnp.PyArray_DATA(pg)
    cdef bint f32 = all_f32
    with nogil:
        if f32:
            _vtrace_cols[float](<float*>lp, <float*>rp, <float*>vp, <float*>dp, <float*>bp, T, N,
                                <float>g, <float>rb, <float>cb, <float*>sp, <float*>gp, _num_threads)
        else:
            _vtrace_cols[double](<double*>lp, <double*>rp, <double*>vp, <double*>dp, <double*>bp, T, N,
                                 g, rb, cb, <double*>sp, <double*>gp, _num_threads)
    return vs, pg
