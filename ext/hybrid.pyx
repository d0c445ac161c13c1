# The on-policy algorithms' compiled rollout: the actor/critic forward pass, action sampling
# with one RNG stream per env, env stepping through envs_core.pxd and the rollout writes, in
# one nogil loop.
#
# Networks: the actor and critic of rlox.policies (Linear -> Tanh -> ... -> Linear), defined
# once in ext/rlox_mlp.pxd and shared with the compiled update (ext/ppo_update.pyx). The policy
# reads the float32 weights where they live: ``CompiledPolicy`` holds pointers to the arrays it
# is given (the torch parameters' own memory, which with the compiled update on is
# PPOUpdateKernel's flat buffer), never a copy, so a gradient step is seen by the next forward
# pass with nothing to sync.
#
# Each step runs the forward pass for all envs as one batch (sgemm), then samples and steps
# every env (a prange over envs when there are many); truncated episodes' final observations
# get one more batched critic pass for the bootstrap. Each env samples from its own stream, so
# results never depend on the thread count.
from cython.parallel cimport prange
from libc.math cimport exp, log
from libc.stdlib cimport malloc, free
from libc.string cimport memset, memcpy
from _types cimport float64_t, float32_t, int64_t, intp_t, uint64_t
from _rng cimport rng_t, rng_seed, rng_uniform, rng_normal
from envs_core cimport (env_t, env_init, env_reset, env_obs_f64, env_step, env_obs_dim,
                        env_n_actions, ENV_MAX_OBS_DIM)
from rlox_mlp cimport (mlp_t, mlp_alloc, mlp_free, mlp_forward, mlp_act_size, mlp_act_point,
                       MLP_MAX_LAYERS)
from _checks cimport real_array
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

cdef float64_t LOG_2PI = 1.8378770664093453  # log(2 pi)
cdef intp_t PAR_MIN_ENVS = 256                # envs per step before the env loop goes parallel
cdef intp_t BLAS_LIMIT_WORK = 262144          # rows * width^2 from which OpenBLAS threads an sgemm


def _blas_one_thread(intp_t rows, int width):
    """A limiter holding the BLAS at one thread where OpenBLAS would otherwise split an sgemm
    (at these sizes waking threads costs more than the product; see ext/ppo_update.pyx), or
    None for small batches (the limit costs about 20 us)."""
    if rows * width * width < BLAS_LIMIT_WORK:
        return None
    from rlox._ext.ppo_update import _blas_limits
    return _blas_limits(1)


# ----------------------------------------------------------------------------- action heads
cdef inline intp_t sample_categorical(const float32_t* logits, int n, rng_t* rng,
                                      float64_t* logp) noexcept nogil:
    """Draw a ~ softmax(logits[n]) by inverse CDF; logp = log softmax(logits)[a] (accumulated
    in float64)."""
    cdef int j
    cdef float64_t mx = logits[0], total = 0.0, u, acc = 0.0
    for j in range(1, n):
        if logits[j] > mx:
            mx = logits[j]
    for j in range(n):
        total += exp(<float64_t>logits[j] - mx)
    u = rng_uniform(rng) * total
    cdef intp_t a = n - 1
    for j in range(n):
        acc += exp(<float64_t>logits[j] - mx)
        if u < acc:
            a = j
            break
    logp[0] = (<float64_t>logits[a] - mx) - log(total)
    return a


cdef inline float64_t sample_gaussian(const float32_t* mean, const float32_t* log_std, int d,
                                      rng_t* rng, float32_t* action) noexcept nogil:
    """action[d] = float32(mean + exp(log_std) * N(0, I)); returns the diagonal Gaussian
    log-density of that (rounded) action, in float64: the log-prob the update recomputes from
    the stored action."""
    cdef int j
    cdef float64_t z, std, lp = 0.0
    for j in range(d):
        std = exp(<float64_t>log_std[j])
        action[j] = <float32_t>(<float64_t>mean[j] + std * rng_normal(rng))
        z = (<float64_t>action[j] - <float64_t>mean[j]) / std
        lp += -0.5 * z * z - log(std) - 0.5 * LOG_2PI
    return lp


