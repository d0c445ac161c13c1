# Thread-count helpers that work with and without OpenMP (see rlox_omp.h).
cdef extern from "rlox_omp.h" nogil:
    int rlox_openmp_enabled()
    int rlox_omp_max_threads()
    int rlox_default_num_threads()
