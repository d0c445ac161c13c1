# HybridPPO's compiled rollout: the actor/critic MLP forward pass, action sampling with one RNG
# stream per env, env stepping through envs_core.pxd and the rollout writes, in one nogil loop
# with prange over envs (each env runs all T steps on one thread), so results never depend on
# the thread count.
#
# Networks are the actor and critic MLPs of rlox.policies (Linear -> Tanh -> ... -> Linear).
# Their weights are copied in from torch with ``set_weights`` after each update; they are
# stored transposed ([in, out], row-major) so every layer is a run of contiguous axpy's that the
# compiler vectorises without -ffast-math.
from cython.parallel cimport prange
from libc.math cimport exp, log, tanh
from libc.stdlib cimport malloc, free
from libc.string cimport memset, memcpy
from _types cimport float64_t, float32_t, int64_t, intp_t, uint64_t
from _rng cimport rng_t, rng_seed, rng_uniform, rng_normal
from envs_core cimport (env_t, env_init, env_reset, env_obs_f64, env_step, env_obs_dim,
                        env_n_actions, ENV_MAX_OBS_DIM)
from _checks cimport real_array
import numpy as np
cimport numpy as cnp

cnp.import_array()

include "_threads.pxi"

cdef float64_t LOG_2PI = 1.8378770664093453  # log(2 pi)


# ----------------------------------------------------------------------------- MLP (own loops)
cdef struct mlp_t:
    int n_layers              # number of Linear layers (>= 1); Tanh after all but the last
    int max_width             # widest layer (scratch size per buffer)
    int* dims                 # [n_layers + 1]: dims[0] = input size, dims[l + 1] = out size of layer l
    intp_t* w_off             # [n_layers]: offset of layer l's transposed weight [in, out] in params
    intp_t* b_off             # [n_layers]: offset of layer l's bias [out] in params
    float64_t* params         # all weights and biases, float64


cdef inline void mlp_forward(const mlp_t* m, const float64_t* x, float64_t* buf_a, float64_t* buf_b,
                             float64_t* out) noexcept nogil:
    """out[dims[L]] = MLP(x[dims[0]]); buf_a/buf_b are scratch of m.max_width each."""
    cdef int l, i, j, n_in, n_out
    cdef const float64_t* cur = x
    cdef float64_t* dst
    cdef const float64_t* w
    cdef const float64_t* b
    cdef float64_t xi
    for l in range(m.n_layers):
        n_in = m.dims[l]
        n_out = m.dims[l + 1]
        if l == m.n_layers - 1:
            dst = out
        elif l % 2 == 0:
            dst = buf_a
        else:
            dst = buf_b
        w = m.params + m.w_off[l]
        b = m.params + m.b_off[l]
        for j in range(n_out):
            dst[j] = b[j]
        for i in range(n_in):
            xi = cur[i]
            for j in range(n_out):
                dst[j] += xi * w[i * n_out + j]
        if l < m.n_layers - 1:
            for j in range(n_out):
                dst[j] = tanh(dst[j])
        cur = dst


cdef int mlp_alloc(mlp_t* m, list shapes) except -1:
    """Allocate ``m`` for Linear layers with weight shapes [(out, in), ...] (torch layout)."""
    cdef int l, n = len(shapes)
    cdef intp_t off = 0
    m.n_layers = n
    m.dims = <int*>malloc((n + 1) * sizeof(int))
    m.w_off = <intp_t*>malloc(n * sizeof(intp_t))
    m.b_off = <intp_t*>malloc(n * sizeof(intp_t))
    if m.dims == NULL or m.w_off == NULL or m.b_off == NULL:
        raise MemoryError()
    m.max_width = 1
    for l in range(n):
        n_out, n_in = shapes[l]
        if l == 0:
            m.dims[0] = n_in
        m.dims[l + 1] = n_out
        m.w_off[l] = off
        off += n_in * n_out
        m.b_off[l] = off
        off += n_out
        if n_out > m.max_width:
            m.max_width = n_out
    m.params = <float64_t*>malloc(max(off, 1) * sizeof(float64_t))
    if m.params == NULL:
        raise MemoryError()
    memset(m.params, 0, max(off, 1) * sizeof(float64_t))
    return 0


