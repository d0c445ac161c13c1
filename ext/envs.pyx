# Native classic-control envs: a single-env core and a vector-env core over envs_core.pxd.
# The public classes (rlox.CartPole, rlox.VecEnv, ...) subclass these in rlox/envs.py.
from _checks cimport is_native, positive_int, real_array
cimport numpy as cnp
from cython.parallel cimport prange
from libc.math cimport isnan
from libc.stdlib cimport malloc, free
from libc.string cimport memcpy
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from _types cimport float64_t, float32_t, int64_t, uint64_t, bool_t, intp_t
from envs_core cimport (env_t, env_init, env_reset, env_step, env_obs_f32, env_obs_dim,
                        env_n_actions, ENV_CARTPOLE, ENV_PENDULUM, ENV_MOUNTAINCAR,
                        ENV_MOUNTAINCAR_CONT, ENV_ACROBOT, ENV_N_KINDS)
import numpy as np

include "_threads.pxi"


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + ts.tv_nsec * 1e-9

cnp.import_array()

KIND_CARTPOLE = ENV_CARTPOLE
KIND_PENDULUM = ENV_PENDULUM
KIND_MOUNTAINCAR = ENV_MOUNTAINCAR
KIND_MOUNTAINCAR_CONT = ENV_MOUNTAINCAR_CONT
KIND_ACROBOT = ENV_ACROBOT

_NAMES = ("CartPole-v1", "Pendulum-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Acrobot-v1")
_STATE_DIM = (4, 2, 2, 2, 4)
# Per-env step cost in CartPole units: below PARALLEL_WORK total, a serial loop beats fork/join.
_COST = (1, 2, 1, 2, 12)
cdef int64_t PARALLEL_WORK = 192
_U64 = 1 << 64


cdef uint64_t _check_seed(object seed, str name, int64_t count) except? 0:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name} must be an int in [0, 2**64), got {seed!r} ({type(seed).__name__})")
    seed = int(seed)
    if seed < 0 or seed + count > _U64:
        raise ValueError(f"{name} = {seed} is out of range; expected an int in [0, 2**64 - {count}]")
    return <uint64_t>seed


cdef int _check_max_steps(object max_episode_steps) except -1:
    if isinstance(max_episode_steps, bool) or not isinstance(max_episode_steps, (int, np.integer)):
        raise TypeError(f"max_episode_steps must be an int >= 1, got {max_episode_steps!r}")
    if max_episode_steps < 1:
        raise ValueError(f"max_episode_steps must be >= 1, got {max_episode_steps}")
    return 0


cdef void _set_params(env_t* e, float64_t g, bint book) noexcept nogil:
    if e.kind == ENV_PENDULUM:
        e.s.pendulum.g = g
    elif e.kind == ENV_ACROBOT:
        e.s.acrobot.book = book


