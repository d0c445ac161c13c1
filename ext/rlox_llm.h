/* Fused float32 token-KL row kernels for ext/llm.pyx.
 *
 * One call reduces one sequence: sum over tokens t (optionally only where mask[t] != 0) of
 *   k1: d            k2: 0.5 * d * d            k3: exp(-d) - 1 + d      with d = lp[t] - lq[t]
 * (k3 is written below in terms of x = lq - lp = -d: exp(x) - x - 1).
 *
 * Speed: the token loop runs in blocks of RLOX_LANES independent float accumulators, so the
 * compiler vectorises it without -ffast-math (no reassociation is needed: lane j always sums
 * tokens j, j + LANES, ... in order). Lanes are flushed into a double every RLOX_CHUNK tokens,
 * so long rows keep float64-like accuracy in the sum.
 *
 * exp is our own branch-free float32 version (Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2,
 * degree-7 Taylor polynomial p(r) = exp(r) - 1 - r). k3 is then assembled as
 *   exp(x) - 1 - x = 2 * (h p + ((h r + (h - 1/2)) - x/2)),   h = 2^(k-1),
 * which never cancels catastrophically: for |x| < ln2/2 (k = 0) it is p itself, so small
 * differences keep full relative accuracy (torch's float32 one-liner loses every digit below
 * |x| ~ 1e-4), and the worst relative error over all finite inputs is 3.4e-7 (2.9 ulp, near
 * x = -0.37). h = 2^(k-1) rather than 2^k keeps the largest finite results (x up to 88.72)
 * finite. Overflow gives +inf, x = -inf gives +inf and NaN propagates, as in the torch
 * formula; x = +inf (a policy log-prob of -inf) gives +inf, where the torch formula gives
 * inf - inf = NaN.
 *
 * On x86-64 CPUs with AVX2 and FMA (every x86-64 CPU since 2013-2015) the rows and the
 * per-token form run on hand-written AVX2 code instead (rlox_kl_row_avx2_*, picked once at
 * import): GCC's auto-vectorised version of the clamps and selects above spills registers, and
 * the explicit version is 1.3x faster (1.6x with a mask, which it applies 16 tokens at a time
 * straight from the uint8 array instead of widening it first). The portable code remains for
 * other CPUs (baseline SSE2 on x86-64, NEON on arm64) and is compiled for the baseline only.
 * Both keep the same 16-lane summation order, so they differ at most by FMA contraction in the
 * last bits of single tokens; rlox_llm_set_simd(0) forces the portable code (the tests run
 * both).
 *
 * Results depend only on the inputs and the code path, never on the thread count: one row is
 * reduced by one thread.
 */
#ifndef RLOX_LLM_H
#define RLOX_LLM_H
#include <stdint.h>
#include <math.h>
#include <stddef.h>

#define RLOX_LANES 16
#define RLOX_CHUNK 1024          /* multiple of RLOX_LANES */

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
     * defined, and the NaN still propagates through the "- x/2" of the result */
    float xc = x > -86.0f ? x : -86.0f;
    xc = xc < hi ? xc : hi;
    /* k = round(xc / ln2) by the 1.5 * 2^23 trick (round-to-nearest, no libm call) */
    const float shift = 12582912.0f;
    float kf = (xc * 1.44269504088896341f + shift) - shift;
    float r = (xc - kf * 0.693359375f) + kf * 2.12194440e-4f;   /* ln2 = 0.693359375 - 2.1219e-4 */
    float p = r * r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f + r * (8.3333338e-3f
              + r * (1.3888889e-3f + r * 1.9841270e-4f)))));
    /* h = 2^(k-1) from exponent bits: k in [-124, 128] so k - 1 + 127 is a normal exponent */
    int32_t ki = (int32_t)kf;
    union { uint32_t u; float f; } h;
    h.u = (uint32_t)(ki + 126) << 23;
    float w = (h.f * r + (h.f - 0.5f)) - 0.5f * x;
    w = 2.0f * (h.f * p + w);
    return (x > hi) ? INFINITY : w;
}

/* The row reducer, written once as a macro over the per-token expression EXPR(a, b) with
 * a = lp[t], b = lq[t]. */
