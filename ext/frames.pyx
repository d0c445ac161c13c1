# Frame preprocessing for learning from pixels: max-pool of the last two raw frames (Atari
# flicker), RGB -> gray, INTER_AREA downscale, written as uint8 into a caller's slot (e.g. one
# frame of a frame stack), for one frame or for N envs' frames at once (prange over frames).
#
# The contract, and why the result equals OpenCV's bit for bit, is in rlox/_ext/frames.pxd.
# What it replaces, per Atari step: np.maximum (a fresh array), cv2.cvtColor, cv2.resize and a
# copy into the stack. The fused pass reads each source row once: pool and convert it into a
# row of bytes, average it horizontally once (OpenCV redoes the rows two output rows share),
# then accumulate it into the output row.
from libc.math cimport ceil, floor
from libc.stdlib cimport malloc, free
from libc.stdint cimport int64_t, uint32_t
from cython.parallel cimport prange
from _types cimport float32_t, intp_t, uint8_t
from _checks cimport exact_array, output_array
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

cdef extern from "rlox_frames.h" nogil:
    void rlox_gray_row(const uint8_t* rgb, uint8_t* gray, int64_t w, uint32_t r2y, uint32_t g2y,
                       uint32_t b2y, uint32_t shift)
    void rlox_area_row(const float32_t* row, const int* src, const float32_t* alpha, int64_t n,
                       int64_t K, float32_t* out)
    void rlox_area_rows8(const uint8_t* const* rows, int64_t R, int64_t W, const int* src,
                         const float32_t* alpha, int64_t n, int64_t K, float32_t* T, float32_t* out)


# ---------------------------------------------------------------------- C helpers (nogil)
cdef intp_t area_tab_capacity(intp_t ssize, intp_t dsize) noexcept nogil:
    return ssize + 2 * dsize + 2


cdef void area_tab_fill(area_tab_t* tab) noexcept nogil:
    # OpenCV's computeResizeAreaTab (imgproc/src/resize.cpp), line for line: the same doubles,
    # the same 1e-3 thresholds, the weights rounded to float once. Every source index is in
    # [0, ssize): s1 - 1 >= 0 as s1 > f1 >= 0, and s2 <= ssize - 1.
    cdef intp_t ssize = tab.ssize, dsize = tab.dsize, d, s, s1, s2, k = 0
    cdef double scale = 1.0 / (<double>dsize / <double>ssize)
    cdef double f1, f2, cell
    for d in range(dsize):
        tab.start[d] = k
        f1 = <double>d * scale
        f2 = f1 + scale
        cell = scale if scale < ssize - f1 else ssize - f1
        s1 = <intp_t>ceil(f1)
        s2 = <intp_t>floor(f2)
        if s2 > ssize - 1:
            s2 = ssize - 1
        if s1 > s2:
            s1 = s2
        if s1 - f1 > 1e-3:
            tab.src[k] = s1 - 1
            tab.alpha[k] = <float32_t>((s1 - f1) / cell)
            k += 1
        for s in range(s1, s2):
            tab.src[k] = s
            tab.alpha[k] = <float32_t>(1.0 / cell)
            k += 1
        if f2 - s2 > 1e-3:
            tab.src[k] = s2
            tab.alpha[k] = <float32_t>(min(min(f2 - s2, 1.0), cell) / cell)
            k += 1
    tab.start[dsize] = k
    tab.kmax = 0
    for d in range(dsize):
        if tab.start[d + 1] - tab.start[d] > tab.kmax:
            tab.kmax = tab.start[d + 1] - tab.start[d]


cdef void area_tab_pad(area_tab_t* tab) noexcept nogil:
    cdef intp_t d, k, n = tab.dsize, j, K = tab.kmax
    for d in range(n):
        for k in range(K):
            j = tab.start[d] + k
            if j < tab.start[d + 1]:
                tab.pad_src[d * K + k] = <int>tab.src[j]
                tab.pad_alpha[d * K + k] = tab.alpha[j]
            else:
                tab.pad_src[d * K + k] = 0
                tab.pad_alpha[d * K + k] = 0


cdef inline const uint8_t* _source_bytes(const uint8_t* last, const uint8_t* prev, intp_t sy,
                                         const frame_geom_t* g, uint8_t* row) noexcept nogil:
    """Source row ``sy`` pooled (max with prev) and converted (gray): W * c_out bytes, in
    ``row`` [W * C + W * c_out] (scratch) or the frame itself when there is nothing to do. Gray
    converts each group of 3 channels: [W, G, 3] is [W * G, 3], one gray byte per triple."""
    cdef intp_t x, n = g.W * g.C
    cdef const uint8_t* L = last + sy * n
    cdef const uint8_t* P
    if prev != NULL:                 # contiguous bytes: vectorised
        P = prev + sy * n
        for x in range(n):
            row[x] = L[x] if L[x] > P[x] else P[x]
        L = row
    if g.gray:
        rlox_gray_row(L, row + n, g.W * g.c_out, R2Y, G2Y, B2Y, GRAY_SHIFT)
        L = row + n
    return L


