# Native vectorised MPE scenarios (see mpe.pxd for the contract and the physics).
# rlox.MultiAgentVecEnv (rlox/multiagent/envs.py) wraps MPECore.
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport sqrt, exp, log1p, isnan
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset
from _types cimport float64_t, float32_t, int64_t, uint64_t, bool_t
from _rng cimport rng_t, rng_seed, rng_uniform_range, rng_below
from mpe_core cimport mpe_spec_t, mpe_env_t, MPE_SPREAD, MPE_SPEAKER_LISTENER, MPE_N_KINDS
import numpy as np

include "_threads.pxi"

cnp.import_array()

KIND_SPREAD = MPE_SPREAD
KIND_SPEAKER_LISTENER = MPE_SPEAKER_LISTENER

# mpe2's World constants (core.py) and scenario constants.
cdef float64_t DT = 0.1
cdef float64_t DAMPING = 0.25
cdef float64_t CONTACT_FORCE = 100.0
cdef float64_t CONTACT_MARGIN = 1e-3
cdef float64_t SENSITIVITY = 5.0          # action.u scale when agent.accel is None
cdef float64_t SPREAD_SIZE = 0.15         # simple_spread agent size
# simple_speaker_listener landmark colours (the speaker observes its goal's colour).
cdef float64_t SL_COLORS[9]
SL_COLORS[:] = [0.65, 0.15, 0.15, 0.15, 0.65, 0.15, 0.15, 0.15, 0.65]
# Below this many env-steps of work per call, a serial loop beats OpenMP's fork/join.
cdef int64_t PARALLEL_MIN_ENVS = 32
_U64 = 1 << 64


# ----------------------------------------------------------------------------- kernels
cdef inline bint _movable(const mpe_spec_t* spec, int i) noexcept nogil:
    return not (spec.kind == MPE_SPEAKER_LISTENER and i == 0)


cdef inline bint _silent(const mpe_spec_t* spec, int i) noexcept nogil:
    return not (spec.kind == MPE_SPEAKER_LISTENER and i == 0)


cdef inline float32_t _clip01(float32_t x) noexcept nogil:
    return 0.0 if x < 0.0 else (1.0 if x > 1.0 else x)


cdef inline float64_t _logaddexp0(float64_t v) noexcept nogil:
    """numpy.logaddexp(0, v), branch for branch."""
    if v == 0.0:
        return v + 0.6931471805599453
    if -v > 0:
        return log1p(exp(v))
    return v + log1p(exp(-v))


cdef void mpe_reset(const mpe_spec_t* spec, mpe_env_t* e) noexcept nogil:
    cdef int i
    if spec.kind == MPE_SPEAKER_LISTENER:
        e.goal[0] = <int64_t>rng_below(e.rng, 3)
    for i in range(spec.n_entities):
        # agents first, then landmarks (reset_world's order): U(-1, 1)^2 each
        e.pos[2 * i] = rng_uniform_range(e.rng, -1.0, 1.0)
        e.pos[2 * i + 1] = rng_uniform_range(e.rng, -1.0, 1.0)
        e.vel[2 * i] = 0.0
        e.vel[2 * i + 1] = 0.0
    memset(e.comm, 0, spec.n_agents * spec.dim_c * sizeof(float64_t))
    e.steps[0] = 0


