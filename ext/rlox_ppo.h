/* Float32 loops of the compiled PPO / A2C update (ext/ppo_update.pyx): everything between its BLAS
 * calls that touches a whole activation or parameter buffer.
 *
 *   rlox_bias_act_f32   y[r, j] = act(y[r, j] + b[j])     (act: Tanh or identity)
 *   rlox_tanh_grad_f32  d[i] *= 1 - h[i]^2                  (Tanh's backward from its output)
 *   rlox_colsum_f32     out[j] = sum_r a[r, j]              (bias gradients)
 *   rlox_sumsq_f32      sum_i x[i]^2, in double             (global gradient norm)
 *   rlox_scale_f32      x[i] *= s                           (gradient clipping)
 *   rlox_adam_f32       one torch.optim.Adam step over a flat buffer
 *   rlox_rmsprop_f32    one torch.optim.RMSprop step over a flat buffer (A2C)
 *
 * Speed: each function is built three times on x86-64 Linux with GCC
 * (x86-64-v4 / AVX-512, x86-64-v3 / AVX2+FMA, baseline SSE2) and the loader picks the best one
 * for the CPU at import (target_clones). The loops are written so GCC vectorises them without
 * -ffast-math: no reassociation (the sum of squares keeps RLOX_PPO_LANES independent float
 * lanes, flushed into a double every RLOX_PPO_CHUNK values), selects instead of branches.
 *
 * tanh is our own branch-free float32 version: for |x| < 0.25 the odd Taylor series to x^9
 * (relative error < 1e-8), above it 1 - 2 / (exp(2|x|) + 1) with exp from a Cody-Waite
 * reduction and a degree-7 polynomial (a few ulp; no cancellation, since the result is >= 0.24
 * there); |x| is clamped to 9, where tanh rounds to 1 in float32; the sign is copied back and
 * NaN propagates. torch's own float32 tanh (SLEEF) is within 1 ulp, so the two differ by a few
 * ulp at most, far below the float32 noise of the matrix products.
 *
 * Results depend only on the inputs and the CPU's clone (FMA contraction may change the last
 * bit between the clones).
 */
#ifndef RLOX_PPO_H
#define RLOX_PPO_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#define RLOX_PPO_LANES 16
#define RLOX_PPO_CHUNK 1024      /* multiple of RLOX_PPO_LANES */

/* target_clones needs GCC >= 11 and the loader's ifunc support (glibc; not musl) */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__GLIBC__) \
    && (__GNUC__ >= 11)
#define RLOX_PPO_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define RLOX_PPO_CLONES
#endif

/* every extension that uses one of these functions includes them all (ext/rlox_mlp.pxd only
 * needs the bias + Tanh): the others are unused there, which is fine */
#if defined(__GNUC__)
#define RLOX_PPO_MAYBE_UNUSED __attribute__((unused))
#else
#define RLOX_PPO_MAYBE_UNUSED
#endif

/* no-trapping-math lets GCC if-convert the selects below for SSE/AVX2, and no-math-errno lets
 * it use the sqrt instruction in Adam's vectorised loop (rlox never reads errno or the FP
 * exception flags). Values are unaffected: this is not -ffast-math (no reassociation, no
 * finite-math assumptions). Scoped to this header's functions. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("no-trapping-math", "no-math-errno")
#endif

/* tanh(x) in float32 (see the header comment). Inline so it vectorises in the caller. */
static inline __attribute__((always_inline)) float rlox_tanh_f32(float x) {
    float ax = fabsf(x);
    float a = ax < 9.0f ? ax : 9.0f;          /* a NaN x becomes 9 here (defined int conversion) */
    /* exp(2a), 2a in [0, 18]: k = round(2a / ln2) by the 1.5 * 2^23 trick, r = 2a - k ln2 */
    const float shift = 12582912.0f;
    float y = 2.0f * a;
    float kf = (y * 1.44269504088896341f + shift) - shift;
    float r = (y - kf * 0.693359375f) + kf * 2.12194440e-4f;   /* ln2 = 0.693359375 - 2.1219e-4 */
    float p = 1.0f + r * (1.0f + r * (0.5f + r * (1.66666672e-1f + r * (4.16666679e-2f
              + r * (8.33333377e-3f + r * (1.38888892e-3f + r * 1.98412701e-4f))))));
    union { uint32_t u; float f; } s;
    s.u = (uint32_t)((int32_t)kf + 127) << 23;                 /* 2^k, k in [0, 26] */
    float big = 1.0f - 2.0f / (s.f * p + 1.0f);
    /* |x| < 0.25: x - x^3/3 + 2x^5/15 - 17x^7/315 + 62x^9/2835 */
    float a2 = a * a;
    float small = a + a * a2 * (-3.33333343e-1f + a2 * (1.33333340e-1f + a2 * (-5.39682545e-2f
                  + a2 * 2.18694881e-2f)));
    float t = a < 0.25f ? small : big;
    t = copysignf(t, x);
    return x != x ? x : t;
}