cdef inline const uint8_t* _offset(const uint8_t* p, intp_t off) noexcept nogil:
    if p == NULL:
        return p
    return p + off


cdef inline void _hpass(const float32_t* rowf, const area_tab_t* xt, intp_t cn,
                        float32_t* hrow) noexcept nogil:
    """hrow[dx, c] = sum_k row[src[k], c] * alpha[k] over dx's entries, in float32, in
    OpenCV's order (its buf[dx] starts at 0 and adds each product; 0 + p == p, and the
    padded entries add +0.0)."""
    cdef intp_t dx, k, c, n = xt.dsize, K = xt.kmax
    cdef float32_t a
    cdef const int* s = xt.pad_src
    cdef const float32_t* al = xt.pad_alpha
    if cn == 1:
        rlox_area_row(rowf, s, al, n, K, hrow)
    else:
        for dx in range(n):
            for c in range(cn):
                a = rowf[s[K * dx] * cn + c] * al[K * dx]
                for k in range(1, K):
                    a = a + rowf[s[K * dx + k] * cn + c] * al[K * dx + k]
                hrow[dx * cn + c] = a


cdef void preprocess_one(const uint8_t* last, const uint8_t* prev, const frame_geom_t* g,
                         const area_tab_t* xt, const area_tab_t* yt, uint8_t* out,
                         uint8_t* row, float32_t* rowf, float32_t* hrow, float32_t* acc) noexcept nogil:
    cdef intp_t cn = g.c_out, n = g.w * cn, dy, j, x, r, R, lo = 0, hi = 0, stride = g.W * (g.C + g.c_out)
    cdef const uint8_t* src
    cdef const uint8_t* rows[8]
    cdef const float32_t* h
    cdef float32_t beta, v
    # 1.5 * 2^23 as a float: (v + M) - M rounds v in [0, 2^22) half to even in float32
    # arithmetic, as OpenCV's cvRound (cvtss2si) does; both operands float so C stays in float.
    cdef float32_t M = 12582912.0
    for dy in range(g.h):
        for j in range(yt.start[dy], yt.start[dy + 1]):
            # Each source row is averaged horizontally once: rows two output rows share are not
            # redone. One channel: 8 rows at a time from the first one needed (``row``: 8
            # rows of scratch bytes; ``hrow``: their 8 results; ``rowf``: the transposed block).
            if not (lo <= yt.src[j] < hi):
                lo = yt.src[j]
                if cn == 1:
                    R = g.H - lo if g.H - lo < 8 else 8
                    for r in range(8):
                        rows[r] = _source_bytes(last, prev, lo + r, g, row + r * stride) if r < R else rows[0]
                    rlox_area_rows8(rows, R, g.W, xt.pad_src, xt.pad_alpha, g.w, xt.kmax, rowf, hrow)
                    hi = lo + R
                else:
                    src = _source_bytes(last, prev, lo, g, row)
                    for x in range(g.W * cn):
                        rowf[x] = <float32_t>src[x]
                    _hpass(rowf, xt, cn, hrow)
                    hi = lo + 1
            h = hrow + (yt.src[j] - lo) * n
            beta = yt.alpha[j]
            if j == yt.start[dy]:
                for x in range(n):
                    acc[x] = beta * h[x]
            else:
                for x in range(n):
                    acc[x] = acc[x] + beta * h[x]
        for x in range(n):
            v = (acc[x] + M) - M
            out[dy * n + x] = 255 if v >= 255 else (0 if v <= 0 else <uint8_t>v)


# ---------------------------------------------------------------------- plans (tables + scratch)
cdef struct plan_t:
    area_tab_t xt
    area_tab_t yt
    uint8_t* row          # [n_scratch, 8, W * C + W]
    float32_t* rowf       # [n_scratch, 8 * W] (one channel) or [n_scratch, W * C]
    float32_t* hrow       # [n_scratch, 8, w * c_out]
    float32_t* acc        # [n_scratch, w * c_out]
    intp_t row_len
    intp_t rowf_len
    intp_t hrow_len
    intp_t acc_len
    void* block           # the one allocation everything above points into