cdef class NativeEnv:
    """One native env (see rlox.envs for the public classes). Call reset() before step()."""
    cdef env_t env
    cdef readonly int kind
    cdef readonly int obs_dim
    cdef readonly int n_actions
    cdef bint _was_reset

    def __init__(self, int kind, seed, max_episode_steps, float64_t g=10.0, bint book=True):
        if kind < 0 or kind >= ENV_N_KINDS:
            raise ValueError(f"unknown env kind {kind}")
        _check_max_steps(max_episode_steps)
        self.kind = kind
        self.obs_dim = env_obs_dim(kind)
        self.n_actions = env_n_actions(kind)
        env_init(&self.env, kind, _check_seed(seed, "seed", 1), max_episode_steps)
        _set_params(&self.env, g, book)
        self._was_reset = False

    def reset(self, seed=None):
        """Start an episode (re-seeding the env's stream first when ``seed`` is given) -> obs [obs_dim] float32."""
        if seed is not None:
            env_init(&self.env, self.kind, _check_seed(seed, "seed", 1), self._max_steps())
            _set_params(&self.env, self._g(), self._book())
        env_reset(&self.env)
        self._was_reset = True
        return self._obs()

    cdef int64_t _max_steps(self):
        return self.env.s.cartpole.max_steps if self.kind == ENV_CARTPOLE else (
            self.env.s.pendulum.max_steps if self.kind == ENV_PENDULUM else (
                self.env.s.mountaincar.max_steps if self.kind == ENV_MOUNTAINCAR else (
                    self.env.s.mountaincar_cont.max_steps if self.kind == ENV_MOUNTAINCAR_CONT
                    else self.env.s.acrobot.max_steps)))

    cdef float64_t _g(self):
        return self.env.s.pendulum.g if self.kind == ENV_PENDULUM else 10.0

    cdef bint _book(self):
        return self.env.s.acrobot.book if self.kind == ENV_ACROBOT else True

    cdef object _obs(self):
        cdef cnp.npy_intp dims[1]
        dims[0] = self.obs_dim
        out = cnp.PyArray_EMPTY(1, dims, cnp.NPY_FLOAT32, 0)
        env_obs_f32(&self.env, <float32_t*>cnp.PyArray_DATA(out))
        return out

    def step(self, action):
        """Apply ``action`` -> dict(obs [obs_dim] float32, reward float, terminated bool, truncated bool)."""
        cdef int64_t a = 0
        cdef float64_t u = 0.0
        cdef float64_t reward
        cdef bint term, trunc
        if not self._was_reset:
            raise RuntimeError(f"{_NAMES[self.kind]}: call reset() before step()")
        if self.n_actions > 0:
            if isinstance(action, np.ndarray) and action.size == 1 and action.dtype.kind in "iu":
                action = action.reshape(()).item()
            if isinstance(action, bool) or not isinstance(action, (int, np.integer)):
                raise TypeError(f"action for {_NAMES[self.kind]} must be an int in "
                                f"[0, {self.n_actions}), got {action!r} ({type(action).__name__})")
            if action < 0 or action >= self.n_actions:
                raise ValueError(f"action {action} is out of range for {_NAMES[self.kind]}; "
                                 f"expected an int in [0, {self.n_actions})")
            a = action
        else:
            try:
                arr = np.asarray(action, dtype=np.float64)
            except (TypeError, ValueError):
                raise TypeError(f"action for {_NAMES[self.kind]} must be a float or shape (1,) "
                                f"array, got {action!r}") from None
            if arr.size != 1:
                raise ValueError(f"action for {_NAMES[self.kind]} has shape {arr.shape}; expected (1,)")
            u = arr.reshape(-1)[0]
            if isnan(u):
                raise ValueError(f"action for {_NAMES[self.kind]} is NaN; expected a finite float")
        env_step(&self.env, a, u, NULL, &reward, &term, &trunc)
        return {"obs": self._obs(), "reward": reward, "terminated": bool(term),
                "truncated": bool(trunc)}

    @property
    def state(self):
        """The float64 physical state (what gymnasium's ``env.unwrapped.state`` holds)."""
        cdef int k = self.kind
        if k == ENV_CARTPOLE:
            c = &self.env.s.cartpole
            return np.array([c.x, c.x_dot, c.theta, c.theta_dot])
        if k == ENV_PENDULUM:
            return np.array([self.env.s.pendulum.th, self.env.s.pendulum.thdot])
        if k == ENV_MOUNTAINCAR:
            return np.array([self.env.s.mountaincar.position, self.env.s.mountaincar.velocity])
        if k == ENV_MOUNTAINCAR_CONT:
            return np.array([self.env.s.mountaincar_cont.position,
                             self.env.s.mountaincar_cont.velocity])
        a = &self.env.s.acrobot
        return np.array([a.theta1, a.theta2, a.dtheta1, a.dtheta2])

    @state.setter
    def state(self, value):
        cdef int k = self.kind
        s = np.asarray(value, dtype=np.float64)
        if s.shape != (_STATE_DIM[k],):
            raise ValueError(f"state for {_NAMES[k]} has shape {s.shape}; expected ({_STATE_DIM[k]},)")
        if not np.isfinite(s).all():
            raise ValueError(f"state for {_NAMES[k]} holds NaN or infinite values: {s}")
        if k == ENV_CARTPOLE:
            self.env.s.cartpole.x, self.env.s.cartpole.x_dot = s[0], s[1]
            self.env.s.cartpole.theta, self.env.s.cartpole.theta_dot = s[2], s[3]
            self.env.s.cartpole.steps_beyond = -1
        elif k == ENV_PENDULUM:
            self.env.s.pendulum.th, self.env.s.pendulum.thdot = s[0], s[1]
        elif k == ENV_MOUNTAINCAR:
            self.env.s.mountaincar.position, self.env.s.mountaincar.velocity = s[0], s[1]
        elif k == ENV_MOUNTAINCAR_CONT:
            self.env.s.mountaincar_cont.position = s[0]
            self.env.s.mountaincar_cont.velocity = s[1]
            self.env.s.mountaincar_cont.f32_state = False
        else:
            self.env.s.acrobot.theta1, self.env.s.acrobot.theta2 = s[0], s[1]
            self.env.s.acrobot.dtheta1, self.env.s.acrobot.dtheta2 = s[2], s[3]
        self._was_reset = True

    @property
    def elapsed_steps(self):
        """Steps since the last reset (the TimeLimit counter)."""
        return self.env.s.cartpole.elapsed if self.kind == ENV_CARTPOLE else (
            self.env.s.pendulum.elapsed if self.kind == ENV_PENDULUM else (
                self.env.s.mountaincar.elapsed if self.kind == ENV_MOUNTAINCAR else (
                    self.env.s.mountaincar_cont.elapsed if self.kind == ENV_MOUNTAINCAR_CONT
                    else self.env.s.acrobot.elapsed)))

    @property
    def max_episode_steps(self):
        return self._max_steps()


