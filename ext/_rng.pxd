# Per-stream random numbers (xoshiro256** seeded by splitmix64); see rlox_rng.h.
# One rng_t per env / buffer / sampler: never shared across threads.
from _types cimport uint64_t

cdef extern from "rlox_rng.h" nogil:
    ctypedef struct rng_t "rlox_rng_t":
        uint64_t s[4]          # xoshiro256** state
    void rng_seed "rlox_rng_seed"(rng_t* r, uint64_t seed)
    uint64_t rng_next "rlox_rng_next"(rng_t* r)
    double rng_uniform "rlox_rng_uniform"(rng_t* r)
    double rng_uniform_range "rlox_rng_uniform_range"(rng_t* r, double low, double high)
    uint64_t rng_below "rlox_rng_below"(rng_t* r, uint64_t n)
    double rng_normal "rlox_rng_normal"(rng_t* r)
