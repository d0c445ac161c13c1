"""Plain NumPy oracle for the frame kernel (rlox._ext.frames): max-pool, gray, area resize.

The area resize here is the definition, in float64: output pixel (i, j) is the mean of the
source over its cell [i * H/h, (i + 1) * H/h) x [j * W/w, (j + 1) * W/w), each source pixel
weighted by the fraction of it inside the cell; then rounded half to even. OpenCV's INTER_AREA
(which the kernel reproduces bit for bit) sums in float32 and drops partial pixels under 1e-3
of a pixel, so the two agree within one intensity level.
"""
import numpy as np

# OpenCV's RGB2GRAY for uint8: 0.299, 0.587, 0.114 in 15-bit fixed point (they sum to 2**15)
GRAY_WEIGHTS_15 = (9798, 19235, 3735)


def area_weights(ssize, dsize):
    """[dsize, ssize] float64: row d holds each source pixel's overlap with cell d, / cell width."""
    scale = ssize / dsize
    edges = np.arange(dsize + 1) * scale
    lo, hi = edges[:-1, None], edges[1:, None]
    src = np.arange(ssize)[None, :]
    overlap = np.clip(np.minimum(hi, src + 1) - np.maximum(lo, src), 0.0, None)
    return overlap / scale


def gray(rgb):
    """[..., 3] uint8 -> [...] uint8: (9798 R + 19235 G + 3735 B + 2**14) >> 15."""
    r, g, b = (rgb[..., i].astype(np.int64) for i in range(3))
    wr, wg, wb = GRAY_WEIGHTS_15
    return ((wr * r + wg * g + wb * b + (1 << 14)) >> 15).astype(np.uint8)


def area_resize(img, h, w):
    """[H, W] or [H, W, C] uint8 -> [h, w] or [h, w, C] uint8 by area averaging (downscale)."""
    x = img.astype(np.float64)
    wy, wx = area_weights(img.shape[0], h), area_weights(img.shape[1], w)
    out = np.tensordot(wy, x, axes=(1, 0))                          # rows: [h, W, ...]
    out = np.moveaxis(np.tensordot(wx, out, axes=(1, 1)), 0, 1)    # columns: [h, w, ...]
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def preprocess(frame, prev, h, w, grayscale=True):
    """area_resize(gray(max(frame, prev))): the kernel's definition, one frame."""
    x = frame if prev is None else np.maximum(frame, prev)
    if grayscale and x.ndim == 3 and x.shape[-1] == 3:
        x = gray(x)
    return area_resize(x, h, w)