/* y [rows, cols] (row-major) += b [cols] per row, then Tanh when apply_tanh. */
RLOX_PPO_MAYBE_UNUSED RLOX_PPO_CLONES static void rlox_bias_act_f32(float *y, const float *b, int64_t rows, int64_t cols,
                                              int apply_tanh) {
    int64_t r, j;
    for (r = 0; r < rows; r++) {
        float *yr = y + r * cols;
        if (apply_tanh) {
            for (j = 0; j < cols; j++) yr[j] = rlox_tanh_f32(yr[j] + b[j]);
        } else {
            for (j = 0; j < cols; j++) yr[j] = yr[j] + b[j];
        }
    }
}

/* d[i] = d[i] * (1 - h[i]^2): the gradient through h = tanh(z), as torch's tanh_backward. */
RLOX_PPO_MAYBE_UNUSED RLOX_PPO_CLONES static void rlox_tanh_grad_f32(float *d, const float *h, int64_t n) {
    int64_t i;
    for (i = 0; i < n; i++) d[i] = d[i] * (1.0f - h[i] * h[i]);
}

/* out[j] = sum over rows r of a[r, j] (rows summed in order, per column). */
RLOX_PPO_MAYBE_UNUSED RLOX_PPO_CLONES static void rlox_colsum_f32(const float *a, int64_t rows, int64_t cols, float *out) {
    int64_t r, j;
    for (j = 0; j < cols; j++) out[j] = 0.0f;
    for (r = 0; r < rows; r++) {
        const float *ar = a + r * cols;
        for (j = 0; j < cols; j++) out[j] += ar[j];
    }
}

/* sum of x[i]^2 over n values: RLOX_PPO_LANES float lanes, flushed to a double per chunk. */
RLOX_PPO_MAYBE_UNUSED RLOX_PPO_CLONES static double rlox_sumsq_f32(const float *x, int64_t n) {
    double total = 0.0;
    int64_t i = 0, end, j;
    float acc[RLOX_PPO_LANES];
    while (n - i >= RLOX_PPO_LANES) {
        for (j = 0; j < RLOX_PPO_LANES; j++) acc[j] = 0.0f;
        end = (n - i >= RLOX_PPO_CHUNK) ? i + RLOX_PPO_CHUNK : n - (n - i) % RLOX_PPO_LANES;
        for (; i < end; i += RLOX_PPO_LANES)
            for (j = 0; j < RLOX_PPO_LANES; j++) acc[j] += x[i + j] * x[i + j];
        for (j = 0; j < RLOX_PPO_LANES; j++) total += (double)acc[j];
    }
    for (; i < n; i++) total += (double)x[i] * (double)x[i];
    return total;
}

RLOX_PPO_MAYBE_UNUSED RLOX_PPO_CLONES static void rlox_scale_f32(float *x, int64_t n, float s) {
    int64_t i;
    for (i = 0; i < n; i++) x[i] = x[i] * s;
}

/* One Adam step (Kingma and Ba, 2015) as torch.optim.Adam writes it (no weight decay, no
 * amsgrad), over n parameters p with gradients g and moments m, v:
 *   m = lerp(m, g, 1 - beta1)          v = beta2 v + (1 - beta2) g^2
 *   p -= step_size * m / (sqrt(v) / bc2_sqrt + eps)
 * with step_size = lr / (1 - beta1^t) and bc2_sqrt = sqrt(1 - beta2^t) from the caller.
 *
 * GCC vectorises no loop that calls sqrtf unless the whole file is built with -fno-math-errno
 * (neither "#pragma GCC optimize" nor the optimize attribute changes that), so this one loop
 * is written with x86 intrinsics, AVX-512 and AVX2 versions picked by a CPU check, and a
 * scalar version for other CPUs and for the tails. Every version does the same IEEE
 * operations in the same order. */