cdef void mpe_observe(const mpe_spec_t* spec, const mpe_env_t* e, float32_t* obs,
                      float32_t* state) noexcept nogil:
    cdef int A = spec.n_agents, D = spec.obs_dim, C = spec.dim_c, i, j, k, l, s = 0
    cdef float32_t* o
    cdef int64_t lm
    memset(obs, 0, A * D * sizeof(float32_t))
    for i in range(A):
        o = obs + i * D
        k = 0
        if spec.kind == MPE_SPREAD:
            # [self_vel, self_pos, landmark_rel_positions, other_agent_rel_positions, comm]
            o[0] = <float32_t>e.vel[2 * i]
            o[1] = <float32_t>e.vel[2 * i + 1]
            o[2] = <float32_t>e.pos[2 * i]
            o[3] = <float32_t>e.pos[2 * i + 1]
            k = 4
            for l in range(spec.n_landmarks):
                o[k] = <float32_t>(e.pos[2 * (A + l)] - e.pos[2 * i])
                o[k + 1] = <float32_t>(e.pos[2 * (A + l) + 1] - e.pos[2 * i + 1])
                k += 2
            for j in range(A):
                if j != i:
                    o[k] = <float32_t>(e.pos[2 * j] - e.pos[2 * i])
                    o[k + 1] = <float32_t>(e.pos[2 * j + 1] - e.pos[2 * i + 1])
                    k += 2
            for j in range(A):
                if j != i:
                    for l in range(C):
                        o[k + l] = <float32_t>e.comm[j * C + l]
                    k += C
        elif i == 0:
            # speaker: the colour of its goal landmark
            lm = e.goal[0]
            o[0] = <float32_t>SL_COLORS[3 * lm]
            o[1] = <float32_t>SL_COLORS[3 * lm + 1]
            o[2] = <float32_t>SL_COLORS[3 * lm + 2]
            k = 3
        else:
            # listener: [self_vel, landmark_rel_positions, speaker's communication]
            o[0] = <float32_t>e.vel[2 * i]
            o[1] = <float32_t>e.vel[2 * i + 1]
            k = 2
            for l in range(spec.n_landmarks):
                o[k] = <float32_t>(e.pos[2 * (A + l)] - e.pos[2 * i])
                o[k + 1] = <float32_t>(e.pos[2 * (A + l) + 1] - e.pos[2 * i + 1])
                k += 2
            for l in range(C):
                o[k + l] = <float32_t>e.comm[l]
            k += C
        if state != NULL:
            memcpy(state + s, o, k * sizeof(float32_t))
            s += k


