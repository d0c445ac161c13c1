# The actor-critic MLP of rlox.policies, in one place: Linear -> Tanh -> ... -> Linear, float32,
# each weight [out, in] row-major exactly as torch's nn.Linear holds it. Both compiled kernels
# use this definition and read the weights where they are (nothing is copied or transposed):
#   ext/ppo_update.pyx (PPOUpdateKernel): pointers into its flat parameter buffer, which the
#       torch parameters are views of;
#   ext/hybrid.pyx (CompiledPolicy / RolloutKernel, the compiled collection): pointers to the
#       torch parameters' own memory (so, with the compiled update on, that same buffer).
#
# Forward over a batch of B rows with BLAS sgemm (scipy's cython_blas; column-major BLAS on
# row-major arrays, see ext/ppo_update.pyx's header), then bias + Tanh (rlox_ppo.h):
#   Y [B, out] = H W^T  ->  sgemm('T', 'N', out, B, in, W, in, H, in, Y, out)
from libc.stdlib cimport malloc, free
from scipy.linalg.cython_blas cimport sgemm
from _types cimport float32_t
from rlox_ppo cimport rlox_bias_act_f32


cdef enum:
    MLP_MAX_LAYERS = 16       # Linear layers per network (callers keep activation pointers on the stack)


cdef struct mlp_t:
    int n_layers              # Linear layers (>= 1); Tanh after all but the last
    int max_width             # widest layer output
    int* dims                 # [n_layers + 1]: dims[0] = input size, dims[l + 1] = output size of layer l
    const float32_t** w       # [n_layers]: layer l's weight [dims[l + 1], dims[l]], row-major (not owned)
    const float32_t** b       # [n_layers]: layer l's bias [dims[l + 1]] (not owned)


cdef inline int mlp_alloc(mlp_t* m, int n_layers, const int* dims) except -1:
    """Shape ``m`` as Linear layers dims[0] -> dims[1] -> ... -> dims[n_layers]; the weight and
    bias pointers start NULL (the owner points them at its parameters)."""
    cdef int l
    if n_layers < 1 or n_layers > MLP_MAX_LAYERS:
        raise ValueError(f"an MLP has 1 to {MLP_MAX_LAYERS} Linear layers, got {n_layers}")
    m.n_layers = n_layers
    m.dims = <int*>malloc((n_layers + 1) * sizeof(int))
    m.w = <const float32_t**>malloc(n_layers * sizeof(float32_t*))
    m.b = <const float32_t**>malloc(n_layers * sizeof(float32_t*))
    if m.dims == NULL or m.w == NULL or m.b == NULL:
        raise MemoryError()
    m.max_width = 1
    for l in range(n_layers + 1):
        m.dims[l] = dims[l]
    for l in range(n_layers):
        m.w[l] = NULL
        m.b[l] = NULL
        if dims[l + 1] > m.max_width:
            m.max_width = dims[l + 1]
    return 0


cdef inline void mlp_free(mlp_t* m) noexcept:
    free(m.dims); free(<void*>m.w); free(<void*>m.b)
    m.dims = NULL; m.w = NULL; m.b = NULL


cdef inline void mlp_forward(const mlp_t* m, const float32_t* x, int B, float32_t** act) noexcept nogil:
    """act[l] [B, dims[l + 1]] = output of layer l (after its Tanh) for the B rows of x
    [B, dims[0]]; act[n_layers - 1] is the network's output. B >= 1."""
    cdef int l, n_in, n_out
    cdef float32_t one = 1.0, zero = 0.0
    cdef const float32_t* h = x
    cdef char tr = b'T', nt = b'N'
    for l in range(m.n_layers):
        n_in = m.dims[l]
        n_out = m.dims[l + 1]
        sgemm(&tr, &nt, &n_out, &B, &n_in, &one, <float32_t*>m.w[l], &n_in,
              <float32_t*>h, &n_in, &zero, act[l], &n_out)
        rlox_bias_act_f32(act[l], m.b[l], B, n_out, l < m.n_layers - 1)
        h = act[l]


cdef inline Py_ssize_t mlp_act_size(const mlp_t* m, Py_ssize_t B) noexcept nogil:
    """Floats of activation scratch ``mlp_forward`` needs for B rows."""
    cdef Py_ssize_t total = 0
    cdef int l
    for l in range(m.n_layers):
        total += B * m.dims[l + 1]
    return total


cdef inline float32_t* mlp_act_point(const mlp_t* m, float32_t* base, Py_ssize_t B,
                                     float32_t** act) noexcept nogil:
    """Point act[l] at consecutive [B, dims[l + 1]] blocks of ``base``; returns the end."""
    cdef int l
    for l in range(m.n_layers):
        act[l] = base
        base += B * m.dims[l + 1]
    return base
