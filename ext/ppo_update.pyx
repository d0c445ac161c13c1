# The compiled on-policy update of PPO (and HybridPPO) and A2C: minibatch steps for the
# actor-critic MLPs of rlox.policies, float32, without the GIL.
#
# One step is exactly what rlox.losses.PPOLoss + loss.backward() + clip_grad_norm_ +
# torch.optim.Adam.step() do in rlox.algorithms.ppo.PPO._update:
#
#   gather the minibatch rows -> normalise its advantages (mean, Bessel std + 1e-8)
#   -> forward actor and critic (Linear/Tanh ..., Linear: ext/rlox_mlp.pxd's mlp_forward, the
#      one definition of the MLP, shared with the compiled collection in ext/hybrid.pyx)
#   -> per row: log-prob and entropy of the head (Categorical, or diagonal Gaussian with a
#      state-independent log_std), ratio, clipped surrogate, value loss (plain or clipped),
#      metrics, and the loss's gradient with respect to the head outputs (written by hand)
#   -> [target_kl: stop here, before stepping, when approx_kl > kl_limit]
#   -> backward through both MLPs (sgemm for dW and the input deltas, column sums for biases)
#   -> global gradient-norm clipping -> Adam (bias-corrected, eps after the sqrt).
#
# A2C's step (loss="a2c", rlox.algorithms.a2c.A2C._update) is the same pipeline with its loss:
# no ratio and no clipping, policy loss -(A log pi(a|s)).mean(), value loss 0.5 (R - V)^2,
# entropy bonus, one step on the whole rollout; and with torch.optim.RMSprop
# (optimizer="rmsprop": alpha, eps after the sqrt as torch places it) or Adam.
#
# Where torch's max/clamp have ties or boundaries, their gradient rules are followed: a tie of
# torch.max sends half the gradient to each side, clamp passes the gradient on [lo, hi]
# inclusive. The tests (tests/test_ppo_update_kernel.py) compare steps with torch.
#
# Memory: the kernel owns four flat float32 NumPy buffers of n_params values (parameters,
# gradients, Adam's two moments; RMSprop keeps its square average in the second), laid out in
# torch's parameter order for rlox.policies (log_std for a Gaussian head, critic layers, actor
# layers; each weight [out, in] row-major as nn.Linear holds it). ``parameters()`` returns NumPy
# views into the parameter buffer, which PPO and A2C hand to their torch modules
# (``param.data = torch.from_numpy(view)``), so torch and the kernel read and write the same
# memory: there is nothing to copy. The compiled collection reads it in place too. Scratch buffers are sized for the largest minibatch seen
# and reused. The tests (tests/test_a2c_compiled_update.py) compare A2C's steps with torch too.
#
# Matrix layout for sgemm (column-major BLAS on row-major arrays): a row-major [r, c] array
# is the column-major [c, r] matrix, its transpose. So with W [out, in] and H [B, in]:
#   forward   Y [B, out] = H W^T    -> sgemm('T', 'N', out, B, in, W, in, H, in, Y, out)
#   weights  dW [out, in] = dY^T H  -> sgemm('N', 'T', in, out, B, H, in, dY, out, dW, in)
#   inputs   dH [B, in] = dY W      -> sgemm('N', 'N', in, B, out, W, in, dY, out, dH, in)
from libc.math cimport sqrt, pow, expf, logf, fabsf, INFINITY, NAN, isnan, isfinite
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from scipy.linalg.cython_blas cimport sgemm
from _types cimport float32_t, int64_t, intp_t
from _checks cimport exact_array
from rlox_mlp cimport mlp_t, mlp_alloc, mlp_free, mlp_forward
from rlox_ppo cimport (rlox_tanh_grad_f32, rlox_colsum_f32, rlox_sumsq_f32,
                      rlox_scale_f32, rlox_adam_f32, rlox_rmsprop_f32)
from contextlib import contextmanager
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

# BLAS threads, through threadpoolctl (scikit-learn's choice). OpenBLAS splits an sgemm over its
# threads above about 2.6e5 multiply-adds (a 256 x 64 x 64 product is 1e6), and at these sizes
# waking them costs far more than the products take: PPO's CartPole preset update (minibatch
# 256, two 64-wide layers) ran 377k rows/s with one BLAS thread and 2k with two on a loaded
# 2-core machine. So ``run_epoch`` limits the BLAS to ``min(blas_threads, rlox threads)``
# (``rlox.set_num_threads`` caps it, as it does every kernel's OpenMP threads) and restores the
# previous counts afterwards. The controller scans the loaded libraries once, on first use
# (about 1 ms); each limit-and-restore then costs about 20 us.
_blas_controller = None


def _blas_limits(int n):
    """Context manager: every loaded BLAS limited to ``n`` threads, restored on exit."""
    global _blas_controller
    if _blas_controller is None:
        from threadpoolctl import ThreadpoolController
        _blas_controller = ThreadpoolController()
    return _blas_controller.limit(limits=n, user_api="blas")


cdef float32_t HALF_LOG_2PI = 0.91893853320467274  # 0.5 * log(2 pi)
cdef float32_t ENT_CONST = 1.4189385332046727      # 0.5 + 0.5 * log(2 pi) (Gaussian entropy per dim)
cdef intp_t INT_LIMIT = 2147483647                  # BLAS takes 32-bit ints

# Metric slots, in PPOLoss's names; A2C's update reports all but approx_kl and clip_fraction.
METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "loss",
           "explained_variance")
A2C_METRICS = ("policy_loss", "value_loss", "entropy", "loss", "explained_variance")
LOSSES = ("ppo", "a2c")
OPTIMIZERS = ("adam", "rmsprop")
# torch's optimizer state names of each optimizer's flat buffers (get/set_optimizer_state)
OPTIMIZER_STATE = {"adam": ("exp_avg", "exp_avg_sq"), "rmsprop": ("square_avg",)}
cdef enum:
    M_PG = 0
    M_V = 1
    M_ENT = 2
    M_KL = 3
    M_CLIP = 4
    M_LOSS = 5
    M_EV = 6
    N_METRICS = 7