cdef void mlp_free(mlp_t* m) noexcept:
    free(m.dims); free(m.w_off); free(m.b_off); free(m.params)
    m.dims = NULL; m.w_off = NULL; m.b_off = NULL; m.params = NULL


cdef int mlp_load(mlp_t* m, list layers, str name) except -1:
    """Copy [(W [out, in], b [out]), ...] (NumPy) into ``m`` (W stored transposed)."""
    cdef int l, i, j, n_in, n_out
    cdef float64_t[:, ::1] W
    cdef float64_t[::1] B
    if len(layers) != m.n_layers:
        raise ValueError(f"{name} has {len(layers)} linear layers, expected {m.n_layers}")
    for l in range(m.n_layers):
        n_in = m.dims[l]
        n_out = m.dims[l + 1]
        w_np = np.ascontiguousarray(layers[l][0], dtype=np.float64)
        b_np = np.ascontiguousarray(layers[l][1], dtype=np.float64)
        if w_np.shape != (n_out, n_in) or b_np.shape != (n_out,):
            raise ValueError(f"{name} layer {l} has weight {w_np.shape} and bias {b_np.shape}, "
                             f"expected ({n_out}, {n_in}) and ({n_out},)")
        if not (np.isfinite(w_np).all() and np.isfinite(b_np).all()):
            raise ValueError(f"{name} layer {l} holds NaN or infinite weights")
        W = w_np
        B = b_np
        for j in range(n_out):
            m.params[m.b_off[l] + j] = B[j]
            for i in range(n_in):
                m.params[m.w_off[l] + i * n_out + j] = W[j, i]
    return 0


# ----------------------------------------------------------------------------- action heads
cdef inline intp_t sample_categorical(const float64_t* logits, int n, rng_t* rng,
                                      float64_t* logp) noexcept nogil:
    """Draw a ~ softmax(logits[n]) by inverse CDF; logp = log softmax(logits)[a]."""
    cdef int j
    cdef float64_t mx = logits[0], total = 0.0, u, acc = 0.0
    for j in range(1, n):
        if logits[j] > mx:
            mx = logits[j]
    for j in range(n):
        total += exp(logits[j] - mx)
    u = rng_uniform(rng) * total
    cdef intp_t a = n - 1
    for j in range(n):
        acc += exp(logits[j] - mx)
        if u < acc:
            a = j
            break
    logp[0] = logits[a] - mx - log(total)
    return a


cdef inline float64_t sample_gaussian(const float64_t* mean, const float64_t* log_std, int d,
                                      rng_t* rng, float64_t* action) noexcept nogil:
    """action[d] = mean + exp(log_std) * N(0, I); returns the diagonal Gaussian log-density."""
    cdef int j
    cdef float64_t z, lp = 0.0
    for j in range(d):
        z = rng_normal(rng)
        action[j] = mean[j] + exp(log_std[j]) * z
        lp += -0.5 * z * z - log_std[j] - 0.5 * LOG_2PI
    return lp




# ----------------------------------------------------------------------------- Python class
cdef void _act_rows(const mlp_t* actor, const mlp_t* critic, int discrete, int n_head,
                    const float64_t* log_std, rng_t* rngs, const float64_t* obs, int obs_dim,
                    intp_t n_rows, float64_t* work, int scratch, float64_t* head_out,
                    float64_t* value_out, float64_t* action_out, float64_t* logp_out,
                    int sample) noexcept nogil:
    """Rows r in [0, n_rows): head_out[r] = actor(obs[r]), value_out[r] = critic(obs[r]) and,
    when ``sample``, action_out[r] / logp_out[r] drawn with rngs[r]."""
    cdef intp_t r
    cdef float64_t* buf_a
    cdef float64_t* buf_b
    cdef float64_t lp
    cdef int w = scratch // 2
    for r in prange(n_rows, nogil=True, schedule="static",
                    num_threads=(_num_threads if n_rows >= 64 else 1)):
        buf_a = work + r * scratch
        buf_b = buf_a + w
        mlp_forward(actor, obs + r * obs_dim, buf_a, buf_b, head_out + r * n_head)
        mlp_forward(critic, obs + r * obs_dim, buf_a, buf_b, value_out + r)
        if sample:
            if discrete:
                action_out[r] = <float64_t>sample_categorical(head_out + r * n_head, n_head, &rngs[r], &lp)
            else:
                lp = sample_gaussian(head_out + r * n_head, log_std, n_head, &rngs[r], action_out + r * n_head)
            logp_out[r] = lp