# ----------------------------------------------------------------------------- the policy
def _layer_shapes(layers, str name):
    if not isinstance(layers, (list, tuple)) or len(layers) == 0:
        raise ValueError(f"{name} must be a non-empty list of (weight [out, in], bias [out]) pairs")
    if len(layers) > MLP_MAX_LAYERS:
        raise ValueError(f"{name} has {len(layers)} linear layers; at most {MLP_MAX_LAYERS} are supported")
    shapes = []
    for l, pair in enumerate(layers):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise ValueError(f"{name}[{l}] must be a (weight, bias) pair")
        w = np.asarray(pair[0])
        if w.ndim != 2:
            raise ValueError(f"{name}[{l}] weight must be 2-D [out, in], got shape {w.shape}")
        if shapes and shapes[len(shapes) - 1][0] != w.shape[1]:
            raise ValueError(f"{name}[{l}] takes {w.shape[1]} inputs but layer {l - 1} gives {shapes[len(shapes) - 1][0]}")
        shapes.append((int(w.shape[0]), int(w.shape[1])))
    return shapes


cdef object _weight(object x, str name, tuple shape):
    """``x`` itself if it is a float32, C-contiguous, aligned, native-order NumPy array of
    ``shape`` (the policy keeps a pointer into it), else a clear error: converting would make a
    copy, and the policy would no longer see writes to the original."""
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{name} must be a NumPy float32 array (e.g. a CPU torch parameter's "
                        f".detach().numpy()), got {type(x).__name__}")
    cdef cnp.ndarray a = <cnp.ndarray>x
    if cnp.PyArray_TYPE(a) != cnp.NPY_FLOAT or not x.dtype.isnative:
        raise TypeError(f"{name} has dtype {x.dtype}, expected float32: the policy reads the weights in "
                        f"place; convert once (.astype(np.float32)) and pass that array")
    if tuple(x.shape) != shape:
        raise ValueError(f"{name} has shape {tuple(x.shape)}, expected {shape}")
    if not (cnp.PyArray_IS_C_CONTIGUOUS(a) and cnp.PyArray_ISALIGNED(a)):
        raise ValueError(f"{name} is not C-contiguous and aligned; the policy reads weights in place, so "
                         f"pass a contiguous array (np.ascontiguousarray, or tensor.contiguous())")
    return a