cdef enum:
    LOSS_PPO = 0
    LOSS_A2C = 1
    OPT_ADAM = 0
    OPT_RMSPROP = 1


# ----------------------------------------------------------------------------- MLP
# The network and its forward pass are ext/rlox_mlp.pxd's (shared with the compiled collection,
# ext/hybrid.pyx); the update adds where each layer sits in the flat buffers (for the
# gradients) and the activations it keeps for the backward pass.
cdef struct net_t:
    mlp_t mlp                 # layers; mlp.w / mlp.b point into the parameter buffer
    intp_t* w_off             # [n_layers]: offset of layer l's weight [out, in] in the flat buffers
    intp_t* b_off             # [n_layers]: offset of layer l's bias [out]
    float32_t** act           # [n_layers]: scratch [cap, dims[l + 1]], layer outputs (after Tanh)


cdef int net_alloc(net_t* net, list sizes, intp_t* offset) except -1:
    """Lay out Linear layers sizes[0] -> sizes[1] -> ... from ``offset`` (advanced past them)."""
    cdef int l, n = len(sizes) - 1
    cdef int* dims = <int*>malloc((n + 1) * sizeof(int))
    if dims == NULL:
        raise MemoryError()
    for l in range(n + 1):
        dims[l] = sizes[l]
    try:
        mlp_alloc(&net.mlp, n, dims)
    finally:
        free(dims)
    net.w_off = <intp_t*>malloc(n * sizeof(intp_t))
    net.b_off = <intp_t*>malloc(n * sizeof(intp_t))
    net.act = <float32_t**>malloc(n * sizeof(float32_t*))
    if net.w_off == NULL or net.b_off == NULL or net.act == NULL:
        raise MemoryError()
    for l in range(n):
        net.w_off[l] = offset[0]
        offset[0] += <intp_t>sizes[l] * sizes[l + 1]
        net.b_off[l] = offset[0]
        offset[0] += sizes[l + 1]
        net.act[l] = NULL
    return 0


cdef void net_point(net_t* net, const float32_t* params) noexcept:
    """Point the layers' weights and biases at their places in ``params``."""
    cdef int l
    for l in range(net.mlp.n_layers):
        net.mlp.w[l] = params + net.w_off[l]
        net.mlp.b[l] = params + net.b_off[l]


cdef void net_free(net_t* net) noexcept:
    mlp_free(&net.mlp)
    free(net.w_off); free(net.b_off); free(net.act)
    net.w_off = NULL; net.b_off = NULL; net.act = NULL


cdef void net_backward(const net_t* net, float32_t* params, float32_t* grads, const float32_t* x,
                       float32_t* d_head, float32_t* d0, float32_t* d1, int B) noexcept nogil:
    """Gradients of every layer's weight and bias into ``grads`` from d_head [B, dims[-1]], the
    loss's gradient with respect to the net's outputs (after ``net_forward`` on the same x).
    d0, d1: scratch [B, widest hidden layer]."""
    cdef int l, n_in, n_out
    cdef float32_t one = 1.0, zero = 0.0
    cdef float32_t* cur = d_head
    cdef float32_t* nxt
    cdef const float32_t* h
    cdef char tr = b'T', nt = b'N'
    for l in range(net.mlp.n_layers - 1, -1, -1):
        n_in = net.mlp.dims[l]
        n_out = net.mlp.dims[l + 1]
        h = x if l == 0 else net.act[l - 1]
        sgemm(&nt, &tr, &n_in, &n_out, &B, &one, <float32_t*>h, &n_in, cur, &n_out, &zero,
              grads + net.w_off[l], &n_in)
        rlox_colsum_f32(cur, B, n_out, grads + net.b_off[l])
        if l > 0:
            nxt = d1 if cur == d0 else d0
            sgemm(&nt, &nt, &n_in, &B, &n_out, &one, params + net.w_off[l], &n_in, cur, &n_out,
                  &zero, nxt, &n_in)
            rlox_tanh_grad_f32(nxt, net.act[l - 1], <int64_t>B * n_in)
            cur = nxt


cdef list _net_layout(const net_t* net, str prefix):
    """(name, offset, shape) of each weight and bias, with nn.Sequential's names (Linear
    layers at indices 0, 2, 4, ...: a Tanh between them)."""
    cdef int l
    out = []
    for l in range(net.mlp.n_layers):
        out.append((f"{prefix}.{2 * l}.weight", int(net.w_off[l]), (net.mlp.dims[l + 1], net.mlp.dims[l])))
        out.append((f"{prefix}.{2 * l}.bias", int(net.b_off[l]), (net.mlp.dims[l + 1],)))
    return out


