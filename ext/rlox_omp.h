/* OpenMP shims so every kernel builds with or without OpenMP. */
#ifndef RLOX_OMP_H
#define RLOX_OMP_H
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
static inline int rlox_openmp_enabled(void) { return 1; }
static inline int rlox_omp_max_threads(void) { return omp_get_max_threads(); }
#else
static inline int rlox_openmp_enabled(void) { return 0; }
static inline int rlox_omp_max_threads(void) { return 1; }
#endif

/* RLOX_NUM_THREADS if set to a positive integer, else OpenMP's default. */
static inline int rlox_default_num_threads(void) {
    const char *s = getenv("RLOX_NUM_THREADS");
    if (s != NULL && s[0] != '\0') {
        char *end = NULL;
        long v = strtol(s, &end, 10);
        if (end != s && *end == '\0' && v > 0 && v < 4096) return (int)v;
    }
    return rlox_omp_max_threads();
}
#endif