#define RLOX_KL_ROW(NAME, EXPR)                                                         \
static double NAME(const float *lp, const float *lq, const uint8_t *mask,                 \
                   int64_t n, int64_t *count) {                                         \
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

/* ---------------------------------------------------------------- AVX2 + FMA (x86-64) */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define RLOX_HAVE_AVX2_PATH 1
#include <immintrin.h>
#define RLOX_AVX2 __attribute__((target("avx2,fma")))

/* rlox_k3_f32 on 8 lanes, operation for operation */
RLOX_AVX2 static inline __m256 rlox_k3_avx2(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.72283935546875f);
    const __m256 shift = _mm256_set1_ps(12582912.0f);
    const __m256 half = _mm256_set1_ps(0.5f);
    /* max_ps(x, c) is "x > c ? x : c": a NaN x becomes -86, as in the scalar version */
    __m256 xc = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-86.0f)), hi);
    __m256 kf = _mm256_sub_ps(_mm256_fmadd_ps(xc, _mm256_set1_ps(1.44269504088896341f), shift),
                              shift);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fmadd_ps(kf, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 q = _mm256_fmadd_ps(r, _mm256_set1_ps(1.9841270e-4f), _mm256_set1_ps(1.3888889e-3f));
    q = _mm256_fmadd_ps(r, q, _mm256_set1_ps(8.3333338e-3f));
    q = _mm256_fmadd_ps(r, q, _mm256_set1_ps(4.1666668e-2f));
    q = _mm256_fmadd_ps(r, q, _mm256_set1_ps(1.6666667e-1f));
    q = _mm256_fmadd_ps(r, q, half);
    __m256 p = _mm256_mul_ps(_mm256_mul_ps(r, r), q);
    __m256i ki = _mm256_cvttps_epi32(kf);
    __m256 h = _mm256_castsi256_ps(
        _mm256_slli_epi32(_mm256_add_epi32(ki, _mm256_set1_epi32(126)), 23));
    __m256 w = _mm256_fmadd_ps(h, r, _mm256_sub_ps(h, half));
    w = _mm256_fnmadd_ps(half, x, w);
    w = _mm256_fmadd_ps(h, p, w);
    w = _mm256_add_ps(w, w);
    return _mm256_blendv_ps(w, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}

RLOX_AVX2 static inline __m256 rlox_est_avx2(int estimator, __m256 a, __m256 b) {
    if (estimator == 1) return _mm256_sub_ps(a, b);
    if (estimator == 2) {
        __m256 d = _mm256_sub_ps(a, b);
        return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), d), d);
    }
    return rlox_k3_avx2(_mm256_sub_ps(b, a));
}

/* 8 tokens from a uint8 mask as all-ones (counted) / all-zero lanes */
RLOX_AVX2 static inline __m256 rlox_mask8_avx2(const uint8_t *mask) {
    __m128i eq = _mm_cmpeq_epi8(_mm_loadl_epi64((const __m128i *)mask), _mm_setzero_si128());
    return _mm256_castsi256_ps(_mm256_cvtepi8_epi32(_mm_xor_si128(eq, _mm_set1_epi8(-1))));
}

/* The row reducer of RLOX_KL_ROW on two 8-lane accumulators (lanes 0-7 and 8-15 of the
 * portable version, combined in the same fixed order). The last n % 16 tokens go through the
 * same vector code on a zero-padded copy, so every token's value comes from one formula. */
#define RLOX_KL_ROW_AVX2(NAME, EST)                                                      \
RLOX_AVX2 static double NAME(const float *lp, const float *lq, const uint8_t *mask,      \
                             int64_t n, int64_t *count) {                               \
    double total = 0.0;                                                                 \
    int64_t cnt = 0, i = 0, end, j;                                                     \
    while (n - i >= RLOX_LANES) {                                                       \
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();                      \
        end = (n - i >= RLOX_CHUNK) ? i + RLOX_CHUNK : n - (n - i) % RLOX_LANES;         \
        if (mask == NULL) {                                                             \
            for (; i < end; i += 16) {                                                  \
                a0 = _mm256_add_ps(a0, rlox_est_avx2(EST, _mm256_loadu_ps(lp + i),       \
                                                     _mm256_loadu_ps(lq + i)));          \
                a1 = _mm256_add_ps(a1, rlox_est_avx2(EST, _mm256_loadu_ps(lp + i + 8),   \
                                                     _mm256_loadu_ps(lq + i + 8)));      \
            }                                                                           \
        } else {                                                                        \
            const __m128i z = _mm_setzero_si128();                                      \
            for (; i < end; i += 16) {                                                  \
                __m128i eq = _mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(mask + i)), z); \
                __m256 m0 = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(eq));               \
                __m256 m1 = _mm256_castsi256_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(eq, 8))); \
                cnt += 16 - __builtin_popcount((unsigned)_mm_movemask_epi8(eq));         \
                /* andnot: a masked-off token adds exactly 0, even where its value is NaN */ \
                a0 = _mm256_add_ps(a0, _mm256_andnot_ps(m0, rlox_est_avx2(EST,           \
                     _mm256_loadu_ps(lp + i), _mm256_loadu_ps(lq + i))));                \
                a1 = _mm256_add_ps(a1, _mm256_andnot_ps(m1, rlox_est_avx2(EST,           \
                     _mm256_loadu_ps(lp + i + 8), _mm256_loadu_ps(lq + i + 8))));        \
            }                                                                           \
        }                                                                               \
        __m256 s8 = _mm256_add_ps(a0, a1);                                              \
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps(s8, 1)); \
        s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));                                     \
        s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));                                       \
        total += (double)_mm_cvtss_f32(s4);                                             \
    }                                                                                   \
    if (i < n) {                                                                        \
        float ta[16] = {0}, tb[16] = {0}, tv[16];                                       \
        for (j = 0; j < n - i; j++) { ta[j] = lp[i + j]; tb[j] = lq[i + j]; }            \
        _mm256_storeu_ps(tv, rlox_est_avx2(EST, _mm256_loadu_ps(ta), _mm256_loadu_ps(tb))); \
        _mm256_storeu_ps(tv + 8, rlox_est_avx2(EST, _mm256_loadu_ps(ta + 8),             \
                                               _mm256_loadu_ps(tb + 8)));               \
        for (j = 0; j < n - i; j++)                                                     \
            if (mask == NULL || mask[i + j] != 0) { total += (double)tv[j]; cnt++; }     \
    }                                                                                   \
    *count = (mask == NULL) ? n : cnt;                                                  \
    return total;                                                                       \
}