cdef bint mpe_step(const mpe_spec_t* spec, mpe_env_t* e, const int64_t* act_d,
                   const float32_t* act_c, float32_t* rewards) noexcept nogil:
    cdef int A = spec.n_agents, C = spec.dim_c, K = spec.act_dim, i, j, l
    cdef float64_t* f = e.force
    cdef float64_t ux, uy, dx, dy, dist, pen, fx, fy, glob, rew, best
    cdef float32_t a1, a2, a3, a4
    cdef int64_t a
    memset(f, 0, 2 * spec.n_entities * sizeof(float64_t))
    # 1. actions (SimpleEnv._set_action): movement -> force u * sensitivity; communication
    for i in range(A):
        if _movable(spec, i):
            ux = 0.0
            uy = 0.0
            if spec.continuous:
                a1 = _clip01(act_c[i * K + 1])
                a2 = _clip01(act_c[i * K + 2])
                a3 = _clip01(act_c[i * K + 3])
                a4 = _clip01(act_c[i * K + 4])
                ux = <float32_t>(a2 - a1)      # float32 difference, as NumPy computes it
                uy = <float32_t>(a4 - a3)
            else:
                a = act_d[i] % 5
                if a == 1:
                    ux = -1.0
                elif a == 2:
                    ux = 1.0
                elif a == 3:
                    uy = -1.0
                elif a == 4:
                    uy = 1.0
            f[2 * i] = ux * SENSITIVITY
            f[2 * i + 1] = uy * SENSITIVITY
        if _silent(spec, i):
            memset(e.comm + i * C, 0, C * sizeof(float64_t))
        elif spec.continuous:
            for l in range(C):
                e.comm[i * C + l] = _clip01(act_c[i * K + l])
        else:
            memset(e.comm + i * C, 0, C * sizeof(float64_t))
            e.comm[i * C + act_d[i]] = 1.0
    # 2. contact forces (World.apply_environment_force): only spread's agents collide
    if spec.kind == MPE_SPREAD:
        for i in range(A):
            for j in range(i + 1, A):
                dx = e.pos[2 * i] - e.pos[2 * j]
                dy = e.pos[2 * i + 1] - e.pos[2 * j + 1]
                dist = sqrt(dx * dx + dy * dy)
                pen = _logaddexp0(-(dist - 2 * SPREAD_SIZE) / CONTACT_MARGIN) * CONTACT_MARGIN
                fx = CONTACT_FORCE * dx / dist * pen
                fy = CONTACT_FORCE * dy / dist * pen
                f[2 * i] = fx + f[2 * i]
                f[2 * i + 1] = fy + f[2 * i + 1]
                f[2 * j] = -fx + f[2 * j]
                f[2 * j + 1] = -fy + f[2 * j + 1]
    # 3. integration (World.integrate_state): position with the old velocity, then damping,
    #    then force / mass (mass 1) * dt; no max_speed in these scenarios
    for i in range(A):
        if _movable(spec, i):
            e.pos[2 * i] += e.vel[2 * i] * DT
            e.pos[2 * i + 1] += e.vel[2 * i + 1] * DT
            e.vel[2 * i] = e.vel[2 * i] * (1 - DAMPING)
            e.vel[2 * i + 1] = e.vel[2 * i + 1] * (1 - DAMPING)
            e.vel[2 * i] += f[2 * i] * DT
            e.vel[2 * i + 1] += f[2 * i + 1] * DT
    e.steps[0] += 1
    # 4. rewards
    if spec.kind == MPE_SPREAD:
        glob = 0.0
        for l in range(spec.n_landmarks):
            best = -1.0
            for j in range(A):
                dx = e.pos[2 * j] - e.pos[2 * (A + l)]
                dy = e.pos[2 * j + 1] - e.pos[2 * (A + l) + 1]
                dist = sqrt(dx * dx + dy * dy)
                if best < 0 or dist < best:
                    best = dist
            glob -= best
        for i in range(A):
            rew = 0.0
            for j in range(A):
                if j != i:
                    dx = e.pos[2 * j] - e.pos[2 * i]
                    dy = e.pos[2 * j + 1] - e.pos[2 * i + 1]
                    if sqrt(dx * dx + dy * dy) < 2 * SPREAD_SIZE:
                        rew -= 1.0
            rewards[i] = <float32_t>(glob * (1 - spec.local_ratio) + rew * spec.local_ratio)
    else:
        dx = e.pos[2] - e.pos[2 * (A + e.goal[0])]
        dy = e.pos[3] - e.pos[2 * (A + e.goal[0]) + 1]
        rew = -(dx * dx + dy * dy)
        for i in range(A):
            rewards[i] = <float32_t>rew
    return e.steps[0] >= spec.max_cycles


cdef inline void _step_one(const mpe_spec_t* spec, mpe_env_t* e, const int64_t* act_d,
                           const float32_t* act_c, float32_t* obs, float32_t* state,
                           float32_t* rew, bool_t* trunc, float32_t* fobs,
                           float32_t* fstate) noexcept nogil:
    """Step one env; when it is truncated, write its final observation and state to fobs /
    fstate, reset it, and write the new episode's first observation to obs / state."""
    cdef bint done = mpe_step(spec, e, act_d, act_c, rew)
    trunc[0] = done
    if done:
        mpe_observe(spec, e, fobs, fstate)
        mpe_reset(spec, e)
    mpe_observe(spec, e, obs, state)


# ----------------------------------------------------------------------------- the core
_SCENARIOS = ("simple_spread_v3", "simple_speaker_listener_v4")