cdef inline void _step_one(env_t* e, int64_t a, float64_t u, float32_t* obs, float32_t* tobs,
                    float64_t* rew, bool_t* term, bool_t* trunc, int od) noexcept nogil:
    """Step one env with automatic reset; tobs gets the pre-reset observation."""
    cdef bint te, tr
    env_step(e, a, u, tobs, rew, &te, &tr)
    term[0] = te
    trunc[0] = tr
    if te or tr:
        env_reset(e)
        env_obs_f32(e, obs)
    else:
        memcpy(obs, tobs, od * sizeof(float32_t))


cdef void _step_all(env_t* envs, int64_t n, int od, const int64_t* acts, const float32_t* uacts,
                    float32_t* obs, float32_t* tobs, float64_t* rew, bool_t* term, bool_t* trunc,
                    bint parallel) noexcept nogil:
    cdef int64_t i
    if parallel:
        if acts != NULL:
            for i in prange(n, schedule="static", num_threads=_num_threads):
                _step_one(&envs[i], acts[i], 0.0, obs + i * od, tobs + i * od, rew + i,
                          term + i, trunc + i, od)
        else:
            for i in prange(n, schedule="static", num_threads=_num_threads):
                _step_one(&envs[i], 0, uacts[i], obs + i * od, tobs + i * od, rew + i,
                          term + i, trunc + i, od)
    elif acts != NULL:
        for i in range(n):
            _step_one(&envs[i], acts[i], 0.0, obs + i * od, tobs + i * od, rew + i,
                      term + i, trunc + i, od)
    else:
        for i in range(n):
            _step_one(&envs[i], 0, uacts[i], obs + i * od, tobs + i * od, rew + i,
                      term + i, trunc + i, od)