RLOX_KL_ROW_AVX2(rlox_kl_row_avx2_k1, 1)
RLOX_KL_ROW_AVX2(rlox_kl_row_avx2_k2, 2)
RLOX_KL_ROW_AVX2(rlox_kl_row_avx2_k3, 3)

RLOX_AVX2 static void rlox_kl_tokens_avx2(int estimator, const float *lp, const float *lq,
                                          const uint8_t *mask, int64_t n, float *out) {
    int64_t i = 0, j;
    for (; i + 8 <= n; i += 8) {
        __m256 v = rlox_est_avx2(estimator, _mm256_loadu_ps(lp + i), _mm256_loadu_ps(lq + i));
        if (mask != NULL) v = _mm256_and_ps(rlox_mask8_avx2(mask + i), v);
        _mm256_storeu_ps(out + i, v);
    }
    if (i < n) {
        float ta[8] = {0}, tb[8] = {0}, tv[8];
        for (j = 0; j < n - i; j++) { ta[j] = lp[i + j]; tb[j] = lq[i + j]; }
        _mm256_storeu_ps(tv, rlox_est_avx2(estimator, _mm256_loadu_ps(ta), _mm256_loadu_ps(tb)));
        for (j = 0; j < n - i; j++)
            out[i + j] = (mask == NULL || mask[i + j] != 0) ? tv[j] : 0.0f;
    }
}
#endif

/* Which code the float32 KL kernels run: 1 = AVX2, 0 = portable. Set once at module import
 * by rlox_llm_set_simd (before any thread can call a kernel); read-only afterwards. */
static int rlox_llm_simd = 0;

/* Use the AVX2 code when enable != 0 and the CPU (and OS) support AVX2 and FMA; returns the
 * choice now in effect. */
static int rlox_llm_set_simd(int enable) {
    rlox_llm_simd = 0;
#ifdef RLOX_HAVE_AVX2_PATH
    if (enable) {
        __builtin_cpu_init();
        rlox_llm_simd = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    }
#else
    (void)enable;
#endif
    return rlox_llm_simd;
}

static inline double rlox_kl_row_f32(int estimator, const float *lp, const float *lq,
                                     const uint8_t *mask, int64_t n, int64_t *count) {
#ifdef RLOX_HAVE_AVX2_PATH
    if (rlox_llm_simd) {
        if (estimator == 1) return rlox_kl_row_avx2_k1(lp, lq, mask, n, count);
        if (estimator == 2) return rlox_kl_row_avx2_k2(lp, lq, mask, n, count);
        return rlox_kl_row_avx2_k3(lp, lq, mask, n, count);
    }
#endif
    if (estimator == 1) return rlox_kl_row_k1_f32(lp, lq, mask, n, count);
    if (estimator == 2) return rlox_kl_row_k2_f32(lp, lq, mask, n, count);
    return rlox_kl_row_k3_f32(lp, lq, mask, n, count);
}

/* Per-token values of one row into out (masked-off tokens get 0). */
static void rlox_kl_tokens_generic(int estimator, const float *lp, const float *lq,
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

static void rlox_kl_tokens_f32(int estimator, const float *lp, const float *lq,
                               const uint8_t *mask, int64_t n, float *out) {
#ifdef RLOX_HAVE_AVX2_PATH
    if (rlox_llm_simd) { rlox_kl_tokens_avx2(estimator, lp, lq, mask, n, out); return; }
#endif
    rlox_kl_tokens_generic(estimator, lp, lq, mask, n, out);
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
#endif