cdef int _plan_init(plan_t* p, const frame_geom_t* g, intp_t n_scratch) except -1:
    cdef intp_t cx = area_tab_capacity(g.W, g.w), cy = area_tab_capacity(g.H, g.h)
    p.row_len = 8 * g.W * (g.C + g.c_out)           # 8 rows (the one-channel blocks)
    p.rowf_len = 8 * g.W if g.c_out == 1 else g.W * g.c_out     # the transposed block / one row
    p.acc_len = g.w * g.c_out
    p.hrow_len = 8 * p.acc_len
    cdef size_t n_idx = <size_t>(g.w + 1 + cx + g.h + 1 + cy)
    cdef size_t n_flt = <size_t>(cx + cy + n_scratch * (p.hrow_len + p.acc_len + p.rowf_len) + 2 * cx)
    cdef size_t n_u8 = <size_t>(n_scratch * p.row_len)
    p.block = malloc(n_idx * sizeof(intp_t) + n_flt * sizeof(float32_t) + n_u8 + 16)
    if p.block == NULL:
        raise MemoryError(f"frames: could not allocate scratch for {n_scratch} frame(s) of {g.H}x{g.W}")
    cdef intp_t* ip = <intp_t*>p.block
    p.xt.start, p.xt.src = ip, ip + g.w + 1
    ip += g.w + 1 + cx
    p.yt.start, p.yt.src = ip, ip + g.h + 1
    ip += g.h + 1 + cy
    cdef float32_t* fp = <float32_t*>ip
    p.xt.alpha, p.yt.alpha = fp, fp + cx
    fp += cx + cy
    p.hrow, p.acc = fp, fp + n_scratch * p.hrow_len
    fp += n_scratch * (p.hrow_len + p.acc_len)
    p.rowf = fp
    fp += n_scratch * p.rowf_len
    p.xt.pad_alpha, p.xt.pad_src = fp, <int*>(fp + cx)     # kmax * w <= cx entries each
    fp += 2 * cx
    p.yt.pad_alpha, p.yt.pad_src = NULL, NULL
    p.row = <uint8_t*>fp
    p.xt.ssize, p.xt.dsize = g.W, g.w
    p.yt.ssize, p.yt.dsize = g.H, g.h
    area_tab_fill(&p.xt)
    area_tab_fill(&p.yt)
    area_tab_pad(&p.xt)
    return 0


# ---------------------------------------------------------------------- def boundary
cdef object _geometry(tuple src, tuple dst, bint grayscale, str src_name, str out_name,
                      frame_geom_t* g):
    """Fill ``g`` from one frame's shape ``src`` ((H, W) or (H, W, C)) and the output's ``dst``;
    ValueError naming the argument, what it got and what it needs."""
    if len(src) not in (2, 3):
        raise ValueError(f"{src_name} has shape {src}, expected one frame (H, W) or (H, W, C)")
    g.H, g.W = src[0], src[1]
    g.C = src[2] if len(src) == 3 else 1
    if g.H < 1 or g.W < 1 or g.C < 1:
        raise ValueError(f"{src_name} has shape {src}, expected a non-empty frame")
    g.gray = grayscale and len(src) == 3 and g.C != 1
    if g.gray and g.C % 3 != 0:
        raise ValueError(f"{src_name} has {g.C} channels, grayscale=True needs RGB channels in groups "
                         f"of 3 (or gray (H, W) frames); pass grayscale=False to resize every channel")
    g.c_out = g.C // 3 if g.gray else g.C
    want = "(h, w)" if (len(src) == 2 or (g.gray and g.c_out == 1)) else f"(h, w, {g.c_out})"
    if len(dst) != (2 if want == "(h, w)" else 3) or (len(dst) == 3 and dst[2] != g.c_out):
        raise ValueError(f"{out_name} has shape {dst}, expected {want} for {src_name} of shape {src} "
                         f"with grayscale={bool(grayscale)}")
    g.h, g.w = dst[0], dst[1]
    if g.h < 1 or g.w < 1 or g.h > g.H or g.w > g.W:
        raise ValueError(f"{out_name} is {g.h}x{g.w}, expected 1 <= h <= {g.H} and 1 <= w <= {g.W}: "
                         f"the kernel only downscales (area averaging); resize up with cv2.resize")
    return None


cdef tuple _prev_and_out(prev, a, out, tuple oshape, str whose):
    """(prev checked against the frames a, or None; out checked as the output of shape oshape)."""
    if prev is None:
        return None, output_array(out, "out", cnp.NPY_UINT8, oshape, (a,))
    p = exact_array(prev, "prev", cnp.NPY_UINT8)
    if p.shape != a.shape:
        raise ValueError(f"prev has shape {p.shape}, expected {whose} shape {a.shape}")
    return p, output_array(out, "out", cnp.NPY_UINT8, oshape, (a, p))