cdef class VecCore:
    """n native envs of one kind stepped in one call (see rlox.VecEnv)."""
    cdef env_t* envs
    cdef readonly int64_t num_envs
    cdef readonly int kind
    cdef readonly int obs_dim
    cdef readonly int n_actions
    cdef int64_t max_steps
    cdef float64_t g
    cdef bint book
    cdef bint parallel                # enough work per step for the parallel path to be tried
    cdef int64_t _calls               # parallel-eligible steps so far
    cdef double _t_par, _t_ser        # running mean seconds per step of each path (0: unknown)
    cdef int64_t _probe_every         # steps between probes of the path not in use
    cdef bint _use_par                # the path in use
    cdef bint _reuse
    cdef bint _was_reset
    cdef object _bufs

    def __cinit__(self):
        self.envs = NULL

    def __init__(self, int kind, n, seed, max_episode_steps, float64_t g=10.0, bint book=True,
                 bint reuse_buffers=False):
        positive_int(n, "n")
        if kind < 0 or kind >= ENV_N_KINDS:
            raise ValueError(f"unknown env kind {kind}")
        _check_max_steps(max_episode_steps)
        self.num_envs = n
        self.kind = kind
        self.obs_dim = env_obs_dim(kind)
        self.n_actions = env_n_actions(kind)
        self.max_steps = max_episode_steps
        self.g = g
        self.book = book
        self.parallel = n * _COST[kind] >= PARALLEL_WORK
        self._calls = 0
        self._t_par = 0.0
        self._t_ser = 0.0
        self._probe_every = 16
        self._use_par = True
        self._reuse = reuse_buffers
        self.envs = <env_t*>malloc(n * sizeof(env_t))
        if self.envs == NULL:
            raise MemoryError()
        self._seed_all(_check_seed(seed, "seed", n))
        self._was_reset = False
        self._bufs = None

    def __dealloc__(self):
        free(self.envs)
        self.envs = NULL

    cdef void _seed_all(self, uint64_t s):
        cdef int64_t i
        for i in range(self.num_envs):
            env_init(&self.envs[i], self.kind, s + <uint64_t>i, self.max_steps)
            _set_params(&self.envs[i], self.g, self.book)

    def reset_all(self, seed=None):
        """Reset every env (env i re-seeded with seed + i when ``seed`` is given) -> obs [n, obs_dim] float32."""
        cdef int64_t i
        if self.envs == NULL:
            raise RuntimeError("this VecEnv is closed")
        if seed is not None:
            self._seed_all(_check_seed(seed, "seed", self.num_envs))
        cdef cnp.npy_intp dims[2]
        dims[0] = self.num_envs
        dims[1] = self.obs_dim
        out = cnp.PyArray_EMPTY(2, dims, cnp.NPY_FLOAT32, 0)
        cdef float32_t* o = <float32_t*>cnp.PyArray_DATA(out)
        for i in range(self.num_envs):
            env_reset(&self.envs[i])
            env_obs_f32(&self.envs[i], o + i * self.obs_dim)
        self._was_reset = True
        return out

    cdef tuple _outputs(self):
        cdef cnp.npy_intp d2[2]
        cdef cnp.npy_intp d1[1]
        if self._reuse and self._bufs is not None:
            return self._bufs
        d2[0] = self.num_envs
        d2[1] = self.obs_dim
        d1[0] = self.num_envs
        bufs = (cnp.PyArray_EMPTY(2, d2, cnp.NPY_FLOAT32, 0),
                cnp.PyArray_EMPTY(2, d2, cnp.NPY_FLOAT32, 0),
                cnp.PyArray_EMPTY(1, d1, cnp.NPY_FLOAT64, 0),
                cnp.PyArray_EMPTY(1, d1, cnp.NPY_BOOL, 0),
                cnp.PyArray_EMPTY(1, d1, cnp.NPY_BOOL, 0))
        if self._reuse:
            self._bufs = bufs
        return bufs

    cdef object _discrete(self, actions):
        cdef cnp.ndarray arr
        cdef const int64_t* p
        cdef int64_t i, n = self.num_envs, na = self.n_actions, bad = -1
        if type(actions) is np.ndarray:
            arr = <cnp.ndarray>actions
        else:
            try:
                arr = np.asarray(actions)
            except (TypeError, ValueError):
                raise TypeError(f"actions for {_NAMES[self.kind]} must be a list or array of ints, "
                                f"got {type(actions).__name__}") from None
        if arr.dtype.kind not in "iu":
            raise TypeError(f"actions for {_NAMES[self.kind]} must be integers in [0, {na}), got "
                            f"an array of dtype {arr.dtype}")
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr.reshape(-1)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise ValueError(f"actions has shape {np.shape(arr)} but the VecEnv has {n} envs of "
                             f"{_NAMES[self.kind]}; expected ({n},)")
        if not is_native(arr, cnp.NPY_INT64):
            if arr.dtype.kind == "u" and arr.size and arr.max() > 2**62:
                raise ValueError(f"actions hold {arr.max()}, out of range [0, {na})")
            arr = real_array(arr, "actions", cnp.NPY_INT64)
        p = <const int64_t*>cnp.PyArray_DATA(arr)
        for i in range(n):
            if p[i] < 0 or p[i] >= na:
                bad = i
                break
        if bad >= 0:
            raise ValueError(f"actions[{bad}] = {p[bad]} is out of range for {_NAMES[self.kind]}; "
                             f"expected an int in [0, {na})")
        return arr

    cdef object _continuous(self, actions):
        cdef cnp.ndarray arr
        cdef const float32_t* p
        cdef int64_t i, n = self.num_envs, bad = -1
        try:
            arr = real_array(actions, "actions", cnp.NPY_FLOAT)
        except (TypeError, ValueError):
            raise TypeError(f"actions for {_NAMES[self.kind]} must be floats, shape ({n},) or "
                            f"({n}, 1), got {type(actions).__name__}") from None
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr.reshape(-1)
        if arr.ndim != 1 or arr.shape[0] != n:
            raise ValueError(f"actions has shape {np.shape(arr)} but the VecEnv has {n} envs of "
                             f"{_NAMES[self.kind]}; expected ({n},) or ({n}, 1)")
        p = <const float32_t*>cnp.PyArray_DATA(arr)
        for i in range(n):
            if isnan(p[i]):
                bad = i
                break
        if bad >= 0:
            raise ValueError(f"actions[{bad}] is NaN for {_NAMES[self.kind]}; expected finite floats")
        return arr

    def step_all(self, actions):
        """Step every env (finished ones reset themselves) -> dict of obs, rewards, terminated,
        truncated, terminal_obs (see rlox.VecEnv)."""
        if self.envs == NULL:
            raise RuntimeError("this VecEnv is closed")
        if not self._was_reset:
            raise RuntimeError(f"VecEnv({_NAMES[self.kind]}): call reset_all() before step_all()")
        cdef const int64_t* acts = NULL
        cdef const float32_t* uacts = NULL
        if self.n_actions > 0:
            arr = self._discrete(actions)
            acts = <const int64_t*>cnp.PyArray_DATA(arr)
        else:
            arr = self._continuous(actions)
            uacts = <const float32_t*>cnp.PyArray_DATA(arr)
        obs, tobs, rew, term, trunc = self._outputs()
        cdef float32_t* po = <float32_t*>cnp.PyArray_DATA(obs)
        cdef float32_t* pt = <float32_t*>cnp.PyArray_DATA(tobs)
        cdef float64_t* pr = <float64_t*>cnp.PyArray_DATA(rew)
        cdef bool_t* pte = <bool_t*>cnp.PyArray_DATA(term)
        cdef bool_t* ptr = <bool_t*>cnp.PyArray_DATA(trunc)
        cdef bint par, probe
        cdef double t0
        if self.parallel and _num_threads > 1:
            # Serial or parallel, whichever is measured faster. The other path is timed now
            # and then (less and less often while it keeps losing): on a machine whose cores
            # are busy with other work, a parallel region can cost 100x the serial loop.
            self._calls += 1
            probe = self._calls <= 2 or self._calls % self._probe_every == 0
            par = self._use_par
            if probe:
                par = (not self._use_par) if self._calls > 2 else (self._calls == 1)
                t0 = _now()
            with nogil:
                _step_all(self.envs, self.num_envs, self.obs_dim, acts, uacts, po, pt, pr, pte,
                          ptr, par)
            if probe:
                self._record(par, _now() - t0)
        else:
            _step_all(self.envs, self.num_envs, self.obs_dim, acts, uacts, po, pt, pr, pte, ptr,
                      False)
        return {"obs": obs, "rewards": rew, "terminated": term, "truncated": trunc,
                "terminal_obs": tobs}

    cdef void _record(self, bint par, double dt):
        """Fold one timed step into the path's running mean, then pick the faster path."""
        if par:
            self._t_par = dt if self._t_par == 0.0 else 0.7 * self._t_par + 0.3 * dt
        else:
            self._t_ser = dt if self._t_ser == 0.0 else 0.7 * self._t_ser + 0.3 * dt
        if self._t_par == 0.0 or self._t_ser == 0.0:
            return
        cdef bint faster_par = self._t_par < self._t_ser
        if faster_par == self._use_par:
            # The path in use won again: probe the other one less often (up to every 4096 steps).
            self._probe_every = min(self._probe_every * 2, 4096)
        else:
            self._use_par = faster_par
            self._probe_every = 16

    @property
    def parallel_stepping(self):
        """Whether steps currently run on the OpenMP path (chosen by measurement)."""
        return bool(self.parallel and _num_threads > 1 and self._use_par)

    def get_state(self):
        """Snapshot of every env (physics, step counters, RNG streams) as a uint8 array.

        ``set_state`` restores it exactly, so a run can be checkpointed and resumed step for
        step. The bytes are this build's struct layout: restore them with the same rlox build.
        """
        if self.envs == NULL:
            raise RuntimeError("this VecEnv is closed")
        cdef Py_ssize_t nbytes = self.num_envs * sizeof(env_t)
        out = np.empty(nbytes + 16, dtype=np.uint8)
        cdef unsigned char[::1] ov = out
        header = np.array([self.kind, self.num_envs, <int64_t>sizeof(env_t), self._was_reset],
                          dtype=np.int32).view(np.uint8)
        out[:16] = header
        memcpy(&ov[16], <void*>self.envs, nbytes)
        return out

    def set_state(self, state):
        """Restore a ``get_state`` snapshot (same env kind, count and build), else ValueError."""
        if self.envs == NULL:
            raise RuntimeError("this VecEnv is closed")
        arr = np.ascontiguousarray(np.asarray(state), dtype=np.uint8).reshape(-1)
        cdef Py_ssize_t nbytes = self.num_envs * sizeof(env_t)
        if arr.shape[0] != nbytes + 16:
            raise ValueError(f"state has {arr.shape[0]} bytes, expected {nbytes + 16} for "
                             f"{self.num_envs} envs of {_NAMES[self.kind]}")
        kind, n, size, was_reset = (int(v) for v in arr[:16].view(np.int32))
        if kind != self.kind or n != self.num_envs or size != <int64_t>sizeof(env_t):
            raise ValueError(f"state is of {n} envs of kind {kind} (struct size {size}); this VecEnv "
                             f"has {self.num_envs} envs of {_NAMES[self.kind]} (struct size "
                             f"{sizeof(env_t)}); it was saved by another env or rlox build")
        cdef const unsigned char[::1] av = arr
        memcpy(<void*>self.envs, &av[16], nbytes)
        self._was_reset = bool(was_reset)

    def close(self):
        """Free the envs; later calls raise."""
        free(self.envs)
        self.envs = NULL