# ----------------------------------------------------------------------------- checks
def _array(x, str name, dtype, tuple shape):
    """``x`` as a C-contiguous NumPy array of ``dtype`` and ``shape`` (None: any length), or a
    clear error. Dtypes are checked, never converted: a silent conversion would copy the batch
    on every call."""
    x = exact_array(x, name, np.dtype(dtype).num)
    want = "(" + ", ".join("n" if s is None else str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"
    if x.ndim != len(shape) or any(s is not None and s != d for s, d in zip(shape, x.shape)):
        raise ValueError(f"{name} has shape {x.shape}, expected {want}")
    return x


# ----------------------------------------------------------------------------- the kernel
cdef class PPOUpdateKernel:
    """On-policy update steps for an actor-critic of Tanh MLPs, compiled: PPO's minibatch steps
    (PPOLoss + backward + grad-norm clip + Adam), or A2C's (its loss; RMSprop or Adam).

    Args:
        obs_dim: observation size (flattened).
        hidden: hidden layer widths, shared by actor and critic (``rlox.policies.hidden_sizes``).
        n_out: number of actions (``discrete``) or action size (Gaussian).
        discrete: Categorical head (True) or diagonal Gaussian with a state-independent
            ``log_std [n_out]`` (False).
        vf_coef, ent_coef, clip_vloss, normalize_advantages: as ``rlox.losses.PPOLoss``
            (A2C: ``clip_vloss`` must be False, its value loss is never clipped).
        max_grad_norm: global gradient-norm clip (torch's ``clip_grad_norm_``); <= 0: none.
        loss: "ppo" (PPOLoss: ratio, clipped surrogate) or "a2c" (A2C's loss: policy gradient
            ``-(A log pi).mean()``, ``0.5 (R - V)^2``, entropy; no ratio, no clipping, so
            ``old_log_probs`` and ``old_values`` are checked but not used).
        optimizer: "adam" (``torch.optim.Adam``: ``betas``, ``eps``) or "rmsprop"
            (``torch.optim.RMSprop`` without momentum or centring: ``alpha``, ``eps``).
        betas, eps: Adam's (PPO uses eps=1e-5); eps is RMSprop's too (A2C: 1e-5).
        alpha: RMSprop's smoothing constant (SB3's A2C: 0.99).
        blas_threads: the most BLAS threads ``run_epoch`` lets sgemm use: the BLAS is limited
            to ``min(blas_threads, rlox.get_num_threads())`` for the call (threadpoolctl), then
            restored; 0 leaves the BLAS's own setting alone. At these sizes one thread is
            fastest: a threaded sgemm spends more on waking its threads than on the product.

    Parameters start at zero: copy the torch weights into ``parameters()``'s views (or point
    the torch parameters at them). Use: ``bind(...)`` a rollout, then ``run_epoch(...)`` per
    epoch; ``metrics()`` averages the steps taken since ``bind``. ``step(...)`` does one
    minibatch of given rows (bind + one whole-batch epoch).

    Not thread-safe: one call at a time per kernel (a concurrent call raises RuntimeError).
    """
    cdef net_t actor
    cdef net_t critic
    cdef readonly int obs_dim, n_out
    cdef readonly bint discrete, clip_vloss, normalize_advantages
    cdef readonly intp_t n_params
    cdef intp_t log_std_off
    cdef readonly double vf_coef, ent_coef, max_grad_norm, beta1, beta2, eps, alpha
    cdef readonly str loss, optimizer
    cdef int loss_kind, opt_kind
    cdef readonly int64_t opt_step    # optimizer steps taken (torch's state["step"])
    cdef readonly double last_grad_norm
    cdef readonly list layout
    # flat buffers [n_params] (NumPy arrays; the pointers below point into them)
    cdef object _params_arr, _grads_arr, _m_arr, _v_arr
    cdef float32_t* params
    cdef float32_t* grads
    cdef float32_t* m
    cdef float32_t* v
    # scratch for up to `cap` rows, one allocation
    cdef intp_t cap
    cdef int max_width
    cdef float32_t* scratch
    cdef int64_t* s_act_i     # [cap] gathered discrete actions
    cdef float32_t* s_x       # [cap, obs_dim] gathered observations
    cdef float32_t* s_act_f   # [cap, n_out] gathered continuous actions
    cdef float32_t* s_logp    # [cap] old log-probs
    cdef float32_t* s_adv     # [cap] advantages (normalised in place)
    cdef float32_t* s_ret     # [cap] returns
    cdef float32_t* s_val     # [cap] old values
    cdef float32_t* s_dha     # [cap, n_out] gradient w.r.t. the actor's outputs
    cdef float32_t* s_dhv     # [cap] gradient w.r.t. the critic's output
    cdef float32_t* s_d0      # [cap, max_width] backward deltas (ping-pong)
    cdef float32_t* s_d1
    cdef float32_t* g_std     # [n_out] Gaussian head: exp(log_std)
    cdef float32_t* g_logstd  # [n_out] log(exp(log_std)), as the policy computes it
    cdef double* g_dls        # [n_out] log_std gradient accumulators
    # the bound rollout (arrays kept alive by _batch)
    cdef tuple _batch
    cdef intp_t b_n
    cdef const float32_t* b_obs
    cdef const int64_t* b_act_i
    cdef const float32_t* b_act_f
    cdef const float32_t* b_logp
    cdef const float32_t* b_adv
    cdef const float32_t* b_ret
    cdef const float32_t* b_val
    # metric sums since bind (NaN-skipping, as nanmean)
    cdef double msum[N_METRICS]
    cdef int64_t mcnt[N_METRICS]
    cdef readonly int64_t n_updates
    cdef readonly int blas_threads
    cdef bint blas_scoped           # inside blas_limits(): run_epoch leaves the BLAS alone
    cdef bint busy

    def __cinit__(self):
        self.actor.mlp.dims = NULL
        self.critic.mlp.dims = NULL
        self.scratch = NULL
        self.s_act_i = NULL
        self.g_std = NULL
        self.g_logstd = NULL
        self.g_dls = NULL
        self.cap = 0
        self.busy = False
        self.blas_scoped = False
        self._batch = None
        self.b_n = 0

    def __init__(self, int obs_dim, hidden, int n_out, bint discrete, *, double vf_coef=0.5,
                 double ent_coef=0.0, bint clip_vloss=True, bint normalize_advantages=True,
                 double max_grad_norm=0.5, str loss="ppo", str optimizer="adam", betas=(0.9, 0.999),
                 double eps=1e-5, double alpha=0.99, int blas_threads=1):
        if self.actor.mlp.dims != NULL:
            raise RuntimeError("PPOUpdateKernel is already initialised; create a new one")
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if loss == "a2c" and clip_vloss:
            raise ValueError("clip_vloss=True clips the value loss around the old values, which A2C's "
                             "loss never does; pass clip_vloss=False with loss='a2c'")
        if not (isfinite(alpha) and 0.0 <= alpha < 1.0):
            raise ValueError(f"alpha (RMSprop's smoothing constant) must be in [0, 1), got {alpha}")
        if obs_dim < 1:
            raise ValueError(f"obs_dim must be >= 1, got {obs_dim}")
        if n_out < 1:
            raise ValueError(f"n_out must be >= 1, got {n_out}")
        if isinstance(hidden, (int, np.integer)) and not isinstance(hidden, bool):
            hidden = [hidden, hidden]     # as rlox.policies.hidden_sizes
        try:
            sizes = [int(h) for h in hidden]
        except (TypeError, ValueError):
            raise TypeError(f"hidden must be a list of ints, got {hidden!r}") from None
        if any(h < 1 for h in sizes):
            raise ValueError(f"hidden widths must be >= 1, got {sizes}")
        for name, val in (("vf_coef", vf_coef), ("ent_coef", ent_coef)):
            if not (isfinite(val) and val >= 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {val}")
        if isnan(max_grad_norm):
            raise ValueError("max_grad_norm must be a number (<= 0: no clipping), got nan")
        b1, b2 = (float(b) for b in betas)
        if not (0.0 <= b1 < 1.0 and 0.0 <= b2 < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {tuple(betas)}")
        if not (isfinite(eps) and eps > 0):
            raise ValueError(f"eps must be a finite number > 0, got {eps}")
        if blas_threads < 0:
            raise ValueError(f"blas_threads must be >= 1, or 0 to leave the BLAS alone; got {blas_threads}")
        self.blas_threads = blas_threads
        self.obs_dim, self.n_out, self.discrete = obs_dim, n_out, discrete
        self.vf_coef, self.ent_coef, self.max_grad_norm = vf_coef, ent_coef, max_grad_norm
        self.clip_vloss, self.normalize_advantages = clip_vloss, normalize_advantages
        self.beta1, self.beta2, self.eps, self.alpha = b1, b2, eps, alpha
        self.loss, self.optimizer = loss, optimizer
        self.loss_kind = LOSS_A2C if loss == "a2c" else LOSS_PPO
        self.opt_kind = OPT_RMSPROP if optimizer == "rmsprop" else OPT_ADAM
        self.max_width = max([obs_dim, n_out] + sizes)
        if self.max_width > 1 << 20:
            raise ValueError(f"layer widths up to {1 << 20} are supported, got {self.max_width}")
        # torch's parameters() order for rlox.policies: the policy's own log_std (Gaussian),
        # then its children in registration order, critic and actor.
        cdef intp_t off = 0 if discrete else n_out
        self.log_std_off = -1 if discrete else 0
        net_alloc(&self.critic, [obs_dim] + sizes + [1], &off)
        net_alloc(&self.actor, [obs_dim] + sizes + [n_out], &off)
        self.n_params = off
        self.layout = [] if discrete else [("log_std", 0, (n_out,))]
        self.layout += _net_layout(&self.critic, "critic") + _net_layout(&self.actor, "actor")
        self.g_std = <float32_t*>malloc(n_out * sizeof(float32_t))
        self.g_logstd = <float32_t*>malloc(n_out * sizeof(float32_t))
        self.g_dls = <double*>malloc(n_out * sizeof(double))
        if self.g_std == NULL or self.g_logstd == NULL or self.g_dls == NULL:
            raise MemoryError()
        self._params_arr = np.zeros(self.n_params, dtype=np.float32)
        self._grads_arr = np.zeros(self.n_params, dtype=np.float32)
        self._m_arr = np.zeros(self.n_params, dtype=np.float32)
        self._v_arr = np.zeros(self.n_params, dtype=np.float32)
        cdef float32_t[::1] pv = self._params_arr, gv = self._grads_arr, mv = self._m_arr, vv = self._v_arr
        self.params, self.grads, self.m, self.v = &pv[0], &gv[0], &mv[0], &vv[0]
        net_point(&self.actor, self.params)
        net_point(&self.critic, self.params)
        self.opt_step = 0
        self.last_grad_norm = NAN
        self._reset_metrics()

    def __dealloc__(self):
        if self.actor.mlp.dims != NULL:
            net_free(&self.actor)
        if self.critic.mlp.dims != NULL:
            net_free(&self.critic)
        free(self.scratch)
        free(self.s_act_i)
        free(self.g_std)
        free(self.g_logstd)
        free(self.g_dls)

    # ------------------------------------------------------------------ parameters and state
    def parameters(self):
        """name -> NumPy float32 view into the parameter buffer (writable), in torch's order,
        names and shapes for rlox.policies: ``log_std`` (Gaussian), ``critic.0.weight``
        [out, in], ``critic.0.bias``, ..., ``actor.0.weight``, ...."""
        return {name: self._params_arr[off:off + int(np.prod(shape))].reshape(shape)
                for name, off, shape in self.layout}

    @property
    def flat_parameters(self):
        """All parameters, one flat float32 view [n_params] in ``layout`` order."""
        return self._params_arr

    @property
    def flat_gradients(self):
        """The last step's gradients [n_params] (after clipping), a read-only view."""
        out = self._grads_arr.view()
        out.flags.writeable = False
        return out

    @property
    def adam_step(self):
        """The optimizer's step count (``opt_step``; the name from when Adam was the only one)."""
        return int(self.opt_step)

    @property
    def optimizer_state_keys(self):
        """torch's state names of the optimizer's flat buffers: ("exp_avg", "exp_avg_sq") for
        Adam, ("square_avg",) for RMSprop."""
        return OPTIMIZER_STATE[self.optimizer]

    def get_optimizer_state(self):
        """{"step": int, <each of optimizer_state_keys>: [n_params] float32} (copies), in
        ``layout`` order, under torch's state names."""
        out = {"step": int(self.opt_step)}
        if self.opt_kind == OPT_ADAM:
            out["exp_avg"] = self._m_arr.copy()
            out["exp_avg_sq"] = self._v_arr.copy()
        else:
            out["square_avg"] = self._v_arr.copy()
        return out

    def set_optimizer_state(self, step, **buffers):
        """Restore the optimizer: the step count and its buffers (flat float32 [n_params] in
        ``layout`` order, named as ``optimizer_state_keys``: from ``get_optimizer_state`` or a
        torch optimizer's state)."""
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}")
        keys = OPTIMIZER_STATE[self.optimizer]
        if set(buffers) != set(keys):
            raise ValueError(f"the {self.optimizer} optimizer's state is step and {', '.join(keys)}; got "
                             f"{', '.join(sorted(buffers)) or 'no buffers'}")
        arrs = {k: _array(buffers[k], k, np.float32, (self.n_params,)) for k in keys}
        sq = keys[len(keys) - 1]            # the running average of squared gradients
        if (arrs[sq] < 0).any() or not all(np.isfinite(a).all() for a in arrs.values()):
            raise ValueError("exp_avg must be finite and exp_avg_sq finite and >= 0" if self.opt_kind == OPT_ADAM
                             else "square_avg must be finite and >= 0")
        self._guard()
        if self.opt_kind == OPT_ADAM:
            self._m_arr[:] = arrs["exp_avg"]
            self._v_arr[:] = arrs["exp_avg_sq"]
        else:
            self._m_arr[:] = 0.0
            self._v_arr[:] = arrs["square_avg"]
        self.opt_step = int(step)

    def get_adam_state(self):
        """{"step": int, "exp_avg": [n_params], "exp_avg_sq": [n_params]} (copies); Adam only."""
        self._need_adam("get_adam_state")
        return self.get_optimizer_state()

    def set_adam_state(self, step, exp_avg, exp_avg_sq):
        """Restore Adam: the step count and both moments (flat float32 [n_params] in ``layout``
        order, e.g. from ``get_adam_state`` or a torch optimizer's state)."""
        self._need_adam("set_adam_state")
        self.set_optimizer_state(step, exp_avg=exp_avg, exp_avg_sq=exp_avg_sq)

    def _need_adam(self, str what):
        if self.opt_kind != OPT_ADAM:
            raise ValueError(f"{what} is for optimizer='adam'; this kernel steps with "
                             f"{self.optimizer!r}: use get_optimizer_state / set_optimizer_state")

    # ------------------------------------------------------------------ scratch
    cdef int _ensure_capacity(self, intp_t rows) except -1:
        """Size the scratch buffers for ``rows`` rows (grow only)."""
        if rows <= self.cap:
            return 0
        cdef intp_t total = 0, l
        cdef intp_t od = self.obs_dim, no = self.n_out, w = self.max_width
        for l in range(self.actor.mlp.n_layers):
            total += rows * self.actor.mlp.dims[l + 1]
        for l in range(self.critic.mlp.n_layers):
            total += rows * self.critic.mlp.dims[l + 1]
        total += rows * (od + 2 * no + 6 + 2 * w)
        cdef float32_t* block = <float32_t*>malloc(total * sizeof(float32_t))
        cdef int64_t* acts = <int64_t*>malloc(rows * sizeof(int64_t))
        if block == NULL or acts == NULL:
            free(block); free(acts)
            raise MemoryError(f"cannot allocate scratch for {rows} minibatch rows")
        free(self.scratch)
        free(self.s_act_i)
        self.scratch, self.s_act_i = block, acts
        cdef float32_t* p = block
        for l in range(self.actor.mlp.n_layers):
            self.actor.act[l] = p
            p += rows * self.actor.mlp.dims[l + 1]
        for l in range(self.critic.mlp.n_layers):
            self.critic.act[l] = p
            p += rows * self.critic.mlp.dims[l + 1]
        self.s_x = p; p += rows * od
        self.s_act_f = p; p += rows * no
        self.s_dha = p; p += rows * no
        self.s_logp = p; p += rows
        self.s_adv = p; p += rows
        self.s_ret = p; p += rows
        self.s_val = p; p += rows
        self.s_dhv = p; p += rows
        p += rows   # spare row vector (keeps the block's size formula simple)
        self.s_d0 = p; p += rows * w
        self.s_d1 = p; p += rows * w
        self.cap = rows
        return 0

    cdef int _guard(self) except -1:
        if self.busy:
            raise RuntimeError("PPOUpdateKernel is running in another thread; one call at a time")
        return 0

    cdef void _reset_metrics(self):
        cdef int k
        for k in range(N_METRICS):
            self.msum[k] = 0.0
            self.mcnt[k] = 0
        self.n_updates = 0

    # ------------------------------------------------------------------ the rollout
    def bind(self, obs, actions, old_log_probs, advantages, returns, old_values):
        """Check and hold a rollout of n rows for ``run_epoch``; resets ``metrics()``.

        obs [n, obs_dim] float32; actions [n] int64 in [0, n_out) (discrete) or [n, n_out]
        float32 (Gaussian); old_log_probs, advantages, returns, old_values [n] float32. The
        arrays are used in place (not copied): do not change them while bound.
        """
        self._guard()
        o = _array(obs, "obs", np.float32, (None, self.obs_dim))
        n = o.shape[0]
        if n < 1:
            raise ValueError("obs has 0 rows; a rollout needs at least one")
        if self.discrete:
            a = _array(actions, "actions", np.int64, (n,))
            if n and (a.min() < 0 or a.max() >= self.n_out):
                raise ValueError(f"actions must lie in [0, {self.n_out}) for {self.n_out} discrete "
                                 f"actions, got values in [{a.min()}, {a.max()}]")
        else:
            a = _array(actions, "actions", np.float32, (n, self.n_out))
        lp = _array(old_log_probs, "old_log_probs", np.float32, (n,))
        adv = _array(advantages, "advantages", np.float32, (n,))
        ret = _array(returns, "returns", np.float32, (n,))
        val = _array(old_values, "old_values", np.float32, (n,))
        cdef const float32_t[:, ::1] ov = o
        cdef const float32_t[::1] lv = lp, av = adv, rv = ret, vv = val
        cdef const int64_t[::1] aiv
        cdef const float32_t[:, ::1] afv
        self._batch = (o, a, lp, adv, ret, val)
        self.b_n = n
        self.b_obs, self.b_logp, self.b_adv, self.b_ret, self.b_val = &ov[0, 0], &lv[0], &av[0], &rv[0], &vv[0]
        if self.discrete:
            aiv = a
            self.b_act_i, self.b_act_f = &aiv[0], NULL
        else:
            afv = a
            self.b_act_i, self.b_act_f = NULL, &afv[0, 0]
        self._reset_metrics()

    def run_epoch(self, order, int batch_size, double lr, clip_eps=None, double kl_limit=INFINITY):
        """One pass over the bound rollout in minibatches of ``batch_size`` rows (the last one
        smaller when it does not divide), in the row order ``order`` (int64 [m], indices into
        the rollout; None: 0..n-1).

        Each minibatch is one step with learning rate ``lr`` and clip range ``clip_eps`` (PPO's,
        required for loss="ppo"; A2C's loss has none: leave it None).
        Early stop (PPO's target_kl): a minibatch whose approx_kl exceeds ``kl_limit`` is not
        stepped and ends the epoch. Returns True when that happened (never with loss="a2c").
        """
        if self._batch is None:
            raise ValueError("no rollout bound; call bind(obs, actions, ...) first")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if not (isfinite(lr) and lr >= 0):
            raise ValueError(f"lr must be a finite number >= 0, got {lr}")
        cdef double clip = 0.0
        if self.loss_kind == LOSS_A2C:
            if clip_eps is not None:
                raise ValueError(f"clip_eps is PPO's clip range; A2C's loss (loss='a2c') has none: "
                                 f"leave it None, got {clip_eps!r}")
            if kl_limit != INFINITY:
                raise ValueError(f"kl_limit is PPO's early stop (target_kl); A2C's loss (loss='a2c') has "
                                 f"no approx_kl: leave it inf, got {kl_limit}")
        else:
            if clip_eps is None:
                raise ValueError("clip_eps (PPO's clip range, > 0) is required for loss='ppo'")
            clip = clip_eps
            if not (isfinite(clip) and clip > 0):
                raise ValueError(f"clip_eps must be a finite number > 0, got {clip_eps}")
        if isnan(kl_limit):
            raise ValueError("kl_limit must be a number (inf: no early stop), got nan")
        cdef const int64_t[::1] iv
        cdef const int64_t* idx = NULL
        cdef intp_t m = self.b_n
        if order is not None:
            ord_arr = _array(order, "order", np.int64, (None,))
            m = ord_arr.shape[0]
            if m < 1:
                raise ValueError("order is empty; pass None for all rows in order")
            if ord_arr.min() < 0 or ord_arr.max() >= self.b_n:
                raise ValueError(f"order holds indices in [{ord_arr.min()}, {ord_arr.max()}], "
                                 f"outside the bound rollout's rows [0, {self.b_n})")
            iv = ord_arr
            idx = &iv[0]
        cdef intp_t bs = min(<intp_t>batch_size, m)
        if bs * self.max_width >= INT_LIMIT:
            raise ValueError(f"batch_size {batch_size} is too large for 32-bit BLAS at width {self.max_width}")
        self._guard()
        self._ensure_capacity(bs)
        cdef intp_t start, rows
        cdef int stepped = 1
        limiter = None if self.blas_scoped else self._limit_blas()
        self.busy = True
        try:
            with nogil:
                start = 0
                while start < m:
                    rows = bs if start + bs <= m else m - start
                    stepped = self._minibatch(idx, start, <int>rows, lr, clip, kl_limit)
                    if not stepped:
                        break
                    start += rows
        finally:
            self.busy = False
            if limiter is not None:
                limiter.restore_original_limits()
        return not stepped

    cdef object _limit_blas(self):
        """Limit the BLAS to min(blas_threads, rlox threads); the limiter to restore, or None."""
        if self.blas_threads <= 0:
            return None
        return _blas_limits(min(self.blas_threads, _num_threads))

    @contextmanager
    def blas_limits(self):
        """Context manager: hold ``run_epoch``'s BLAS limit over several calls (one limit and
        restore for a whole update instead of one per epoch, about 20 us each)."""
        if self.blas_scoped:
            yield
            return
        limiter = self._limit_blas()
        self.blas_scoped = True
        try:
            yield
        finally:
            self.blas_scoped = False
            if limiter is not None:
                limiter.restore_original_limits()

    def step(self, obs, actions, old_log_probs, advantages, returns, old_values, double lr,
             clip_eps=None, double kl_limit=INFINITY):
        """One minibatch step on exactly these rows (``bind`` + a whole-batch ``run_epoch``): A2C's
        update of one rollout with loss="a2c". Returns the step's metrics, or None when
        approx_kl exceeded ``kl_limit`` (no step)."""
        self.bind(obs, actions, old_log_probs, advantages, returns, old_values)
        stopped = self.run_epoch(None, self.b_n, lr, clip_eps, kl_limit)
        return None if stopped else self.metrics()

    def metrics(self):
        """Mean of each metric over the steps since ``bind`` (NaN entries skipped, as
        ``nanmean``; NaN when all are NaN), by PPOLoss's names (loss="a2c": without approx_kl
        and clip_fraction); {} before any step."""
        if self.n_updates == 0:
            return {}
        names = A2C_METRICS if self.loss_kind == LOSS_A2C else METRICS
        return {name: (self.msum[k] / self.mcnt[k] if self.mcnt[k] else float("nan"))
                for k, name in enumerate(METRICS) if name in names}

    # ------------------------------------------------------------------ one minibatch
    cdef int _minibatch(self, const int64_t* idx, intp_t start, int B, double lr, double clip_eps,
                        double kl_limit) noexcept nogil:
        """Step on rows idx[start:start + B] (or start..start + B - 1 when idx is NULL).
        Returns 0 (no step) when approx_kl > kl_limit, else 1."""
        cdef intp_t r, src
        cdef int od = self.obs_dim, no = self.n_out
        cdef float32_t* x = self.s_x
        # 1. gather
        for r in range(B):
            src = idx[start + r] if idx != NULL else start + r
            memcpy(x + r * od, self.b_obs + src * od, od * sizeof(float32_t))
            if self.discrete:
                self.s_act_i[r] = self.b_act_i[src]
            else:
                memcpy(self.s_act_f + r * no, self.b_act_f + src * no, no * sizeof(float32_t))
            self.s_logp[r] = self.b_logp[src]
            self.s_adv[r] = self.b_adv[src]
            self.s_ret[r] = self.b_ret[src]
            self.s_val[r] = self.b_val[src]
        # 2. advantages normalised within the minibatch: (A - mean) / (std + 1e-8), Bessel's std
        cdef double mean = 0.0, var = 0.0, dd
        cdef float32_t mean_f, denom_f
        if self.normalize_advantages and B > 1:
            for r in range(B):
                mean += self.s_adv[r]
            mean /= B
            for r in range(B):
                dd = self.s_adv[r] - mean
                var += dd * dd
            mean_f = <float32_t>mean
            denom_f = <float32_t>sqrt(var / (B - 1)) + <float32_t>1e-8
            for r in range(B):
                self.s_adv[r] = (self.s_adv[r] - mean_f) / denom_f
        # 3. forward
        mlp_forward(&self.actor.mlp, x, B, self.actor.act)
        mlp_forward(&self.critic.mlp, x, B, self.critic.act)
        # 4. loss terms, metrics and the gradient w.r.t. the head outputs, row by row
        if not self._loss_rows(B, clip_eps, kl_limit):
            return 0
        # 5. backward
        net_backward(&self.actor, self.params, self.grads, x, self.s_dha, self.s_d0, self.s_d1, B)
        net_backward(&self.critic, self.params, self.grads, x, self.s_dhv, self.s_d0, self.s_d1, B)
        # 6. global gradient-norm clip, as torch's clip_grad_norm_ (coefficient in float32)
        cdef double norm = sqrt(rlox_sumsq_f32(self.grads, self.n_params))
        cdef float32_t coef
        self.last_grad_norm = norm
        if self.max_grad_norm > 0:
            coef = <float32_t>self.max_grad_norm / (<float32_t>norm + <float32_t>1e-6)
            if coef < 1.0:
                rlox_scale_f32(self.grads, self.n_params, coef)
        # 7. the optimizer: Adam, or RMSprop (torch casts its Python-float scalars to float32)
        self.opt_step += 1
        cdef double bc1, bc2
        if self.opt_kind == OPT_RMSPROP:
            rlox_rmsprop_f32(self.params, self.v, self.grads, self.n_params, <float32_t>self.alpha,
                             <float32_t>(1.0 - self.alpha), <float32_t>(-lr), <float32_t>self.eps)
        else:
            bc1 = 1.0 - pow(self.beta1, <double>self.opt_step)
            bc2 = 1.0 - pow(self.beta2, <double>self.opt_step)
            rlox_adam_f32(self.params, self.m, self.v, self.grads, self.n_params,
                          <float32_t>(1.0 - self.beta1), <float32_t>self.beta2, <float32_t>(1.0 - self.beta2),
                          <float32_t>(lr / bc1), <float32_t>sqrt(bc2), <float32_t>self.eps)
        self.n_updates += 1
        return 1

    cdef int _loss_rows(self, int B, double clip_eps, double kl_limit) noexcept nogil:
        """PPOLoss (or A2C's loss: loss="a2c") on the B gathered rows after the forward pass. Writes d loss / d outputs to
        s_dha (actor) and s_dhv (critic), the log_std gradient to grads, and adds the metrics;
        returns 0, leaving the gradients and metrics alone, when approx_kl > kl_limit."""
        cdef intp_t r, j
        cdef int no = self.n_out
        cdef int la = self.actor.mlp.n_layers - 1, lc = self.critic.mlp.n_layers - 1
        cdef const float32_t* head = self.actor.act[la]
        cdef const float32_t* values = self.critic.act[lc]
        cdef float32_t eps = <float32_t>clip_eps
        cdef float32_t lo = <float32_t>(1.0 - clip_eps), hi = <float32_t>(1.0 + clip_eps)
        cdef float32_t inv_b = <float32_t>1.0 / <float32_t>B
        cdef float32_t g_ent = -<float32_t>self.ent_coef * inv_b     # d loss / d entropy[r]
        cdef float32_t v_scale = <float32_t>self.vf_coef * inv_b     # d loss / d V[r] = v_scale * err
        cdef float32_t mx, s, lse, logp_new, ent, log_ratio, ratio, pa, pb, ca, cb, g_logp, p, lpj, z, adv
        cdef float32_t val, ret, vd, vcl, e1, e2, dv
        cdef double pg_sum = 0.0, v_sum = 0.0, ent_sum = 0.0, kl_sum = 0.0, clip_n = 0.0
        cdef double ret_mean = 0.0, err_mean = 0.0, var_ret = 0.0, var_err = 0.0, dr
        cdef float32_t* std = self.g_std
        cdef float32_t* logstd = self.g_logstd
        cdef double* dls = self.g_dls
        cdef float32_t ent_row = 0.0
        if not self.discrete:
            # as the policy: std = exp(log_std), and log(std) (not log_std itself) in the density
            for j in range(no):
                std[j] = expf(self.params[self.log_std_off + j])
                logstd[j] = logf(std[j])
                ent_row += ENT_CONST + logstd[j]
                dls[j] = 0.0
        for r in range(B):
            adv = self.s_adv[r]
            # head: new log-prob and entropy of this row
            if self.discrete:
                mx = head[r * no]
                for j in range(1, no):
                    if head[r * no + j] > mx:
                        mx = head[r * no + j]
                s = 0.0
                for j in range(no):
                    s += expf(head[r * no + j] - mx)
                lse = logf(s)
                logp_new = (head[r * no + self.s_act_i[r]] - mx) - lse
                ent = 0.0
                for j in range(no):
                    lpj = (head[r * no + j] - mx) - lse
                    ent -= expf(lpj) * lpj
            else:
                logp_new = 0.0
                for j in range(no):
                    z = (self.s_act_f[r * no + j] - head[r * no + j]) / std[j]
                    logp_new += (<float32_t>-0.5 * z * z - logstd[j]) - HALF_LOG_2PI
                ent = ent_row
            ent_sum += ent
            if self.loss_kind == LOSS_A2C:
                # A2C: the policy gradient -(A log pi(a|s)).mean(), no ratio
                pg_sum += -adv * logp_new
                g_logp = inv_b * (-adv)
            else:
                # PPO: clipped surrogate max(-A r, -A clip(r))
                log_ratio = logp_new - self.s_logp[r]
                ratio = expf(log_ratio)
                pa = -adv * ratio
                pb = -adv * (lo if ratio < lo else (hi if ratio > hi else ratio))
                pg_sum += pa if pa >= pb else pb
                kl_sum += <double>((ratio - <float32_t>1.0) - log_ratio)
                if fabsf(ratio - <float32_t>1.0) > eps:
                    clip_n += 1.0
                # torch.max's gradient: all to the larger side, half each on a tie; the clamp
                # passes it on [lo, hi] inclusive
                ca = <float32_t>1.0 if pa > pb else (<float32_t>0.5 if pa == pb else <float32_t>0.0)
                cb = <float32_t>1.0 - ca if (lo <= ratio and ratio <= hi) else <float32_t>0.0
                g_logp = inv_b * (-adv) * (ca + cb) * ratio
            # value: 0.5 (V - R)^2, or 0.5 max((V - R)^2, (V_clipped - R)^2)
            val = values[r]
            ret = self.s_ret[r]
            if self.clip_vloss:
                vd = val - self.s_val[r]
                vcl = self.s_val[r] + (-eps if vd < -eps else (eps if vd > eps else vd))
                e1 = (val - ret) * (val - ret)
                e2 = (vcl - ret) * (vcl - ret)
                v_sum += e1 if e1 >= e2 else e2
                ca = <float32_t>1.0 if e1 > e2 else (<float32_t>0.5 if e1 == e2 else <float32_t>0.0)
                cb = <float32_t>1.0 - ca if (-eps <= vd and vd <= eps) else <float32_t>0.0
                dv = v_scale * (ca * (val - ret) + cb * (vcl - ret))
            else:
                e1 = (val - ret) * (val - ret)
                v_sum += e1
                dv = v_scale * (val - ret)
            self.s_dhv[r] = dv
            ret_mean += ret
            err_mean += <double>ret - <double>val
            # gradient w.r.t. the actor's outputs
            if self.discrete:
                for j in range(no):
                    lpj = (head[r * no + j] - mx) - lse
                    p = expf(lpj)
                    self.s_dha[r * no + j] = g_logp * ((<float32_t>1.0 if j == self.s_act_i[r] else <float32_t>0.0) - p) \
                        - g_ent * p * (lpj + ent)
            else:
                for j in range(no):
                    z = (self.s_act_f[r * no + j] - head[r * no + j]) / std[j]
                    self.s_dha[r * no + j] = g_logp * z / std[j]
                    dls[j] += <double>g_logp * (<double>z * z - 1.0)
        cdef double kl = kl_sum / B
        if kl > kl_limit:
            return 0
        if not self.discrete:
            # entropy = sum(0.5 + 0.5 log 2 pi + log_std): d(-ent_coef mean(entropy)) / d log_std = -ent_coef
            for j in range(no):
                self.grads[self.log_std_off + j] = <float32_t>(dls[j] - self.ent_coef)
        cdef double pg = pg_sum / B, vl = 0.5 * v_sum / B, en = ent_sum / B
        cdef double m_[N_METRICS]
        m_[M_PG] = pg
        m_[M_V] = vl
        m_[M_ENT] = en
        m_[M_KL] = kl if self.loss_kind == LOSS_PPO else NAN     # (A2C: not reported)
        m_[M_CLIP] = clip_n / B if self.loss_kind == LOSS_PPO else NAN
        m_[M_LOSS] = pg + self.vf_coef * vl - self.ent_coef * en
        # explained variance 1 - Var[R - V] / Var[R] (population variances, two passes); NaN
        # when Var[R] = 0
        ret_mean /= B
        err_mean /= B
        for r in range(B):
            dr = <double>self.s_ret[r] - ret_mean
            var_ret += dr * dr
            dr = (<double>self.s_ret[r] - <double>values[r]) - err_mean
            var_err += dr * dr
        m_[M_EV] = (1.0 - var_err / var_ret) if (B > 1 and var_ret > 0) else NAN
        cdef int k
        for k in range(N_METRICS):
            if not isnan(m_[k]):
                self.msum[k] += m_[k]
                self.mcnt[k] += 1
        return 1