static inline __attribute__((always_inline)) void rlox_adam_scalar(
        float *p, float *m, float *v, const float *g, int64_t i, int64_t n, float one_minus_beta1,
        float beta2, float one_minus_beta2, float step_size, float bc2_sqrt, float eps) {
    for (; i < n; i++) {
        float gi = g[i];
        float mi = m[i] + one_minus_beta1 * (gi - m[i]);
        float vi = v[i] * beta2 + (one_minus_beta2 * gi) * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = p[i] - step_size * (mi / (sqrtf(vi) / bc2_sqrt + eps));
    }
}

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define RLOX_PPO_ADAM_X86 1
/* one vector step: the scalar formula above, lane by lane */
#define RLOX_ADAM_VEC(W, LOAD, STORE, SET1, ADD, SUB, MUL, DIV, SQRT)                         \
    {                                                                                         \
        const W c1 = SET1(one_minus_beta1), b2 = SET1(beta2), c2 = SET1(one_minus_beta2);     \
        const W ss = SET1(step_size), bc = SET1(bc2_sqrt), ep = SET1(eps);                    \
        for (; i + (int64_t)(sizeof(W) / sizeof(float)) <= n; i += sizeof(W) / sizeof(float)) { \
            W gi = LOAD(g + i), mi = LOAD(m + i), vi = LOAD(v + i);                           \
            mi = ADD(mi, MUL(c1, SUB(gi, mi)));                                               \
            vi = ADD(MUL(vi, b2), MUL(MUL(c2, gi), gi));                                      \
            STORE(m + i, mi);                                                                 \
            STORE(v + i, vi);                                                                 \
            STORE(p + i, SUB(LOAD(p + i), MUL(ss, DIV(mi, ADD(DIV(SQRT(vi), bc), ep)))));      \
        }                                                                                     \
    }

__attribute__((target("avx512f"))) static void rlox_adam_avx512(
        float *p, float *m, float *v, const float *g, int64_t n, float one_minus_beta1, float beta2,
        float one_minus_beta2, float step_size, float bc2_sqrt, float eps) {
    int64_t i = 0;
    RLOX_ADAM_VEC(__m512, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_add_ps,
                  _mm512_sub_ps, _mm512_mul_ps, _mm512_div_ps, _mm512_sqrt_ps)
    rlox_adam_scalar(p, m, v, g, i, n, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps);
}

__attribute__((target("avx"))) static void rlox_adam_avx(
        float *p, float *m, float *v, const float *g, int64_t n, float one_minus_beta1, float beta2,
        float one_minus_beta2, float step_size, float bc2_sqrt, float eps) {
    int64_t i = 0;
    RLOX_ADAM_VEC(__m256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_add_ps,
                  _mm256_sub_ps, _mm256_mul_ps, _mm256_div_ps, _mm256_sqrt_ps)
    rlox_adam_scalar(p, m, v, g, i, n, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps);
}

static void rlox_adam_sse2(
        float *p, float *m, float *v, const float *g, int64_t n, float one_minus_beta1, float beta2,
        float one_minus_beta2, float step_size, float bc2_sqrt, float eps) {
    int64_t i = 0;
    RLOX_ADAM_VEC(__m128, _mm_loadu_ps, _mm_storeu_ps, _mm_set1_ps, _mm_add_ps, _mm_sub_ps,
                  _mm_mul_ps, _mm_div_ps, _mm_sqrt_ps)
    rlox_adam_scalar(p, m, v, g, i, n, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps);
}
#endif

RLOX_PPO_MAYBE_UNUSED static void rlox_adam_f32(float *p, float *m, float *v, const float *g, int64_t n,
                          float one_minus_beta1, float beta2, float one_minus_beta2,
                          float step_size, float bc2_sqrt, float eps) {
#ifdef RLOX_PPO_ADAM_X86
    if (__builtin_cpu_supports("avx512f"))
        rlox_adam_avx512(p, m, v, g, n, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps);
    else if (__builtin_cpu_supports("avx"))
        rlox_adam_avx(p, m, v, g, n, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps);
    else
        rlox_adam_sse2(p, m, v, g, n, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps);
#else
    rlox_adam_scalar(p, m, v, g, 0, n, one_minus_beta1, beta2, one_minus_beta2, step_size, bc2_sqrt, eps);
#endif
}