cdef class CompiledPolicy:
    """Actor-critic MLPs (Linear/Tanh, as rlox.policies builds them) evaluated in C, float32,
    reading the weights in place.

    Args:
        actor: [(W [out, in], b [out]), ...] of the actor MLP: float32 C-contiguous NumPy arrays
            (torch ``nn.Linear``'s layout; CPU torch parameters' ``.detach().numpy()`` views);
            the last layer gives logits [n_actions] (discrete) or the Gaussian mean [act_dim].
        critic: same for the critic; its last layer has one output.
        discrete: Categorical head (True) or diagonal Gaussian with state-independent log std.
        log_std: [act_dim] float32 array (continuous only), read in place too.
        n_streams: number of action-sampling RNG streams (one per env).
        seed: stream r is seeded with ``seed * 1_000_003 + r``.

    The arrays are not copied: the policy keeps them alive and reads them at every call, so
    whatever writes into them (an optimizer step, ``load_state_dict``) is what the next call
    uses. ``set_weights`` points the policy at other arrays.
    """
    cdef mlp_t actor
    cdef mlp_t critic
    cdef int discrete, obs_dim, n_head, n_streams
    cdef const float32_t* log_std
    cdef rng_t* rngs
    cdef object _held          # the arrays the pointers point into (kept alive)

    def __cinit__(self):
        self.log_std = NULL
        self.rngs = NULL

    def __init__(self, actor, critic, bint discrete, log_std=None, int n_streams=1, uint64_t seed=0):
        a_shapes = _layer_shapes(actor, "actor")
        c_shapes = _layer_shapes(critic, "critic")
        if a_shapes[0][1] != c_shapes[0][1]:
            raise ValueError(f"actor takes {a_shapes[0][1]} inputs but critic takes {c_shapes[0][1]}; "
                             f"both read the same observation")
        if c_shapes[len(c_shapes) - 1][0] != 1:
            raise ValueError(f"critic must end in 1 output, got {c_shapes[len(c_shapes) - 1][0]}")
        if n_streams < 1:
            raise ValueError(f"n_streams must be >= 1, got {n_streams}")
        if self.actor.dims != NULL:
            raise RuntimeError("CompiledPolicy is already initialised; create a new one")
        self.discrete = discrete
        self.obs_dim = a_shapes[0][1]
        self.n_head = a_shapes[len(a_shapes) - 1][0]
        _alloc_from_shapes(&self.actor, a_shapes)
        _alloc_from_shapes(&self.critic, c_shapes)
        self.n_streams = n_streams
        self.rngs = <rng_t*>malloc(n_streams * sizeof(rng_t))
        if self.rngs == NULL:
            raise MemoryError()
        self.reseed(seed)
        self.set_weights(actor, critic, log_std)

    def __dealloc__(self):
        mlp_free(&self.actor)
        mlp_free(&self.critic)
        free(self.rngs)

    def reseed(self, uint64_t seed):
        """Reset every action stream: stream r gets seed ``seed * 1_000_003 + r``."""
        cdef int r
        for r in range(self.n_streams):
            rng_seed(&self.rngs[r], seed * <uint64_t>1000003 + <uint64_t>r)

    def get_rng_state(self):
        """The action-sampling streams as a uint8 array (``set_rng_state`` restores them)."""
        out = np.empty(self.n_streams * sizeof(rng_t), dtype=np.uint8)
        cdef unsigned char[::1] ov = out
        memcpy(&ov[0], <void*>self.rngs, self.n_streams * sizeof(rng_t))
        return out

    def set_rng_state(self, state):
        """Restore ``get_rng_state()``; the stream count must match."""
        arr = np.ascontiguousarray(np.asarray(state), dtype=np.uint8).reshape(-1)
        if arr.shape[0] != self.n_streams * sizeof(rng_t):
            raise ValueError(f"rng state has {arr.shape[0]} bytes, expected "
                             f"{self.n_streams * sizeof(rng_t)} for {self.n_streams} streams")
        cdef const unsigned char[::1] av = arr
        memcpy(<void*>self.rngs, &av[0], self.n_streams * sizeof(rng_t))

    def set_weights(self, actor, critic, log_std=None):
        """Point the policy at these weights (no copy; same layout as at construction, float32
        C-contiguous arrays, see the class docstring). Nothing is checked for NaN here: a NaN
        weight gives NaN outputs, as it would in torch."""
        actor, critic = list(actor), list(critic)
        held = []
        cdef mlp_t* nets[2]
        nets[0] = &self.actor
        nets[1] = &self.critic
        cdef int k, l
        cdef cnp.ndarray w, b
        for k, (name, layers) in enumerate((("actor", actor), ("critic", critic))):
            if len(layers) != nets[k].n_layers:
                raise ValueError(f"{name} has {len(layers)} linear layers, expected {nets[k].n_layers}")
            for l in range(nets[k].n_layers):
                pair = layers[l]
                n_in, n_out = nets[k].dims[l], nets[k].dims[l + 1]
                w = _weight(pair[0], f"{name} layer {l} weight", (n_out, n_in))
                b = _weight(pair[1], f"{name} layer {l} bias", (n_out,))
                held += [w, b]
        ls = None
        if not self.discrete:
            if log_std is None:
                raise ValueError("log_std is required for a continuous (Gaussian) policy")
            ls = _weight(log_std, "log_std", (self.n_head,))
        # all checked: point at them
        cdef int i = 0
        for k in range(2):
            for l in range(nets[k].n_layers):
                w, b = held[i], held[i + 1]
                nets[k].w[l] = <const float32_t*>cnp.PyArray_DATA(w)
                nets[k].b[l] = <const float32_t*>cnp.PyArray_DATA(b)
                i += 2
        if ls is not None:
            self.log_std = <const float32_t*>cnp.PyArray_DATA(<cnp.ndarray>ls)
            held.append(ls)
        self._held = tuple(held)

    def weight_pointers(self):
        """Addresses the policy reads each weight and bias from, actor layers then critic
        layers, then log_std (Gaussian): to check it reads a buffer in place."""
        cdef int l
        out = [(<intp_t>self.actor.w[l], <intp_t>self.actor.b[l]) for l in range(self.actor.n_layers)]
        out += [(<intp_t>self.critic.w[l], <intp_t>self.critic.b[l]) for l in range(self.critic.n_layers)]
        flat = [int(p) for pair in out for p in pair]
        if not self.discrete:
            flat.append(int(<intp_t>self.log_std))
        return flat

    def _run(self, obs, bint sample):
        o = real_array(obs, "obs", cnp.NPY_FLOAT)
        if o.ndim != 2 or o.shape[1] != self.obs_dim:
            raise ValueError(f"obs has shape {o.shape}, expected (B, {self.obs_dim})")
        cdef intp_t n = o.shape[0]
        if sample and n > self.n_streams:
            raise ValueError(f"obs has {n} rows but the policy has {self.n_streams} RNG streams")
        head = np.empty((n, self.n_head), dtype=np.float32)
        values = np.empty(n, dtype=np.float32)
        actions = np.empty((int(n), int(self.n_head if not self.discrete else 1)), dtype=np.float32)
        logp = np.empty(n, dtype=np.float32)
        if n == 0:
            return head, values, actions, logp
        work = np.empty(mlp_act_size(&self.actor, n) + mlp_act_size(&self.critic, n), dtype=np.float32)
        cdef const float32_t[:, ::1] ov = o
        cdef float32_t[:, ::1] hv = head
        cdef float32_t[::1] vv = values, lv = logp, wv = work
        cdef float32_t[::1] av = actions.reshape(-1)
        cdef float32_t* aa[MLP_MAX_LAYERS]
        cdef float32_t* ca[MLP_MAX_LAYERS]
        cdef float64_t lp
        cdef intp_t r
        cdef int nh = self.n_head, adim = 1 if self.discrete else self.n_head
        cdef int la = self.actor.n_layers - 1, lc = self.critic.n_layers - 1
        cdef int nthreads = _num_threads if n >= PAR_MIN_ENVS else 1
        limiter = _blas_one_thread(n, max(self.actor.max_width, self.critic.max_width, self.obs_dim))
        try:
            with nogil:
                mlp_act_point(&self.critic, mlp_act_point(&self.actor, &wv[0], n, aa), n, ca)
                mlp_forward(&self.actor, &ov[0, 0], <int>n, aa)
                mlp_forward(&self.critic, &ov[0, 0], <int>n, ca)
                memcpy(&hv[0, 0], aa[la], n * nh * sizeof(float32_t))
                memcpy(&vv[0], ca[lc], n * sizeof(float32_t))
                if sample:
                    for r in prange(n, schedule="static", num_threads=nthreads):
                        if self.discrete:
                            av[r] = <float32_t>sample_categorical(aa[la] + r * nh, nh, &self.rngs[r], &lp)
                        else:
                            lp = sample_gaussian(aa[la] + r * nh, self.log_std, nh, &self.rngs[r], &av[0] + r * adim)
                        lv[r] = <float32_t>lp
        finally:
            if limiter is not None:
                limiter.restore_original_limits()
        return head, values, actions, logp

    def forward(self, obs):
        """obs [B, obs_dim] (any real dtype; float32 is used in place) -> (logits or mean
        [B, n_head], values [B]), float32."""
        head, values, _, _ = self._run(obs, False)
        return head, values

    def act(self, obs):
        """obs [B, obs_dim], B <= n_streams -> (actions, log_probs [B] float32, values [B] float32).

        Row r draws from stream r. Discrete: actions [B] int64; continuous: [B, act_dim] float32
        (unclipped Gaussian samples).
        """
        _, values, actions, logp = self._run(obs, True)
        if self.discrete:
            actions = actions[:, 0].astype(np.int64)
        return actions, logp, values

    @property
    def obs_dim(self):
        return self.obs_dim

    @property
    def n_outputs(self):
        """n_actions (discrete) or act_dim (continuous)."""
        return self.n_head


