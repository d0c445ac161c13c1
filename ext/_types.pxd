# Shared C types for every rlox kernel (the one place they are declared).
from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint32_t, uint64_t, uintptr_t

ctypedef double float64_t
ctypedef float float32_t
ctypedef int64_t intp_t        # indices and sizes passed across the boundary
ctypedef uint8_t bool_t        # NumPy bool storage
ctypedef uint32_t token_t      # LLM token ids

# Fused floating type for kernels that exist in float32 and float64.
ctypedef fused floating_t:
    float
    double
