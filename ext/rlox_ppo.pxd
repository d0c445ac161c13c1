# The float32 loops of the compiled PPO / A2C update (rlox_ppo.h; each function's formula is
# in the header). All pointers are caller-owned flat buffers; nothing here allocates, raises or
# touches Python, so every function is callable without the GIL.
from _types cimport int64_t

cdef extern from "rlox_ppo.h" nogil:
    # y [rows, cols] += b [cols] per row, then Tanh when apply_tanh (IN/OUT y; IN b)
    void rlox_bias_act_f32(float* y, const float* b, int64_t rows, int64_t cols, int apply_tanh)
    # d[i] *= 1 - h[i]^2: Tanh's backward from its output h (IN/OUT d; IN h)
    void rlox_tanh_grad_f32(float* d, const float* h, int64_t n)
    # out [cols] = column sums of a [rows, cols] (IN a; OUT out)
    void rlox_colsum_f32(const float* a, int64_t rows, int64_t cols, float* out)
    # sum of x[i]^2, accumulated in double (IN x)
    double rlox_sumsq_f32(const float* x, int64_t n)
    # x[i] *= s (IN/OUT x)
    void rlox_scale_f32(float* x, int64_t n, float s)
    # one torch.optim.Adam step (IN/OUT p, m, v; IN g); step_size = lr / (1 - beta1^t),
    # bc2_sqrt = sqrt(1 - beta2^t)
    void rlox_adam_f32(float* p, float* m, float* v, const float* g, int64_t n,
                       float one_minus_beta1, float beta2, float one_minus_beta2,
                       float step_size, float bc2_sqrt, float eps)
    # one torch.optim.RMSprop step, eps after the sqrt (IN/OUT p, v; IN g); neg_lr = -lr
    void rlox_rmsprop_f32(float* p, float* v, const float* g, int64_t n, float alpha,
                          float one_minus_alpha, float neg_lr, float eps)