cdef int _alloc_from_shapes(mlp_t* m, list shapes) except -1:
    cdef int l, n = len(shapes)
    cdef int dims[MLP_MAX_LAYERS + 1]
    dims[0] = shapes[0][1]
    for l in range(n):
        dims[l + 1] = shapes[l][0]
    return mlp_alloc(m, n, dims)


# ----------------------------------------------------------------------------- rollout loop
ENV_KINDS = {"CartPole-v1": 0, "Pendulum-v1": 1, "MountainCar-v0": 2,
             "MountainCarContinuous-v0": 3, "Acrobot-v1": 4}


cdef inline void _step_env(int discrete, int n_head, const float32_t* head, float32_t value,
                           const float32_t* log_std, rng_t* rng, env_t* env, float64_t* obs,
                           float64_t* ep_ret, int64_t* ep_len, int obs_dim, intp_t row,
                           float32_t* act_out, float32_t* logp_out, float32_t* val_out,
                           float32_t* done_out, float64_t* reward_io, float32_t* final_obs,
                           int* boot, float64_t* ep_ret_out, int64_t* ep_len_out,
                           int64_t* n_done) noexcept nogil:
    """One step of one env from its actor outputs ``head`` [n_head] and value: sample, write
    the action / log-prob / value / done of rollout row ``row``, step the env (obs IN/OUT, as
    float64), reset it at an episode's end. reward_io gets the step's reward; a truncated (not
    terminated) step sets boot = 1 and its final observation into final_obs [obs_dim], for the
    caller's bootstrap reward + gamma * V(final obs). Finished episodes' returns and lengths go
    to ep_ret_out / ep_len_out[n_done] (n_done incremented)."""
    cdef int j
    cdef float32_t obs32[ENV_MAX_OBS_DIM]
    cdef float64_t logp, reward
    cdef int64_t a_idx = 0
    cdef bint terminated, truncated
    if discrete:
        a_idx = sample_categorical(head, n_head, rng, &logp)
        act_out[row] = <float32_t>a_idx
    else:
        logp = sample_gaussian(head, log_std, n_head, rng, act_out + row * n_head)
    logp_out[row] = <float32_t>logp
    val_out[row] = value
    # the env gets the stored (float32) action, as a replay of the rollout would
    env_step(env, a_idx, <float64_t>act_out[row * n_head] if not discrete else 0.0, obs32,
             &reward, &terminated, &truncated)
    ep_ret[0] += reward
    ep_len[0] += 1
    boot[0] = 0
    if terminated or truncated:
        if not terminated:
            boot[0] = 1
            for j in range(obs_dim):
                final_obs[j] = obs32[j]
        ep_ret_out[n_done[0]] = ep_ret[0]
        ep_len_out[n_done[0]] = ep_len[0]
        n_done[0] += 1
        ep_ret[0] = 0.0
        ep_len[0] = 0
        env_reset(env)
        env_obs_f64(env, obs)
    else:
        for j in range(obs_dim):
            obs[j] = obs32[j]
    reward_io[0] = reward
    done_out[row] = 1.0 if (terminated or truncated) else 0.0


