/* Fused float32 token-KL row kernels for ext/llm.pyx.
 *
 * One call reduces one sequence: sum over tokens t (optionally only where mask[t] != 0) of
 *   k1: d            k2: 0.5 * d * d            k3: exp(-d) - 1 + d      with d = lp[t] - lq[t]
 * (k3 is written below in terms of x = lq - lp = -d: exp(x) - x - 1).
 *
 * Speed: the token loop runs in blocks of RLOX_LANES independent float accumulators, so GCC
 * vectorises it without -ffast-math (no reassociation is needed: lane j always sums tokens
 * j, j + LANES, ... in order). On x86-64 Linux with GCC the row function is built three times
 * (x86-64-v4 / AVX-512, x86-64-v3 / AVX2+FMA, baseline SSE2) and the loader picks the best one
 * for the CPU at import (target_clones). Lanes are flushed into a double every RLOX_CHUNK
 * tokens, so long rows keep float64-like accuracy in the sum.
 *
 * exp is our own branch-free float32 version (Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2,
 * degree-7 Taylor polynomial for exp(r) - 1 - r). For |x| < 1 the k3 value comes from the Taylor
 * series of exp(x) - 1 - x itself, so small differences keep full relative accuracy (about
 * 1e-7) instead of cancelling (torch's float32 one-liner loses every digit below |x| ~ 1e-4).
 * Overflow gives +inf, x = -inf gives +inf and NaN propagates, as in the torch formula; x = +inf
 * (a policy log-prob of -inf) gives +inf, where the torch formula gives inf - inf = NaN.
 *
 * Results depend only on the inputs and the CPU's clone (FMA contraction may change the last
 * bit between the clones), never on the thread count: one row is reduced by one thread.
 */
#ifndef RLOX_LLM_H
#define RLOX_LLM_H
#include <stdint.h>
#include <math.h>
#include <stddef.h>

#define RLOX_LANES 16
#define RLOX_CHUNK 1024          /* multiple of RLOX_LANES */

/* target_clones needs GCC >= 11 and the loader's ifunc support (glibc; not musl) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) \
    && (__GNUC__ >= 11)
#define RLOX_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RLOX_CLONES
#endif

/* Without -fno-trapping-math GCC refuses to if-convert the selects below for SSE/AVX2 (they
 * could raise a floating-point exception flag the scalar code would not); rlox never reads
 * those flags, and values are unaffected (this is not -ffast-math: no reassociation, no
 * finite-math assumptions). Scoped to this header's functions. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math")
#endif

/* exp(x) - x - 1 in float32 (see the header comment). Inline so it vectorises in the caller. */
static inline __attribute__((always_inline)) float rlox_k3_f32(float x) {
    const float hi = 88.72283935546875f;      /* exp(hi) is the largest finite float */
    /* clamp to [-86, hi]; a NaN x becomes -86 here, so the int conversion below is always
     * defined, and the NaN still propagates through the "- x" of the result */
    float xc = x > -86.0f ? x : -86.0f;
    xc = xc < hi ? xc : hi;
    /* k = round(xc / ln2) by the 1.5 * 2^23 trick (round-to-nearest, no libm call) */
    const float shift = 12582912.0f;
    float kf = (xc * 1.44269504088896341f + shift) - shift;
    float r = (xc - kf * 0.693359375f) + kf * 2.12194440e-4f;   /* ln2 = 0.693359375 - 2.1219e-4 */
    float p = r * r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f
              + r * (1.3888889e-3f + r * 1.9841270e-4f)))));
    /* 2^(k-1) from exponent bits: k in [-124, 128] so k - 1 + 127 is a normal exponent */
    int32_t ki = (int32_t)kf;
    union { uint32_t u; float f; } s;
    s.u = (uint32_t)(ki + 126) << 23;
    float e = (s.f * (1.0f + (r + p))) * 2.0f;                 /* exp(xc) */
    float v = (e - 1.0f) - x;
    /* |x| < 1: exp(x) - 1 - x straight from its Taylor series (degree 11, error < 2.1e-9 *
     * x^2), so small differences keep their relative accuracy instead of cancelling. */
    float t = x * x * (0.5f + x * (1.66666672e-1f + x * (4.16666679e-2f + x * (8.33333377e-3f
              + x * (1.38888892e-3f + x * (1.98412701e-4f + x * (2.48015876e-5f
              + x * (2.75573188e-6f + x * (2.75573188e-7f + x * 2.50521079e-8f)))))))));
    v = (fabsf(x) < 1.0f) ? t : v;
    v = (x > hi) ? INFINITY : v;
    return v;
}

/* The row reducer, written once as a macro over the per-token expression EXPR(a, b) with
 * a = lp[t], b = lq[t]. */
