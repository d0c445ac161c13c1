/* The frame kernel's two inner row loops (ext/frames.pyx), in C so that GCC can build them
 * twice, for AVX2 and for the baseline, and pick one when the module loads (target_clones,
 * an ifunc): both loops only vectorise with AVX2 (the RGB loop needs byte shuffles to split
 * the interleaved channels, the area loop gathers). Each output element is computed with the
 * same float32 operations in the same order in every clone (no FMA: the module is built with
 * -ffp-contract=off), so results are identical whichever clone runs. */
#ifndef RLOX_FRAMES_H
#define RLOX_FRAMES_H
#include <stdint.h>

#if defined(_MSC_VER) && !defined(restrict)
#define restrict __restrict
#endif

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define RLOX_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define RLOX_CLONES
#endif

/* gray[x] = (R2Y r + G2Y g + B2Y b + 2^(shift-1)) >> shift for the w RGB pixels of ``rgb``. */
RLOX_CLONES static void rlox_gray_row(const uint8_t *restrict rgb, uint8_t *restrict gray, int64_t w,
                                      uint32_t r2y, uint32_t g2y, uint32_t b2y, uint32_t shift) {
    const uint32_t half = 1u << (shift - 1);
    for (int64_t x = 0; x < w; x++)
        gray[x] = (uint8_t)(((uint32_t)rgb[3 * x] * r2y + (uint32_t)rgb[3 * x + 1] * g2y
                             + (uint32_t)rgb[3 * x + 2] * b2y + half) >> shift);
}

/* out[d] = sum_k row[src[d*K + k]] * alpha[d*K + k] for d < n, k < K, summed from k = 0 up
 * (the first product is the start: 0 + p == p). */
RLOX_CLONES static void rlox_area_row(const float *restrict row, const int *restrict src,
                                      const float *restrict alpha, int64_t n, int64_t K,
                                      float *restrict out) {
    if (K == 3) {
        for (int64_t d = 0; d < n; d++) {
            float a = row[src[3 * d]] * alpha[3 * d];
            a = a + row[src[3 * d + 1]] * alpha[3 * d + 1];
            a = a + row[src[3 * d + 2]] * alpha[3 * d + 2];
            out[d] = a;
        }
        return;
    }
    for (int64_t d = 0; d < n; d++) {
        float a = row[src[K * d]] * alpha[K * d];
        for (int64_t k = 1; k < K; k++)
            a = a + row[src[K * d + k]] * alpha[K * d + k];
        out[d] = a;
    }
}

/* The same for 8 source rows at once, the rows as SIMD lanes (every row has the same weights):
 * out[r * n + d] for r < R (R <= 8; rows[r] for r >= R may repeat any valid row, their lanes
 * are dropped). T is scratch for 8 * W floats (the rows transposed and widened). Each lane
 * does exactly rlox_area_row's float operations in its order. */
RLOX_CLONES static void rlox_area_rows8(const uint8_t *const *rows, int64_t R, int64_t W,
                                        const int *restrict src, const float *restrict alpha,
                                        int64_t n, int64_t K, float *restrict T, float *restrict out) {
    const uint8_t *r0 = rows[0], *r1 = rows[1], *r2 = rows[2], *r3 = rows[3];
    const uint8_t *r4 = rows[4], *r5 = rows[5], *r6 = rows[6], *r7 = rows[7];
    for (int64_t x = 0; x < W; x++) {
        float *t = T + 8 * x;
        t[0] = (float)r0[x]; t[1] = (float)r1[x]; t[2] = (float)r2[x]; t[3] = (float)r3[x];
        t[4] = (float)r4[x]; t[5] = (float)r5[x]; t[6] = (float)r6[x]; t[7] = (float)r7[x];
    }
    for (int64_t d = 0; d < n; d++) {
        float a[8];
        const float al0 = alpha[K * d];
        const float *t0 = T + 8 * (int64_t)src[K * d];
        for (int r = 0; r < 8; r++)
            a[r] = t0[r] * al0;
        for (int64_t k = 1; k < K; k++) {
            const float al = alpha[K * d + k];
            const float *t = T + 8 * (int64_t)src[K * d + k];
            for (int r = 0; r < 8; r++)
                a[r] = a[r] + t[r] * al;
        }
        for (int64_t r = 0; r < R; r++)
            out[r * n + d] = a[r];
    }
}
#endif