cdef class RolloutKernel:
    """Native envs stepped by a CompiledPolicy, T steps of all envs in one nogil loop.

    Args:
        policy: the CompiledPolicy (its RNG streams, one per env, sample the actions; it must
            have at least ``n_envs`` streams). It reads its weights in place, so each
            ``collect`` runs on whatever they hold then.
        env_id: one of ``ENV_KINDS`` (the native envs).
        n_envs: number of envs; env i is seeded ``seed + i`` like ``rlox.VecEnv(n, seed)``.
        seed: base env seed.
        max_steps: time limit per episode (<= 0: gymnasium's limit for the env).
    """
    cdef CompiledPolicy policy
    cdef int kind, n_envs, obs_dim
    cdef env_t* envs
    cdef float64_t* obs
    cdef float64_t* ep_ret
    cdef int64_t* ep_len
    # scratch, sized at construction
    cdef float32_t* s_x        # [N, obs_dim] network inputs (float32 observations)
    cdef float32_t* s_final    # [N, obs_dim] final observations of truncated episodes
    cdef float32_t* s_act      # activations: actor [N, ...] then critic [N, ...]
    cdef float64_t* s_rew      # [N] this step's rewards
    cdef int* s_boot           # [N] truncated this step (bootstrap needed)
    cdef intp_t* s_bidx        # [N] envs of the bootstrap rows

    def __cinit__(self):
        self.envs = NULL
        self.obs = NULL
        self.ep_ret = NULL
        self.ep_len = NULL
        self.s_x = NULL
        self.s_final = NULL
        self.s_act = NULL
        self.s_rew = NULL
        self.s_boot = NULL
        self.s_bidx = NULL

    def __init__(self, CompiledPolicy policy not None, str env_id, int n_envs, uint64_t seed=0,
                 int64_t max_steps=0):
        if env_id not in ENV_KINDS:
            raise ValueError(f"env_id {env_id!r} is not a native env; expected one of {', '.join(ENV_KINDS)}")
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        if n_envs > policy.n_streams:
            raise ValueError(f"n_envs is {n_envs} but the policy has {policy.n_streams} RNG streams; "
                             f"build it with n_streams >= n_envs")
        if self.envs != NULL:
            raise RuntimeError("RolloutKernel is already initialised; create a new one")
        self.kind = ENV_KINDS[env_id]
        self.obs_dim = env_obs_dim(self.kind)
        if policy.obs_dim != self.obs_dim:
            raise ValueError(f"policy takes {policy.obs_dim} inputs but {env_id} observations have "
                             f"{self.obs_dim}")
        n_act = env_n_actions(self.kind)
        if n_act > 0 and (not policy.discrete or policy.n_head != n_act):
            raise ValueError(f"{env_id} has {n_act} discrete actions; the policy must be discrete with "
                             f"{n_act} logits")
        if n_act == 0 and (policy.discrete or policy.n_head != 1):
            raise ValueError(f"{env_id} has a 1-D continuous action; the policy must be Gaussian with act_dim 1")
        self.policy = policy
        self.n_envs = n_envs
        cdef intp_t n_act_f = mlp_act_size(&policy.actor, n_envs) + mlp_act_size(&policy.critic, n_envs)
        self.envs = <env_t*>malloc(n_envs * sizeof(env_t))
        self.obs = <float64_t*>malloc(n_envs * self.obs_dim * sizeof(float64_t))
        self.ep_ret = <float64_t*>malloc(n_envs * sizeof(float64_t))
        self.ep_len = <int64_t*>malloc(n_envs * sizeof(int64_t))
        self.s_x = <float32_t*>malloc(n_envs * self.obs_dim * sizeof(float32_t))
        self.s_final = <float32_t*>malloc(n_envs * self.obs_dim * sizeof(float32_t))
        self.s_act = <float32_t*>malloc(n_act_f * sizeof(float32_t))
        self.s_rew = <float64_t*>malloc(n_envs * sizeof(float64_t))
        self.s_boot = <int*>malloc(n_envs * sizeof(int))
        self.s_bidx = <intp_t*>malloc(n_envs * sizeof(intp_t))
        if (self.envs == NULL or self.obs == NULL or self.ep_ret == NULL or self.ep_len == NULL
                or self.s_x == NULL or self.s_final == NULL or self.s_act == NULL or self.s_rew == NULL
                or self.s_boot == NULL or self.s_bidx == NULL):
            raise MemoryError()
        cdef int i
        for i in range(n_envs):
            env_init(&self.envs[i], self.kind, seed + <uint64_t>i, max_steps)
            env_reset(&self.envs[i])
            env_obs_f64(&self.envs[i], self.obs + i * self.obs_dim)
            self.ep_ret[i] = 0.0
            self.ep_len[i] = 0

    def __dealloc__(self):
        free(self.envs); free(self.obs); free(self.ep_ret); free(self.ep_len)
        free(self.s_x); free(self.s_final); free(self.s_act); free(self.s_rew); free(self.s_boot)
        free(self.s_bidx)

    def get_state(self):
        """Envs (physics, counters, RNG), current observations and episode accumulators, as
        arrays; ``set_state`` restores them exactly (same build, same env and n_envs)."""
        cdef Py_ssize_t nb = self.n_envs * sizeof(env_t)
        envs = np.empty(nb, dtype=np.uint8)
        obs = np.empty(self.n_envs * self.obs_dim, dtype=np.float64)
        ep_ret = np.empty(self.n_envs, dtype=np.float64)
        ep_len = np.empty(self.n_envs, dtype=np.int64)
        cdef unsigned char[::1] ev = envs
        cdef float64_t[::1] ov = obs, rv = ep_ret
        cdef int64_t[::1] lv = ep_len
        memcpy(&ev[0], <void*>self.envs, nb)
        memcpy(&ov[0], self.obs, self.n_envs * self.obs_dim * sizeof(float64_t))
        memcpy(&rv[0], self.ep_ret, self.n_envs * sizeof(float64_t))
        memcpy(&lv[0], self.ep_len, self.n_envs * sizeof(int64_t))
        return {"kind": self.kind, "envs": envs, "obs": obs, "ep_ret": ep_ret, "ep_len": ep_len}

    def set_state(self, state):
        """Restore ``get_state()``; ValueError when it is of another env, size or build."""
        cdef Py_ssize_t nb = self.n_envs * sizeof(env_t)
        envs = np.ascontiguousarray(np.asarray(state["envs"]), dtype=np.uint8).reshape(-1)
        obs = np.ascontiguousarray(np.asarray(state["obs"]), dtype=np.float64).reshape(-1)
        ep_ret = np.ascontiguousarray(np.asarray(state["ep_ret"]), dtype=np.float64).reshape(-1)
        ep_len = np.ascontiguousarray(np.asarray(state["ep_len"]), dtype=np.int64).reshape(-1)
        if (int(state["kind"]) != self.kind or envs.shape[0] != nb
                or obs.shape[0] != self.n_envs * self.obs_dim
                or ep_ret.shape[0] != self.n_envs or ep_len.shape[0] != self.n_envs):
            raise ValueError(f"rollout state does not fit this kernel ({self.n_envs} envs of kind "
                             f"{self.kind}); it was saved for another env, size or rlox build")
        cdef const unsigned char[::1] ev = envs
        cdef const float64_t[::1] ov = obs, rv = ep_ret
        cdef const int64_t[::1] lv = ep_len
        memcpy(<void*>self.envs, &ev[0], nb)
        memcpy(self.obs, &ov[0], self.n_envs * self.obs_dim * sizeof(float64_t))
        memcpy(self.ep_ret, &rv[0], self.n_envs * sizeof(float64_t))
        memcpy(self.ep_len, &lv[0], self.n_envs * sizeof(int64_t))

    @property
    def obs(self):
        """[n_envs, obs_dim] float32: the current observation of each env."""
        out = np.empty((self.n_envs, self.obs_dim), dtype=np.float32)
        cdef int i
        for i in range(self.n_envs * self.obs_dim):
            out.reshape(-1)[i] = self.obs[i]
        return out

    def collect(self, int n_steps, double gamma):
        """Run ``n_steps`` steps of every env.

        Returns a dict of env-major arrays: ``obs`` [N, T, obs_dim] f32, ``actions`` [N, T] f32
        (discrete indices) or [N, T, act_dim] f32, ``log_probs``, ``values``, ``rewards``
        (truncation-bootstrapped), ``dones`` [N, T] f32, ``last_values`` [N] f32 (value of the
        observation after the last step), ``episode_returns`` / ``episode_lengths`` of the
        episodes finished in this call (env-major order).
        """
        if n_steps < 1:
            raise ValueError(f"n_steps must be >= 1, got {n_steps}")
        if not (0.0 <= gamma <= 1.0):
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        cdef CompiledPolicy p = self.policy
        cdef int N = self.n_envs, T = n_steps, od = self.obs_dim, nh = p.n_head
        cdef int adim = 1 if p.discrete else nh
        obs_a = np.empty((N, T, od), dtype=np.float32)
        act_shape = (int(N), int(T)) if p.discrete else (int(N), int(T), int(adim))
        act_a = np.empty(act_shape, dtype=np.float32)
        logp_a = np.empty((N, T), dtype=np.float32)
        val_a = np.empty((N, T), dtype=np.float32)
        rew_a = np.empty((N, T), dtype=np.float32)
        done_a = np.empty((N, T), dtype=np.float32)
        last_a = np.empty(N, dtype=np.float32)
        epr_a = np.empty((N, T), dtype=np.float64)
        epl_a = np.empty((N, T), dtype=np.int64)
        nd_a = np.zeros(N, dtype=np.int64)
        cdef float32_t[:, :, ::1] ov = obs_a
        cdef float32_t[::1] av = act_a.reshape(-1)
        cdef float32_t[:, ::1] lv = logp_a, vv = val_a, rv = rew_a, dv = done_a
        cdef float32_t[::1] lastv = last_a
        cdef float64_t[:, ::1] eprv = epr_a
        cdef int64_t[:, ::1] eplv = epl_a
        cdef int64_t[::1] ndv = nd_a
        cdef float32_t* aa[MLP_MAX_LAYERS]
        cdef float32_t* ca[MLP_MAX_LAYERS]
        cdef int la = p.actor.n_layers - 1, lc = p.critic.n_layers - 1
        cdef intp_t i, t, row, k
        cdef int j
        cdef int nthreads = _num_threads if N >= PAR_MIN_ENVS else 1
        mlp_act_point(&p.critic, mlp_act_point(&p.actor, self.s_act, N, aa), N, ca)
        limiter = _blas_one_thread(N, max(p.actor.max_width, p.critic.max_width, od))
        try:
            with nogil:
                for t in range(T):
                    # the batch: every env's current observation, as float32 (what is stored)
                    for i in range(N):
                        for j in range(od):
                            self.s_x[i * od + j] = <float32_t>self.obs[i * od + j]
                        memcpy(&ov[i, t, 0], self.s_x + i * od, od * sizeof(float32_t))
                    mlp_forward(&p.actor, self.s_x, N, aa)
                    mlp_forward(&p.critic, self.s_x, N, ca)
                    for i in prange(N, schedule="static", num_threads=nthreads):
                        _step_env(p.discrete, nh, aa[la] + i * nh, ca[lc][i], p.log_std, &p.rngs[i],
                                  &self.envs[i], self.obs + i * od, &self.ep_ret[i], &self.ep_len[i],
                                  od, i * T + t, &av[0], &lv[0, 0], &vv[0, 0], &dv[0, 0],
                                  &self.s_rew[i], self.s_final + i * od, &self.s_boot[i],
                                  &eprv[i, 0], &eplv[i, 0], &ndv[i])
                    # the truncation bootstrap: one critic pass over the truncated envs' final obs
                    k = 0
                    for i in range(N):
                        if self.s_boot[i]:
                            memcpy(self.s_x + k * od, self.s_final + i * od, od * sizeof(float32_t))
                            self.s_bidx[k] = i
                            k += 1
                    if k > 0:
                        mlp_forward(&p.critic, self.s_x, <int>k, ca)
                        for row in range(k):
                            i = self.s_bidx[row]
                            self.s_rew[i] = self.s_rew[i] + gamma * <float64_t>ca[lc][row]
                    for i in range(N):
                        rv[i, t] = <float32_t>self.s_rew[i]
                for i in range(N):
                    for j in range(od):
                        self.s_x[i * od + j] = <float32_t>self.obs[i * od + j]
                mlp_forward(&p.critic, self.s_x, N, ca)
                for i in range(N):
                    lastv[i] = ca[lc][i]
        finally:
            if limiter is not None:
                limiter.restore_original_limits()
        ep_returns = np.concatenate([epr_a[k, :nd_a[k]] for k in range(N)])
        ep_lengths = np.concatenate([epl_a[k, :nd_a[k]] for k in range(N)])
        return {"obs": obs_a, "actions": act_a, "log_probs": logp_a, "values": val_a,
                "rewards": rew_a, "dones": done_a, "last_values": last_a,
                "episode_returns": ep_returns, "episode_lengths": ep_lengths}