#define RLOX_KL_ROW(NAME, EXPR)                                                         \
RLOX_CLONES static double NAME(const float *lp, const float *lq, const uint8_t *mask,     \
                               int64_t n, int64_t *count) {                             \
    double total = 0.0;                                                                 \
    int64_t cnt = 0, i = 0, end, j;                                                     \
    float acc[RLOX_LANES];                                                              \
    int32_t cacc[RLOX_LANES];                                                           \
    uint32_t mw[RLOX_CHUNK];                                                            \
    while (n - i >= RLOX_LANES) {                                                       \
        for (j = 0; j < RLOX_LANES; j++) { acc[j] = 0.0f; cacc[j] = 0; }                 \
        end = (n - i >= RLOX_CHUNK) ? i + RLOX_CHUNK : n - (n - i) % RLOX_LANES;         \
        if (mask == NULL) {                                                             \
            for (; i < end; i += RLOX_LANES)                                            \
                for (j = 0; j < RLOX_LANES; j++) {                                      \
                    float a = lp[i + j], b = lq[i + j];                                 \
                    acc[j] += (EXPR);                                                   \
                }                                                                       \
        } else {                                                                        \
            /* widen this chunk's mask to all-ones/zero words first (its own vectorised   \
             * loop); a masked-off token then reads as a = b = 0, whose value is exactly  \
             * 0 for every estimator, so a NaN/inf under a zero mask never reaches the sum */ \
            int64_t base = i, k;                                                        \
            for (k = 0; k < end - base; k++) mw[k] = 0u - (uint32_t)(mask[base + k] != 0); \
            for (; i < end; i += RLOX_LANES)                                            \
                for (j = 0; j < RLOX_LANES; j++) {                                      \
                    union { float f; uint32_t u; } ua, ub;                              \
                    uint32_t w = mw[i - base + j];                                      \
                    ua.f = lp[i + j]; ub.f = lq[i + j];                                 \
                    ua.u &= w; ub.u &= w;                                               \
                    float a = ua.f, b = ub.f;                                           \
                    acc[j] += (EXPR);                                                   \
                    cacc[j] += (int32_t)(w & 1u);                                       \
                }                                                                       \
        }                                                                               \
        /* fixed-order pairwise combine of the lanes */                                 \
        for (j = RLOX_LANES / 2; j > 0; j /= 2) {                                       \
            int64_t q;                                                                  \
            for (q = 0; q < j; q++) { acc[q] += acc[q + j]; cacc[q] += cacc[q + j]; }   \
        }                                                                               \
        total += (double)acc[0];                                                        \
        cnt += cacc[0];                                                                  \
    }                                                                                   \
    for (; i < n; i++) {                                                                \
        float a = lp[i], b = lq[i];                                                     \
        if (mask == NULL || mask[i] != 0) { total += (double)(EXPR); cnt++; }            \
    }                                                                                   \
    *count = (mask == NULL) ? n : cnt;                                                  \
    return total;                                                                       \
}

/* Sum of one estimator over one row of n tokens; mask may be NULL (all tokens count).
 * *count receives the number of counted tokens. */
RLOX_KL_ROW(rlox_kl_row_k1_f32, a - b)
RLOX_KL_ROW(rlox_kl_row_k2_f32, 0.5f * (a - b) * (a - b))
RLOX_KL_ROW(rlox_kl_row_k3_f32, rlox_k3_f32(b - a))

static inline double rlox_kl_row_f32(int estimator, const float *lp, const float *lq,
                                     const uint8_t *mask, int64_t n, int64_t *count) {
    if (estimator == 1) return rlox_kl_row_k1_f32(lp, lq, mask, n, count);
    if (estimator == 2) return rlox_kl_row_k2_f32(lp, lq, mask, n, count);
    return rlox_kl_row_k3_f32(lp, lq, mask, n, count);
}

/* Per-token values of one row into out (masked-off tokens get 0). */
RLOX_CLONES static void rlox_kl_tokens_f32(int estimator, const float *lp, const float *lq,
                                           const uint8_t *mask, int64_t n, float *out) {
    int64_t i;
    if (estimator == 1) {
        for (i = 0; i < n; i++) out[i] = lp[i] - lq[i];
    } else if (estimator == 2) {
        for (i = 0; i < n; i++) { float d = lp[i] - lq[i]; out[i] = 0.5f * d * d; }
    } else {
        for (i = 0; i < n; i++) out[i] = rlox_k3_f32(lq[i] - lp[i]);
    }
    if (mask != NULL) {
        for (i = 0; i < n; i++) out[i] = mask[i] != 0 ? out[i] : 0.0f;
    }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#endif
