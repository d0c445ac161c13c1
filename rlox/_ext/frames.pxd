# The contract of the frame-preprocessing kernel (ext/frames.pyx): the Atari path's max-pool,
# grayscale and INTER_AREA downscale fused into one pass that writes uint8 into a caller's slot.
#
# This file sits beside the compiled module (rlox/_ext/frames.*.so), as buffers.pxd does, so
# other kernels can cimport it as rlox._ext.frames.
#
# Exactness (what the tests hold the kernel to): OpenCV's INTER_AREA downscale (resize.cpp,
# computeResizeAreaTab + ResizeArea_Invoker) is reproduced operation for operation: the same
# double-precision weight tables, float32 products and sums in the same order, then
# round-half-to-even and saturation. So on x86-64 (no fused multiply-add; the module is built
# with -ffp-contract=off) the result equals cv2.resize(..., INTER_AREA) bit for bit for every
# non-integer scale. Grayscale is OpenCV's RGB2GRAY fixed point, (9798 R + 19235 G + 3735 B +
# 16384) >> 15 (0.299/0.587/0.114 in 15 bits), also bit-exact. Integer scales (OpenCV's resizeAreaFast path) and upscaling are
# not this kernel's job: ImagePreprocess keeps cv2 there.
from _types cimport float32_t, intp_t, uint8_t

cdef enum:
    # OpenCV's RGB2GRAY for uint8 (color_rgb.simd.hpp, RGB2Gray<uchar>: RY15, GY15, BY15):
    # Y = (R2Y R + G2Y G + B2Y B + 2^(GRAY_SHIFT-1)) >> GRAY_SHIFT; the weights sum to 2^15.
    GRAY_SHIFT = 15
    R2Y = 9798
    G2Y = 19235
    B2Y = 3735


cdef struct area_tab_t:
    # INTER_AREA weights of one axis, grouped by destination index: destination d is the sum
    # over k in [start[d], start[d + 1]) of source[src[k]] * alpha[k], in that order.
    intp_t* start            # [dsize + 1] first entry of each destination index
    intp_t* src              # [capacity] source index of entry k, in [0, ssize)
    float32_t* alpha         # [capacity] weight of entry k (a destination's weights sum to 1)
    intp_t ssize             # source length
    intp_t dsize             # destination length (1 <= dsize <= ssize)
    # The same weights padded to ``kmax`` entries per destination (weight 0 on source 0 after
    # a destination's own entries; adding +0.0 leaves a float sum unchanged), so a one-channel
    # pass runs a fixed-length, unrollable loop: pad_src[d * kmax + k], pad_alpha[d * kmax + k].
    intp_t kmax
    int* pad_src
    float32_t* pad_alpha


cdef struct frame_geom_t:
    # One frame's shapes: source [H, W, C] (C = 1 for a gray [H, W] frame), destination
    # [h, w, c_out] with c_out = C / 3 when grayscale converts C = 3G channels (G RGB frames
    # stacked on the channel axis), else c_out = C.
    intp_t H
    intp_t W
    intp_t C
    intp_t h
    intp_t w
    intp_t c_out
    bint gray                # convert each RGB triple to one gray channel before resizing


# Entries an area table over ``ssize -> dsize`` needs at most (each destination index adds
# its whole source cells plus at most two partial ones).
cdef intp_t area_tab_capacity(intp_t ssize, intp_t dsize) noexcept nogil

# Fill ``tab`` (its arrays allocated for ``area_tab_capacity`` entries and dsize + 1 starts)
# exactly as OpenCV's computeResizeAreaTab does for scale = ssize / dsize; sets kmax.
cdef void area_tab_fill(area_tab_t* tab) noexcept nogil

# Fill pad_src / pad_alpha (allocated for kmax * dsize entries) from a filled table.
cdef void area_tab_pad(area_tab_t* tab) noexcept nogil

# One frame: out[h, w, c_out] = area(gray?(max(last, prev))) (prev may be NULL: no max).
# Scratch: ``row`` 8 * W * (C + c_out) uint8 (pooled rows and their gray conversion), ``rowf``
# 8 * W floats when c_out == 1 (8 source rows transposed, averaged horizontally as SIMD lanes)
# else W * C (one widened row), ``hrow`` 8 * w * c_out floats, ``acc`` w * c_out floats.
cdef void preprocess_one(const uint8_t* last, const uint8_t* prev, const frame_geom_t* g,
                         const area_tab_t* xt, const area_tab_t* yt, uint8_t* out,
                         uint8_t* row, float32_t* rowf, float32_t* hrow, float32_t* acc) noexcept nogil