cdef void _check_buffer(object arr, str name, object dtype, tuple shape) except *:
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"{name} must be a NumPy array, got {type(arr).__name__}")
    if arr.dtype != dtype or not arr.dtype.isnative:
        raise TypeError(f"{name} must be a native-byte-order {np.dtype(dtype).name} array, got {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"{name} has shape {arr.shape}, expected {shape}")
    if not arr.flags.c_contiguous or not arr.flags.writeable:
        raise ValueError(f"{name} must be C-contiguous and writeable")


cdef class MPECore:
    """``n_envs`` copies of one MPE scenario stepped in one call (see rlox.MultiAgentVecEnv).

    Outputs go to caller-owned buffers given once to ``bind`` (checked there): obs
    float32 [n_envs, n_agents, obs_dim], state float32 [n_envs, state_dim], rewards float32
    [n_envs, n_agents], truncated bool [n_envs], final_obs / final_state (the last
    observation of envs that were truncated and reset by this step; other rows untouched).
    """
    cdef mpe_spec_t spec
    cdef readonly int64_t n_envs
    cdef float64_t* _pos
    cdef float64_t* _vel
    cdef float64_t* _comm
    cdef float64_t* _force
    cdef int64_t* _goal
    cdef int64_t* _steps
    cdef rng_t* _rng
    cdef mpe_env_t* _envs
    cdef object _bufs                  # (obs, state, rewards, truncated, final_obs, final_state)
    cdef bint _was_reset
    cdef readonly tuple n_actions      # per agent: discrete action count / Box width

    def __cinit__(self):
        self._pos = self._vel = self._comm = self._force = NULL
        self._goal = self._steps = NULL
        self._rng = NULL
        self._envs = NULL

    def __init__(self, int kind, n_envs, int n_agents, seed, int max_cycles, double local_ratio,
                 bint continuous):
        if kind < 0 or kind >= MPE_N_KINDS:
            raise ValueError(f"unknown MPE scenario kind {kind}; expected 0 ({_SCENARIOS[0]}) or "
                             f"1 ({_SCENARIOS[1]})")
        if isinstance(n_envs, bool) or not isinstance(n_envs, (int, np.integer)) or n_envs < 1:
            raise ValueError(f"n_envs must be an int >= 1, got {n_envs!r}")
        if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < _U64 - n_envs:
            raise ValueError(f"seed must be an int in [0, 2**64 - n_envs), got {seed!r}")
        if max_cycles < 1:
            raise ValueError(f"max_cycles must be >= 1, got {max_cycles}")
        if not 0.0 <= local_ratio <= 1.0:
            raise ValueError(f"local_ratio must be in [0, 1], got {local_ratio}")
        if kind == MPE_SPREAD and not 1 <= n_agents <= 256:
            raise ValueError(f"{_SCENARIOS[kind]} takes N (n_agents) in [1, 256], got {n_agents}")
        if kind == MPE_SPEAKER_LISTENER and n_agents != 2:
            raise ValueError(f"{_SCENARIOS[kind]} has exactly 2 agents (speaker_0, listener_0), "
                             f"got n_agents={n_agents}")
        cdef mpe_spec_t* s = &self.spec
        s.kind = kind
        s.n_agents = n_agents
        s.continuous = continuous
        s.max_cycles = max_cycles
        s.local_ratio = local_ratio
        s.act_dim = 5 if continuous else 1
        if kind == MPE_SPREAD:
            s.n_landmarks = n_agents
            s.dim_c = 2
            s.obs_dim = 4 + 2 * n_agents + 2 * (n_agents - 1) + 2 * (n_agents - 1)
            s.state_dim = n_agents * s.obs_dim
            self.n_actions = (5,) * n_agents
        else:
            s.n_landmarks = 3
            s.dim_c = 3
            s.obs_dim = 11
            s.state_dim = 3 + 11
            self.n_actions = (3, 5)
        s.n_entities = s.n_agents + s.n_landmarks
        self.n_envs = n_envs
        cdef int64_t n = n_envs, i
        cdef int ne = s.n_entities
        self._pos = <float64_t*>calloc(n * ne * 2, sizeof(float64_t))
        self._vel = <float64_t*>calloc(n * ne * 2, sizeof(float64_t))
        self._force = <float64_t*>calloc(n * ne * 2, sizeof(float64_t))
        self._comm = <float64_t*>calloc(n * s.n_agents * s.dim_c, sizeof(float64_t))
        self._goal = <int64_t*>calloc(n, sizeof(int64_t))
        self._steps = <int64_t*>calloc(n, sizeof(int64_t))
        self._rng = <rng_t*>calloc(n, sizeof(rng_t))
        self._envs = <mpe_env_t*>calloc(n, sizeof(mpe_env_t))
        if (self._pos == NULL or self._vel == NULL or self._force == NULL or self._comm == NULL
                or self._goal == NULL or self._steps == NULL or self._rng == NULL or self._envs == NULL):
            raise MemoryError(f"cannot allocate {n} MPE envs")
        for i in range(n):
            self._envs[i].pos = self._pos + i * ne * 2
            self._envs[i].vel = self._vel + i * ne * 2
            self._envs[i].force = self._force + i * ne * 2
            self._envs[i].comm = self._comm + i * s.n_agents * s.dim_c
            self._envs[i].goal = self._goal + i
            self._envs[i].steps = self._steps + i
            self._envs[i].rng = self._rng + i
        self._seed_all(<uint64_t>seed)
        self._bufs = None
        self._was_reset = False

    def __dealloc__(self):
        free(self._pos)
        free(self._vel)
        free(self._force)
        free(self._comm)
        free(self._goal)
        free(self._steps)
        free(self._rng)
        free(self._envs)

    cdef void _seed_all(self, uint64_t seed):
        cdef int64_t i
        for i in range(self.n_envs):
            rng_seed(&self._rng[i], seed + <uint64_t>i)   # per-env stream: (seed, env index)

    # ------------------------------------------------------------------ shapes
    @property
    def n_agents(self):
        return self.spec.n_agents

    @property
    def n_landmarks(self):
        return self.spec.n_landmarks

    @property
    def obs_dim(self):
        return self.spec.obs_dim

    @property
    def state_dim(self):
        return self.spec.state_dim

    @property
    def act_dim(self):
        return self.spec.act_dim

    @property
    def dim_c(self):
        return self.spec.dim_c

    @property
    def continuous(self):
        return bool(self.spec.continuous)

    @property
    def max_cycles(self):
        return self.spec.max_cycles

    def bind(self, obs, state, rewards, truncated, final_obs, final_state):
        """Check the caller-owned output buffers once and write every later step into them."""
        cdef int64_t n = self.n_envs
        cdef int A = self.spec.n_agents, D = self.spec.obs_dim, S = self.spec.state_dim
        _check_buffer(obs, "obs", np.float32, (n, A, D))
        _check_buffer(state, "state", np.float32, (n, S))
        _check_buffer(rewards, "rewards", np.float32, (n, A))
        _check_buffer(truncated, "truncated", np.bool_, (n,))
        _check_buffer(final_obs, "final_obs", np.float32, (n, A, D))
        _check_buffer(final_state, "final_state", np.float32, (n, S))
        self._bufs = (obs, state, rewards, truncated, final_obs, final_state)

    cdef void _need_bufs(self) except *:
        if self._bufs is None:
            raise RuntimeError("MPECore: call bind(obs, state, rewards, truncated, final_obs, final_state) first")

    def reset_all(self, seed=None):
        """Reset every env (env i re-seeded with seed + i when ``seed`` is given) and write
        the first observations and states into the bound buffers."""
        self._need_bufs()
        if seed is not None:
            if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= seed < _U64 - self.n_envs:
                raise ValueError(f"seed must be an int in [0, 2**64 - n_envs), got {seed!r}")
            self._seed_all(<uint64_t>seed)
        cdef int64_t i
        for i in range(self.n_envs):
            mpe_reset(&self.spec, &self._envs[i])
        self.observe()
        self._was_reset = True

    def observe(self):
        """Write every env's current observations and state into the bound buffers."""
        self._need_bufs()
        cdef float32_t* po = <float32_t*>cnp.PyArray_DATA(self._bufs[0])
        cdef float32_t* ps = <float32_t*>cnp.PyArray_DATA(self._bufs[1])
        cdef int64_t i, od = self.spec.n_agents * self.spec.obs_dim, sd = self.spec.state_dim
        for i in range(self.n_envs):
            mpe_observe(&self.spec, &self._envs[i], po + i * od, ps + i * sd)

    def step(self, actions):
        """Step every env with ``actions`` (int64 [n_envs, n_agents], or float32 [n_envs,
        n_agents, act_dim] for continuous actions); truncated envs reset themselves."""
        self._need_bufs()
        if not self._was_reset:
            raise RuntimeError("MPECore: call reset_all() before step()")
        cdef int64_t n = self.n_envs, i, j, bad_i = -1, bad_j = -1
        cdef int A = self.spec.n_agents, K = self.spec.act_dim
        cdef const int64_t* pd = NULL
        cdef const float32_t* pc = NULL
        cdef cnp.ndarray arr
        if self.spec.continuous:
            arr = _as_array(actions, np.float32, (n, A, K), "continuous actions (floats in [0, 1])")
            pc = <const float32_t*>cnp.PyArray_DATA(arr)
            for i in range(n * A * K):
                if isnan(pc[i]):
                    bad_i = i
                    break
            if bad_i >= 0:
                raise ValueError(f"actions hold NaN at flat index {bad_i}; expected floats in [0, 1]")
        else:
            arr = _as_array(actions, np.int64, (n, A), "discrete actions (ints)")
            pd = <const int64_t*>cnp.PyArray_DATA(arr)
            for i in range(n):
                for j in range(A):
                    if pd[i * A + j] < 0 or pd[i * A + j] >= self.n_actions[j]:
                        bad_i, bad_j = i, j
                        break
                if bad_i >= 0:
                    break
            if bad_i >= 0:
                raise ValueError(f"actions[{bad_i}, {bad_j}] = {pd[bad_i * A + bad_j]} is out of range for "
                                 f"agent {bad_j} of {_SCENARIOS[self.spec.kind]}; expected an int in "
                                 f"[0, {self.n_actions[bad_j]})")
        cdef float32_t* po = <float32_t*>cnp.PyArray_DATA(self._bufs[0])
        cdef float32_t* ps = <float32_t*>cnp.PyArray_DATA(self._bufs[1])
        cdef float32_t* pr = <float32_t*>cnp.PyArray_DATA(self._bufs[2])
        cdef bool_t* pt = <bool_t*>cnp.PyArray_DATA(self._bufs[3])
        cdef float32_t* pfo = <float32_t*>cnp.PyArray_DATA(self._bufs[4])
        cdef float32_t* pfs = <float32_t*>cnp.PyArray_DATA(self._bufs[5])
        with nogil:
            _step_all(&self.spec, self._envs, n, pd, pc, po, ps, pr, pt, pfo, pfs)

    # ------------------------------------------------------------------ state access
    def get_world(self, Py_ssize_t i):
        """Env ``i``'s world as NumPy copies: pos, vel [n_entities, 2], comm [n_agents, dim_c],
        goal, steps."""
        self._check_index(i)
        cdef int ne = self.spec.n_entities, A = self.spec.n_agents, C = self.spec.dim_c
        pos = np.empty((ne, 2))
        vel = np.empty((ne, 2))
        comm = np.empty((A, C))
        cdef float64_t[:, ::1] pv = pos, vv = vel, cv = comm
        memcpy(&pv[0, 0], self._envs[i].pos, ne * 2 * sizeof(float64_t))
        memcpy(&vv[0, 0], self._envs[i].vel, ne * 2 * sizeof(float64_t))
        if A * C:
            memcpy(&cv[0, 0], self._envs[i].comm, A * C * sizeof(float64_t))
        return {"pos": pos, "vel": vel, "comm": comm, "goal": int(self._goal[i]), "steps": int(self._steps[i])}

    def set_world(self, Py_ssize_t i, pos, vel, comm, goal=0, steps=0):
        """Set env ``i``'s world (shapes as ``get_world``; finite values; goal in [0, 3) for
        speaker-listener; 0 <= steps < max_cycles)."""
        self._check_index(i)
        cdef int ne = self.spec.n_entities, A = self.spec.n_agents, C = self.spec.dim_c
        p = _finite(pos, (ne, 2), "pos")
        v = _finite(vel, (ne, 2), "vel")
        c = _finite(comm, (A, C), "comm")
        if isinstance(goal, bool) or not isinstance(goal, (int, np.integer)) or not 0 <= goal < self.spec.n_landmarks:
            raise ValueError(f"goal must be a landmark index in [0, {self.spec.n_landmarks}), got {goal!r}")
        if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or not 0 <= steps < self.spec.max_cycles:
            raise ValueError(f"steps must be an int in [0, {self.spec.max_cycles}), got {steps!r}")
        cdef float64_t[:, ::1] pv = p, vv = v, cv = c
        memcpy(self._envs[i].pos, &pv[0, 0], ne * 2 * sizeof(float64_t))
        memcpy(self._envs[i].vel, &vv[0, 0], ne * 2 * sizeof(float64_t))
        if A * C:
            memcpy(self._envs[i].comm, &cv[0, 0], A * C * sizeof(float64_t))
        self._goal[i] = goal
        self._steps[i] = steps
        self._was_reset = True

    cdef void _check_index(self, Py_ssize_t i) except *:
        if not 0 <= i < self.n_envs:
            raise IndexError(f"env index {i} is out of range for {self.n_envs} envs")

    def get_state(self):
        """Every env's world, step counter and random stream (copies), for checkpoints."""
        cdef int64_t n = self.n_envs
        cdef int ne = self.spec.n_entities, A = self.spec.n_agents, C = self.spec.dim_c
        out = {"pos": np.empty((n, ne, 2)), "vel": np.empty((n, ne, 2)), "comm": np.empty((n, A, C)),
               "goal": np.empty(n, dtype=np.int64), "steps": np.empty(n, dtype=np.int64),
               "rng": np.empty((n, 4), dtype=np.int64), "was_reset": bool(self._was_reset)}
        memcpy(cnp.PyArray_DATA(out["pos"]), self._pos, n * ne * 2 * sizeof(float64_t))
        memcpy(cnp.PyArray_DATA(out["vel"]), self._vel, n * ne * 2 * sizeof(float64_t))
        memcpy(cnp.PyArray_DATA(out["comm"]), self._comm, n * A * C * sizeof(float64_t))
        memcpy(cnp.PyArray_DATA(out["goal"]), self._goal, n * sizeof(int64_t))
        memcpy(cnp.PyArray_DATA(out["steps"]), self._steps, n * sizeof(int64_t))
        memcpy(cnp.PyArray_DATA(out["rng"]), self._rng, n * sizeof(rng_t))
        return out

    def set_state(self, state):
        """Restore ``get_state``'s dict (same scenario, agent and env counts), else ValueError."""
        cdef int64_t n = self.n_envs
        cdef int ne = self.spec.n_entities, A = self.spec.n_agents, C = self.spec.dim_c
        arrays = {}
        for key, dtype, shape in (("pos", np.float64, (n, ne, 2)), ("vel", np.float64, (n, ne, 2)),
                                  ("comm", np.float64, (n, A, C)), ("goal", np.int64, (n,)),
                                  ("steps", np.int64, (n,)), ("rng", np.int64, (n, 4))):
            if key not in state:
                raise ValueError(f"MPE state lacks {key!r}; pass a dict from get_state()")
            a = np.ascontiguousarray(np.asarray(state[key]), dtype=dtype)
            if a.shape != shape:
                raise ValueError(f"MPE state {key!r} has shape {a.shape}, expected {shape} for {n} envs "
                                 f"of {_SCENARIOS[self.spec.kind]} with {A} agents")
            arrays[key] = a
        if (arrays["goal"] < 0).any() or (arrays["goal"] >= self.spec.n_landmarks).any():
            raise ValueError("MPE state 'goal' holds an index outside the landmarks")
        memcpy(self._pos, cnp.PyArray_DATA(arrays["pos"]), n * ne * 2 * sizeof(float64_t))
        memcpy(self._vel, cnp.PyArray_DATA(arrays["vel"]), n * ne * 2 * sizeof(float64_t))
        memcpy(self._comm, cnp.PyArray_DATA(arrays["comm"]), n * A * C * sizeof(float64_t))
        memcpy(self._goal, cnp.PyArray_DATA(arrays["goal"]), n * sizeof(int64_t))
        memcpy(self._steps, cnp.PyArray_DATA(arrays["steps"]), n * sizeof(int64_t))
        memcpy(self._rng, cnp.PyArray_DATA(arrays["rng"]), n * sizeof(rng_t))
        self._was_reset = bool(state.get("was_reset", True))


cdef object _as_array(object actions, object dtype, tuple shape, str what):
    try:
        arr = np.asarray(actions)
    except (TypeError, ValueError):
        raise TypeError(f"actions must be an array of {what}, got {type(actions).__name__}") from None
    kind = arr.dtype.kind
    if dtype is np.int64 and kind not in "iu":
        raise TypeError(f"actions must be {what}, got an array of dtype {arr.dtype}")
    if dtype is np.float32 and kind not in "iuf":
        raise TypeError(f"actions must be {what}, got an array of dtype {arr.dtype}")
    if arr.shape != shape:
        raise ValueError(f"actions have shape {arr.shape}, expected {shape} (n_envs, n_agents"
                         f"{', act_dim' if len(shape) == 3 else ''})")
    return np.ascontiguousarray(arr, dtype=dtype)


cdef object _finite(object x, tuple shape, str name):
    a = np.ascontiguousarray(np.asarray(x, dtype=np.float64))
    if a.shape != shape:
        raise ValueError(f"{name} has shape {a.shape}, expected {shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name} must be finite")
    return a


cdef void _step_all(const mpe_spec_t* spec, mpe_env_t* envs, int64_t n, const int64_t* pd,
                    const float32_t* pc, float32_t* po, float32_t* ps, float32_t* pr, bool_t* pt,
                    float32_t* pfo, float32_t* pfs) noexcept nogil:
    """prange over envs (independent: each has its own world, scratch and rng)."""
    cdef int64_t i
    cdef int64_t A = spec.n_agents, od = A * spec.obs_dim, sd = spec.state_dim, K = spec.act_dim
    if _num_threads > 1 and n >= PARALLEL_MIN_ENVS:
        for i in prange(n, schedule="static", num_threads=_num_threads):
            _step_one(spec, &envs[i], (pd + i * A) if pd != NULL else NULL,
                      (pc + i * A * K) if pc != NULL else NULL, po + i * od, ps + i * sd,
                      pr + i * A, pt + i, pfo + i * od, pfs + i * sd)
    else:
        for i in range(n):
            _step_one(spec, &envs[i], (pd + i * A) if pd != NULL else NULL,
                      (pc + i * A * K) if pc != NULL else NULL, po + i * od, ps + i * sd,
                      pr + i * A, pt + i, pfo + i * od, pfs + i * sd)