def _layer_shapes(layers, str name):
    if not isinstance(layers, (list, tuple)) or len(layers) == 0:
        raise ValueError(f"{name} must be a non-empty list of (weight [out, in], bias [out]) pairs")
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


cdef class CompiledPolicy:
    """Actor-critic MLPs (Linear/Tanh, as rlox.policies builds them) evaluated in C.

    Args:
        actor: [(W [out, in], b [out]), ...] of the actor MLP; the last layer gives logits
            [n_actions] (discrete) or the Gaussian mean [act_dim] (continuous).
        critic: same for the critic; its last layer has one output.
        discrete: Categorical head (True) or diagonal Gaussian with state-independent log std.
        log_std: [act_dim] (continuous only).
        n_streams: number of action-sampling RNG streams (one per env).
        seed: stream r is seeded with ``seed * 1_000_003 + r``.
    """
    cdef mlp_t actor
    cdef mlp_t critic
    cdef int discrete, obs_dim, n_head, n_streams, scratch
    cdef float64_t* log_std
    cdef rng_t* rngs

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
        self.discrete = discrete
        self.obs_dim = a_shapes[0][1]
        self.n_head = a_shapes[len(a_shapes) - 1][0]
        if discrete and self.n_head < 1:
            raise ValueError("actor must output at least one logit")
        mlp_alloc(&self.actor, a_shapes)
        mlp_alloc(&self.critic, c_shapes)
        self.scratch = 2 * max(self.actor.max_width, self.critic.max_width)
        self.log_std = <float64_t*>malloc(self.n_head * sizeof(float64_t))
        self.n_streams = n_streams
        self.rngs = <rng_t*>malloc(n_streams * sizeof(rng_t))
        if self.log_std == NULL or self.rngs == NULL:
            raise MemoryError()
        memset(self.log_std, 0, self.n_head * sizeof(float64_t))
        self.reseed(seed)
        self.set_weights(actor, critic, log_std)

    def __dealloc__(self):
        mlp_free(&self.actor)
        mlp_free(&self.critic)
        free(self.log_std)
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
        """Copy new weights in (after each gradient update); shapes must match construction."""
        mlp_load(&self.actor, list(actor), "actor")
        mlp_load(&self.critic, list(critic), "critic")
        cdef int j
        if not self.discrete:
            if log_std is None:
                raise ValueError("log_std is required for a continuous (Gaussian) policy")
            ls = np.asarray(log_std, dtype=np.float64).reshape(-1)
            if ls.shape != (self.n_head,) or not np.isfinite(ls).all():
                raise ValueError(f"log_std must be {self.n_head} finite values, got shape {ls.shape}")
            for j in range(self.n_head):
                self.log_std[j] = ls[j]

    def _run(self, obs, bint sample):
        o = real_array(obs, "obs", cnp.NPY_DOUBLE)
        if o.ndim != 2 or o.shape[1] != self.obs_dim:
            raise ValueError(f"obs has shape {o.shape}, expected (B, {self.obs_dim})")
        cdef intp_t n = o.shape[0]
        if sample and n > self.n_streams:
            raise ValueError(f"obs has {n} rows but the policy has {self.n_streams} RNG streams")
        head = np.empty((n, self.n_head), dtype=np.float64)
        values = np.empty(n, dtype=np.float64)
        actions = np.empty((int(n), int(self.n_head if not self.discrete else 1)), dtype=np.float64)
        logp = np.empty(n, dtype=np.float64)
        work = np.empty(max(n, 1) * self.scratch, dtype=np.float64)
        cdef const float64_t[:, ::1] ov = o
        cdef float64_t[:, ::1] hv = head
        cdef float64_t[::1] vv = values, lv = logp, wv = work
        cdef float64_t[::1] av = actions.reshape(-1)
        if n > 0:
            with nogil:
                _act_rows(&self.actor, &self.critic, self.discrete, self.n_head, self.log_std,
                          self.rngs, &ov[0, 0], self.obs_dim, n, &wv[0], self.scratch, &hv[0, 0],
                          &vv[0], &av[0], &lv[0], sample)
        return head, values, actions, logp

    def forward(self, obs):
        """obs [B, obs_dim] -> (logits or mean [B, n_head], values [B]), float64."""
        head, values, _, _ = self._run(obs, False)
        return head, values

    def act(self, obs):
        """obs [B, obs_dim], B <= n_streams -> (actions, log_probs [B], values [B]).

        Row r draws from stream r. Discrete: actions [B] int64; continuous: [B, act_dim] float64
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


# ----------------------------------------------------------------------------- rollout loop
ENV_KINDS = {"CartPole-v1": 0, "Pendulum-v1": 1, "MountainCar-v0": 2,
             "MountainCarContinuous-v0": 3, "Acrobot-v1": 4}


cdef void _rollout_env(const mlp_t* actor, const mlp_t* critic, int discrete, int n_head,
                       const float64_t* log_std, rng_t* rng, env_t* env, float64_t* obs,
                       float64_t* ep_ret, int64_t* ep_len, float64_t* work, int scratch,
                       int obs_dim, int n_steps, float64_t gamma, intp_t i,
                       float32_t* obs_out, float32_t* act_out, float32_t* logp_out,
                       float32_t* val_out, float32_t* rew_out, float32_t* done_out,
                       float32_t* last_val_out, float64_t* ep_ret_out, int64_t* ep_len_out,
                       int64_t* n_done_out) noexcept nogil:
    """Collect ``n_steps`` of env ``i``; writes row i of every [N, T, ...] output.

    obs (IN/OUT [obs_dim]) is the env's current observation. A truncated (not terminated) step
    gets gamma * V(final observation) added to its reward (the bootstrap); both kinds of
    episode end are marked done, and the env is reset in place. Finished episodes' returns and
    lengths go to ep_ret_out / ep_len_out [N, T] (the first n_done_out[i] entries of row i)."""
    cdef int t, j, w = scratch // 2
    cdef float64_t* buf_a = work
    cdef float64_t* buf_b = work + w
    cdef float64_t head[64]
    cdef float64_t action[64]
    cdef float64_t final_obs[ENV_MAX_OBS_DIM]
    cdef float32_t obs32[ENV_MAX_OBS_DIM]
    cdef float64_t value, final_value, logp, reward
    cdef intp_t row, n_done = 0
    cdef int64_t a_idx
    cdef bint terminated, truncated
    for t in range(n_steps):
        row = i * n_steps + t
        for j in range(obs_dim):
            obs_out[row * obs_dim + j] = <float32_t>obs[j]
        mlp_forward(actor, obs, buf_a, buf_b, head)
        mlp_forward(critic, obs, buf_a, buf_b, &value)
        if discrete:
            a_idx = sample_categorical(head, n_head, rng, &logp)
            act_out[row] = <float32_t>a_idx
            action[0] = 0.0
        else:
            a_idx = 0
            logp = sample_gaussian(head, log_std, n_head, rng, action)
            for j in range(n_head):
                act_out[row * n_head + j] = <float32_t>action[j]
        logp_out[row] = <float32_t>logp
        val_out[row] = <float32_t>value
        env_step(env, a_idx, action[0], obs32, &reward, &terminated, &truncated)
        ep_ret[0] += reward
        ep_len[0] += 1
        if terminated or truncated:
            if not terminated:
                for j in range(obs_dim):
                    final_obs[j] = obs32[j]
                mlp_forward(critic, final_obs, buf_a, buf_b, &final_value)
                reward = reward + gamma * final_value
            ep_ret_out[i * n_steps + n_done] = ep_ret[0]
            ep_len_out[i * n_steps + n_done] = ep_len[0]
            n_done += 1
            ep_ret[0] = 0.0
            ep_len[0] = 0
            env_reset(env)
            env_obs_f64(env, obs)
        else:
            for j in range(obs_dim):
                obs[j] = obs32[j]
        rew_out[row] = <float32_t>reward
        done_out[row] = 1.0 if (terminated or truncated) else 0.0
    mlp_forward(critic, obs, buf_a, buf_b, &value)
    last_val_out[i] = <float32_t>value
    n_done_out[i] = n_done


cdef class RolloutKernel:
    """Native envs stepped by a CompiledPolicy, T steps per env in one nogil prange loop.

    Args:
        policy: the CompiledPolicy (its RNG streams, one per env, sample the actions; it must
            have at least ``n_envs`` streams). Call ``policy.set_weights`` after each update.
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

    def __cinit__(self):
        self.envs = NULL
        self.obs = NULL
        self.ep_ret = NULL
        self.ep_len = NULL

    def __init__(self, CompiledPolicy policy not None, str env_id, int n_envs, uint64_t seed=0,
                 int64_t max_steps=0):
        if env_id not in ENV_KINDS:
            raise ValueError(f"env_id {env_id!r} is not a native env; expected one of {', '.join(ENV_KINDS)}")
        if n_envs < 1:
            raise ValueError(f"n_envs must be >= 1, got {n_envs}")
        if n_envs > policy.n_streams:
            raise ValueError(f"n_envs is {n_envs} but the policy has {policy.n_streams} RNG streams; "
                             f"build it with n_streams >= n_envs")
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
        if policy.n_head > 64:
            raise ValueError(f"the actor head has {policy.n_head} outputs; at most 64 are supported")
        self.policy = policy
        self.n_envs = n_envs
        self.envs = <env_t*>malloc(n_envs * sizeof(env_t))
        self.obs = <float64_t*>malloc(n_envs * self.obs_dim * sizeof(float64_t))
        self.ep_ret = <float64_t*>malloc(n_envs * sizeof(float64_t))
        self.ep_len = <int64_t*>malloc(n_envs * sizeof(int64_t))
        if self.envs == NULL or self.obs == NULL or self.ep_ret == NULL or self.ep_len == NULL:
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
        work_a = np.empty(N * p.scratch, dtype=np.float64)
        cdef float32_t[:, :, ::1] ov = obs_a
        cdef float32_t[::1] av = act_a.reshape(-1)
        cdef float32_t[:, ::1] lv = logp_a, vv = val_a, rv = rew_a, dv = done_a
        cdef float32_t[::1] lastv = last_a
        cdef float64_t[:, ::1] eprv = epr_a
        cdef int64_t[:, ::1] eplv = epl_a
        cdef int64_t[::1] ndv = nd_a
        cdef float64_t[::1] wv = work_a
        cdef intp_t i
        cdef int nthreads = _num_threads if N >= 4 else 1
        with nogil:
            for i in prange(N, schedule="static", num_threads=nthreads):
                _rollout_env(&p.actor, &p.critic, p.discrete, nh, p.log_std, &p.rngs[i],
                             &self.envs[i], self.obs + i * od, &self.ep_ret[i], &self.ep_len[i],
                             &wv[0] + i * p.scratch, p.scratch, od, T, gamma, i,
                             &ov[0, 0, 0], &av[0], &lv[0, 0], &vv[0, 0], &rv[0, 0], &dv[0, 0],
                             &lastv[0], &eprv[0, 0], &eplv[0, 0], &ndv[0])
        ep_returns = np.concatenate([epr_a[k, :nd_a[k]] for k in range(N)])
        ep_lengths = np.concatenate([epl_a[k, :nd_a[k]] for k in range(N)])
        return {"obs": obs_a, "actions": act_a, "log_probs": logp_a, "values": val_a,
                "rewards": rew_a, "dones": done_a, "last_values": last_a,
                "episode_returns": ep_returns, "episode_lengths": ep_lengths}
