/* Per-stream random numbers for rlox kernels: xoshiro256** seeded through splitmix64.
 *
 * Each env, buffer or sampler owns one rlox_rng_t, so no generator is shared across threads
 * and results never depend on the thread count. Everything is static inline: each extension
 * module compiles its own copy. */
#ifndef RLOX_RNG_H
#define RLOX_RNG_H
#include <math.h>
#include <stdint.h>

typedef struct { uint64_t s[4]; } rlox_rng_t;

static inline uint64_t rlox_splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* Seed a stream; distinct seeds give independent streams. */
static inline void rlox_rng_seed(rlox_rng_t *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = rlox_splitmix64(&x);
}

static inline uint64_t rlox_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

/* Next 64 random bits. */
static inline uint64_t rlox_rng_next(rlox_rng_t *r) {
    uint64_t *s = r->s;
    uint64_t result = rlox_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rlox_rotl(s[3], 45);
    return result;
}

/* Uniform double in [0, 1), 53 random bits. */
static inline double rlox_rng_uniform(rlox_rng_t *r) {
    return (double)(rlox_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform double in [low, high). */
static inline double rlox_rng_uniform_range(rlox_rng_t *r, double low, double high) {
    return low + (high - low) * rlox_rng_uniform(r);
}

/* Unbiased integer in [0, n), n > 0 (Lemire's multiply-shift with rejection). */
static inline uint64_t rlox_rng_below(rlox_rng_t *r, uint64_t n) {
    uint64_t x = rlox_rng_next(r);
    __uint128_t m = (__uint128_t)x * n;
    uint64_t low = (uint64_t)m;
    if (low < n) {
        uint64_t threshold = (0 - n) % n;
        while (low < threshold) {
            x = rlox_rng_next(r);
            m = (__uint128_t)x * n;
            low = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

/* Standard normal draw (Box-Muller, one value per call). */
static inline double rlox_rng_normal(rlox_rng_t *r) {
    double u1 = 1.0 - rlox_rng_uniform(r);  /* (0, 1], safe for log */
    double u2 = rlox_rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
#endif