def preprocess_frame(frame, prev, out, *, grayscale=True):
    """One frame: ``out = area_resize(gray(max(frame, prev)))``, uint8, written into ``out``.

    frame: [H, W] gray or [H, W, C] uint8 (RGB when C == 3; C = 3G: G RGB frames stacked on the
        channel axis). prev: the frame before it, same shape, max-pooled with ``frame`` (Atari's
        flicker fix), or None for no pooling.
    out: a writeable C-contiguous uint8 array, h <= H and w <= W: [h, w] for a gray frame or
        RGB with grayscale=True, [h, w, G] for C = 3G > 3 with grayscale=True, else [h, w, C];
        e.g. one slot of a frame stack, ``stack[k]``.
    grayscale: convert each RGB triple to gray with OpenCV's RGB2GRAY fixed point first.

    Equals ``cv2.resize(cv2.cvtColor(np.maximum(frame, prev), cv2.COLOR_RGB2GRAY), (w, h),
    interpolation=cv2.INTER_AREA)`` bit for bit on x86-64 when H/h or W/w is not an integer
    (see rlox/_ext/frames.pxd). Returns ``out``.
    """
    cdef frame_geom_t g
    a = exact_array(frame, "frame", cnp.NPY_UINT8)
    oshape = tuple(np.shape(out))
    _geometry(a.shape, oshape, grayscale, "frame", "out", &g)
    p, o = _prev_and_out(prev, a, out, oshape, "frame's")
    cdef const uint8_t* pp = NULL if p is None else <const uint8_t*>cnp.PyArray_DATA(p)
    cdef plan_t plan
    _plan_init(&plan, &g, 1)
    cdef const uint8_t* fp = <const uint8_t*>cnp.PyArray_DATA(a)
    cdef uint8_t* op = <uint8_t*>cnp.PyArray_DATA(o)
    with nogil:
        preprocess_one(fp, pp, &g, &plan.xt, &plan.yt, op, plan.row, plan.rowf, plan.hrow, plan.acc)
    free(plan.block)
    return o


def preprocess_frames(frames, prev, out, *, grayscale=True):
    """N frames at once (N envs' screens): ``out[i] = preprocess_frame(frames[i], prev[i])``.

    frames: [N, H, W] or [N, H, W, C] uint8; prev: the same shape or None; out: [N, h, w] or
    [N, h, w, C] uint8, writeable and C-contiguous (e.g. ``stacks[:, k]`` is not: pass a
    [N, h, w] array and copy, or lay the stack out frame-major). Frames are split across the
    module's threads (``rlox.set_num_threads``); the result does not depend on the count.
    Returns ``out``.
    """
    cdef frame_geom_t g
    a = exact_array(frames, "frames", cnp.NPY_UINT8)
    oshape = tuple(np.shape(out))
    if a.ndim not in (3, 4):
        raise ValueError(f"frames has shape {a.shape}, expected [N, H, W] or [N, H, W, C]")
    if len(oshape) < 1 or oshape[0] != a.shape[0]:
        raise ValueError(f"out has shape {oshape}, expected {a.shape[0]} frames first (frames "
                         f"has shape {a.shape})")
    _geometry(a.shape[1:], oshape[1:], grayscale, "frames[i]", "out[i]", &g)
    p, o = _prev_and_out(prev, a, out, oshape, "frames'")
    cdef const uint8_t* pp = NULL if p is None else <const uint8_t*>cnp.PyArray_DATA(p)
    cdef intp_t n = a.shape[0], i
    if n == 0:
        return o
    cdef plan_t plan
    _plan_init(&plan, &g, n)
    cdef const uint8_t* fp = <const uint8_t*>cnp.PyArray_DATA(a)
    cdef uint8_t* op = <uint8_t*>cnp.PyArray_DATA(o)
    cdef intp_t in_len = g.H * g.W * g.C, out_len = g.h * g.w * g.c_out
    cdef int n_threads = _num_threads if _num_threads < n else <int>n
    if n_threads <= 1:
        with nogil:
            for i in range(n):
                preprocess_one(fp + i * in_len, _offset(pp, i * in_len), &g,
                               &plan.xt, &plan.yt, op + i * out_len, plan.row + i * plan.row_len,
                               plan.rowf + i * plan.rowf_len, plan.hrow + i * plan.hrow_len, plan.acc + i * plan.acc_len)
    else:
        for i in prange(n, nogil=True, schedule="static", num_threads=n_threads):
            preprocess_one(fp + i * in_len, _offset(pp, i * in_len), &g,
                           &plan.xt, &plan.yt, op + i * out_len, plan.row + i * plan.row_len,
                           plan.rowf + i * plan.rowf_len, plan.hrow + i * plan.hrow_len, plan.acc + i * plan.acc_len)
    free(plan.block)
    return o