/* One RMSprop step (Tieleman and Hinton, 2012) as torch.optim.RMSprop writes it (no momentum,
 * not centred, no weight decay), over n parameters p with gradients g and square averages v:
 *   v = alpha v + (1 - alpha) g^2        p += (-lr g) / (sqrt(v) + eps)
 * torch's order of operations: _foreach_mul_(v, alpha), _foreach_addcmul_(v, g, g, 1 - alpha)
 * (v + ((1 - alpha) g) g), sqrt, + eps, _foreach_addcdiv_(p, g, avg, -lr) (p + (-lr g) / avg).
 * eps is added after the sqrt, as torch does (TF, and so OpenAI baselines, add it inside). As
 * Adam above: x86 intrinsics for the sqrt loop, the same IEEE operations in every version. */
static inline __attribute__((always_inline)) void rlox_rmsprop_scalar(
        float *p, float *v, const float *g, int64_t i, int64_t n, float alpha, float one_minus_alpha,
        float neg_lr, float eps) {
    for (; i < n; i++) {
        float gi = g[i];
        float vi = v[i] * alpha;
        vi = vi + (one_minus_alpha * gi) * gi;
        v[i] = vi;
        p[i] = p[i] + (neg_lr * gi) / (sqrtf(vi) + eps);
    }
}

#ifdef RLOX_PPO_ADAM_X86
#define RLOX_RMSPROP_VEC(W, LOAD, STORE, SET1, ADD, MUL, DIV, SQRT)                            \
    {                                                                                         \
        const W al = SET1(alpha), c = SET1(one_minus_alpha), nl = SET1(neg_lr), ep = SET1(eps); \
        for (; i + (int64_t)(sizeof(W) / sizeof(float)) <= n; i += sizeof(W) / sizeof(float)) { \
            W gi = LOAD(g + i), vi = MUL(LOAD(v + i), al);                                    \
            vi = ADD(vi, MUL(MUL(c, gi), gi));                                                \
            STORE(v + i, vi);                                                                 \
            STORE(p + i, ADD(LOAD(p + i), DIV(MUL(nl, gi), ADD(SQRT(vi), ep))));              \
        }                                                                                     \
    }

__attribute__((target("avx512f"))) static void rlox_rmsprop_avx512(
        float *p, float *v, const float *g, int64_t n, float alpha, float one_minus_alpha, float neg_lr,
        float eps) {
    int64_t i = 0;
    RLOX_RMSPROP_VEC(__m512, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_add_ps,
                     _mm512_mul_ps, _mm512_div_ps, _mm512_sqrt_ps)
    rlox_rmsprop_scalar(p, v, g, i, n, alpha, one_minus_alpha, neg_lr, eps);
}

__attribute__((target("avx"))) static void rlox_rmsprop_avx(
        float *p, float *v, const float *g, int64_t n, float alpha, float one_minus_alpha, float neg_lr,
        float eps) {
    int64_t i = 0;
    RLOX_RMSPROP_VEC(__m256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_add_ps,
                     _mm256_mul_ps, _mm256_div_ps, _mm256_sqrt_ps)
    rlox_rmsprop_scalar(p, v, g, i, n, alpha, one_minus_alpha, neg_lr, eps);
}

static void rlox_rmsprop_sse2(
        float *p, float *v, const float *g, int64_t n, float alpha, float one_minus_alpha, float neg_lr,
        float eps) {
    int64_t i = 0;
    RLOX_RMSPROP_VEC(__m128, _mm_loadu_ps, _mm_storeu_ps, _mm_set1_ps, _mm_add_ps, _mm_mul_ps,
                     _mm_div_ps, _mm_sqrt_ps)
    rlox_rmsprop_scalar(p, v, g, i, n, alpha, one_minus_alpha, neg_lr, eps);
}
#endif

RLOX_PPO_MAYBE_UNUSED static void rlox_rmsprop_f32(float *p, float *v, const float *g, int64_t n, float alpha,
                             float one_minus_alpha, float neg_lr, float eps) {
#ifdef RLOX_PPO_ADAM_X86
    if (__builtin_cpu_supports("avx512f"))
        rlox_rmsprop_avx512(p, v, g, n, alpha, one_minus_alpha, neg_lr, eps);
    else if (__builtin_cpu_supports("avx"))
        rlox_rmsprop_avx(p, v, g, n, alpha, one_minus_alpha, neg_lr, eps);
    else
        rlox_rmsprop_sse2(p, v, g, n, alpha, one_minus_alpha, neg_lr, eps);
#else
    rlox_rmsprop_scalar(p, v, g, 0, n, alpha, one_minus_alpha, neg_lr, eps);
#endif
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif

#endif
