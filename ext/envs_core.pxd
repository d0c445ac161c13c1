# The native classic-control environments as plain C structs and `noexcept nogil` inline
# functions, so any kernel can `from envs_core cimport ...` and step envs with no Python.
#
# Each env reproduces gymnasium 1.x (classic_control) operation by operation, in the same
# order and precision (gymnasium mixes float32 and float64; the comments say where), plus the
# TimeLimit wrapper of `gymnasium.make` (`elapsed` / `max_steps`: truncated once
# elapsed >= max_steps, also on a terminating step, exactly as TimeLimit).
# Reset draws come from the env's own rng_t (xoshiro256**), not NumPy's PCG64: the same seed
# gives the same episode in rlox, not the same as gymnasium's.
#
# Generic entry points (dispatch on env_t.kind): env_init, env_reset, env_obs_f32/_f64,
# env_step. Continuous actions are rounded to float32 (the action space's dtype, what
# gymnasium receives) and clipped as gymnasium does; callers must pass finite-or-infinite,
# never NaN, actions, and discrete actions in [0, n_actions).
from libc.math cimport sin, cos, fmod, M_PI
from _types cimport float64_t, float32_t, int64_t, uint64_t
from _rng cimport rng_t, rng_seed, rng_uniform_range

cdef enum:
    ENV_CARTPOLE = 0              # CartPole-v1
    ENV_PENDULUM = 1              # Pendulum-v1
    ENV_MOUNTAINCAR = 2           # MountainCar-v0
    ENV_MOUNTAINCAR_CONT = 3      # MountainCarContinuous-v0
    ENV_ACROBOT = 4               # Acrobot-v1
    ENV_N_KINDS = 5
    ENV_MAX_OBS_DIM = 6           # the widest observation (Acrobot)


# ----------------------------------------------------------------------------- CartPole-v1
cdef struct cartpole_t:
    float64_t x                   # cart position [m]; terminates outside [-2.4, 2.4]
    float64_t x_dot               # cart velocity [m/s]
    float64_t theta               # pole angle [rad]; terminates outside +-12 degrees
    float64_t theta_dot           # pole angular velocity [rad/s]
    int64_t steps_beyond          # -1 until terminated; then steps taken after it (reward 0)
    int64_t elapsed               # steps since the last reset
    int64_t max_steps             # time limit (500)
    rng_t rng                     # this env's random stream (reset draws)

cdef inline void cartpole_reset(cartpole_t* e) noexcept nogil:
    """State ~ U(-0.05, 0.05)^4, as gymnasium's reset."""
    e.x = rng_uniform_range(&e.rng, -0.05, 0.05)
    e.x_dot = rng_uniform_range(&e.rng, -0.05, 0.05)
    e.theta = rng_uniform_range(&e.rng, -0.05, 0.05)
    e.theta_dot = rng_uniform_range(&e.rng, -0.05, 0.05)
    e.steps_beyond = -1
    e.elapsed = 0

cdef inline void cartpole_obs(const cartpole_t* e, float32_t* out) noexcept nogil:
    """OUT out[4] = (x, x_dot, theta, theta_dot) as float32."""
    out[0] = <float32_t>e.x
    out[1] = <float32_t>e.x_dot
    out[2] = <float32_t>e.theta
    out[3] = <float32_t>e.theta_dot

cdef inline void cartpole_step(cartpole_t* e, int64_t action, float32_t* obs_out,
                               float64_t* reward, bint* terminated, bint* truncated) noexcept nogil:
    """Euler step of gymnasium's CartPoleEnv (action 1 pushes right, 0 left); obs_out may be NULL."""
    cdef float64_t force = 10.0 if action == 1 else -10.0
    cdef float64_t costheta = cos(e.theta)
    cdef float64_t sintheta = sin(e.theta)
    cdef float64_t total_mass = 0.1 + 1.0
    cdef float64_t temp = (force + 0.05 * (e.theta_dot * e.theta_dot) * sintheta) / total_mass
    cdef float64_t thetaacc = (9.8 * sintheta - costheta * temp) / (
        0.5 * (4.0 / 3.0 - 0.1 * (costheta * costheta) / total_mass))
    cdef float64_t xacc = temp - 0.05 * thetaacc * costheta / total_mass
    cdef float64_t thr = 12 * 2 * M_PI / 360
    e.x = e.x + 0.02 * e.x_dot
    e.x_dot = e.x_dot + 0.02 * xacc
    e.theta = e.theta + 0.02 * e.theta_dot
    e.theta_dot = e.theta_dot + 0.02 * thetaacc
    cdef bint term = e.x < -2.4 or e.x > 2.4 or e.theta < -thr or e.theta > thr
    if not term:
        reward[0] = 1.0
    elif e.steps_beyond < 0:
        e.steps_beyond = 0
        reward[0] = 1.0
    else:
        e.steps_beyond += 1
        reward[0] = 0.0
    e.elapsed += 1
    terminated[0] = term
    truncated[0] = e.elapsed >= e.max_steps
    if obs_out != NULL:
        cartpole_obs(e, obs_out)


# ----------------------------------------------------------------------------- Pendulum-v1
cdef struct pendulum_t:
    float64_t th                  # angle [rad] (0 = upright), not wrapped
    float64_t thdot               # angular velocity [rad/s], clipped to [-8, 8]
    float64_t g                   # gravity (gymnasium's `g`, default 10.0)
    int64_t elapsed               # steps since the last reset
    int64_t max_steps             # time limit (200)
    rng_t rng                     # this env's random stream

cdef inline float64_t angle_normalize(float64_t x) noexcept nogil:
    """((x + pi) % (2 pi)) - pi with Python/NumPy's floored modulo."""
    cdef float64_t two_pi = 2 * M_PI
    cdef float64_t m = fmod(x + M_PI, two_pi)
    if m != 0.0 and m < 0.0:
        m += two_pi
    elif m == 0.0:
        m = 0.0
    return m - M_PI

cdef inline void pendulum_reset(pendulum_t* e) noexcept nogil:
    """th ~ U(-pi, pi), thdot ~ U(-1, 1)."""
    e.th = rng_uniform_range(&e.rng, -M_PI, M_PI)
    e.thdot = rng_uniform_range(&e.rng, -1.0, 1.0)
    e.elapsed = 0

cdef inline void pendulum_obs(const pendulum_t* e, float32_t* out) noexcept nogil:
    """OUT out[3] = (cos th, sin th, thdot) as float32."""
    out[0] = <float32_t>cos(e.th)
    out[1] = <float32_t>sin(e.th)
    out[2] = <float32_t>e.thdot

cdef inline void pendulum_step(pendulum_t* e, float64_t action, float32_t* obs_out,
                               float64_t* reward, bint* terminated, bint* truncated) noexcept nogil:
    """Torque action (float32, clipped to [-2, 2]); reward = -(angle^2 + 0.1 thdot^2 + 0.001 u^2)."""
    cdef float32_t u = <float32_t>action
    if u < -2.0:
        u = -2.0
    elif u > 2.0:
        u = 2.0
    cdef float64_t an = angle_normalize(e.th)
    # 0.001 * (u ** 2) is float32 arithmetic in gymnasium (u is a float32 scalar).
    cdef float32_t ucost = <float32_t>0.001 * (u * u)
    cdef float64_t costs = an * an + 0.1 * (e.thdot * e.thdot) + <float64_t>ucost
    cdef float32_t torque = <float32_t>3.0 * u          # 3 / (m l^2) * u, float32 as well
    cdef float64_t newthdot = e.thdot + (3 * e.g / (2 * 1.0) * sin(e.th) + <float64_t>torque) * 0.05
    if newthdot < -8.0:
        newthdot = -8.0
    elif newthdot > 8.0:
        newthdot = 8.0
    e.th = e.th + newthdot * 0.05
    e.thdot = newthdot
    reward[0] = -costs
    e.elapsed += 1
    terminated[0] = False
    truncated[0] = e.elapsed >= e.max_steps
    if obs_out != NULL:
        pendulum_obs(e, obs_out)


# ----------------------------------------------------------------------------- MountainCar-v0
cdef struct mountaincar_t:
    float64_t position            # [-1.2, 0.6]; goal at 0.5
    float64_t velocity            # [-0.07, 0.07]
    int64_t elapsed               # steps since the last reset
    int64_t max_steps             # time limit (200)
    rng_t rng                     # this env's random stream

cdef inline void mountaincar_reset(mountaincar_t* e) noexcept nogil:
    """position ~ U(-0.6, -0.4), velocity 0."""
    e.position = rng_uniform_range(&e.rng, -0.6, -0.4)
    e.velocity = 0.0
    e.elapsed = 0

cdef inline void mountaincar_obs(const mountaincar_t* e, float32_t* out) noexcept nogil:
    """OUT out[2] = (position, velocity) as float32."""
    out[0] = <float32_t>e.position
    out[1] = <float32_t>e.velocity

cdef inline void mountaincar_step(mountaincar_t* e, int64_t action, float32_t* obs_out,
                                  float64_t* reward, bint* terminated, bint* truncated) noexcept nogil:
    """Action 0 push left, 1 none, 2 push right; reward -1 per step (float64 throughout)."""
    cdef float64_t v = e.velocity + ((action - 1) * 0.001 + cos(3 * e.position) * (-0.0025))
    if v < -0.07:
        v = -0.07
    elif v > 0.07:
        v = 0.07
    cdef float64_t p = e.position + v
    if p < -1.2:
        p = -1.2
    elif p > 0.6:
        p = 0.6
    if p == -1.2 and v < 0:
        v = 0.0
    e.position = p
    e.velocity = v
    reward[0] = -1.0
    e.elapsed += 1
    terminated[0] = p >= 0.5 and v >= 0.0
    truncated[0] = e.elapsed >= e.max_steps
    if obs_out != NULL:
        mountaincar_obs(e, obs_out)


# ----------------------------------------------------------------------------- MountainCarContinuous-v0
cdef struct mountaincar_cont_t:
    float64_t position            # [-1.2, 0.6]; goal at 0.45
    float64_t velocity            # [-0.07, 0.07]
    bint f32_state                # 1 once stepped: gymnasium then keeps the state as float32
    int64_t elapsed               # steps since the last reset
    int64_t max_steps             # time limit (999)
    rng_t rng                     # this env's random stream

cdef inline void mountaincar_cont_reset(mountaincar_cont_t* e) noexcept nogil:
    """position ~ U(-0.6, -0.4), velocity 0 (a float64 state, as gymnasium's reset)."""
    e.position = rng_uniform_range(&e.rng, -0.6, -0.4)
    e.velocity = 0.0
    e.f32_state = False
    e.elapsed = 0

cdef inline void mountaincar_cont_obs(const mountaincar_cont_t* e, float32_t* out) noexcept nogil:
    """OUT out[2] = (position, velocity) as float32."""
    out[0] = <float32_t>e.position
    out[1] = <float32_t>e.velocity

cdef inline void mountaincar_cont_step(mountaincar_cont_t* e, float64_t action, float32_t* obs_out,
                                       float64_t* reward, bint* terminated,
                                       bint* truncated) noexcept nogil:
    """Force action in [-1, 1]; reward 100 at the goal minus 0.1 a^2 (unclipped a).

    gymnasium computes with a float32 action and, after the first step, a float32 state;
    NumPy 2 casts Python floats to float32 in those operations. This follows it exactly.
    """
    cdef float32_t a = <float32_t>action
    cdef bint clipped = (<float32_t>-1.0 > a) or (<float32_t>1.0 < a)
    cdef float64_t c, rhs_d, p, v
    cdef float32_t rhs_f, p32, v32
    if e.f32_state:
        c = 0.0025 * cos(<float64_t>(<float32_t>3.0 * <float32_t>e.position))
    else:
        c = 0.0025 * cos(3 * e.position)
    if clipped:
        rhs_d = (-1.0 if a < 0 else 1.0) * 0.0015 - c      # a Python float
    else:
        rhs_f = a * <float32_t>0.0015 - <float32_t>c       # float32 arithmetic
        rhs_d = <float64_t>rhs_f
    if e.f32_state:
        v32 = <float32_t>e.velocity + (<float32_t>rhs_d)
        if v32 > <float32_t>0.07:
            v32 = <float32_t>0.07
        if v32 < <float32_t>-0.07:
            v32 = <float32_t>-0.07
        p32 = <float32_t>e.position + v32
        if p32 > <float32_t>0.6:
            p32 = <float32_t>0.6
        if p32 < <float32_t>-1.2:
            p32 = <float32_t>-1.2
        if p32 == <float32_t>-1.2 and v32 < 0:
            v32 = 0
        terminated[0] = p32 >= <float32_t>0.45 and v32 >= 0
        p = p32
        v = v32
    else:
        v = e.velocity + rhs_d
        if v > 0.07:
            v = 0.07
        if v < -0.07:
            v = -0.07
        p = e.position + v
        if p > 0.6:
            p = 0.6
        if p < -1.2:
            p = -1.2
        if p == -1.2 and v < 0:
            v = 0.0
        terminated[0] = p >= 0.45 and v >= 0.0
    e.position = <float32_t>p
    e.velocity = <float32_t>v
    e.f32_state = True
    reward[0] = (100.0 if terminated[0] else 0.0) - (<float64_t>a * <float64_t>a) * 0.1
    e.elapsed += 1
    truncated[0] = e.elapsed >= e.max_steps
    if obs_out != NULL:
        mountaincar_cont_obs(e, obs_out)


# ----------------------------------------------------------------------------- Acrobot-v1
cdef struct acrobot_t:
    float64_t theta1              # angle of link 1 [rad], wrapped to [-pi, pi]
    float64_t theta2              # angle of link 2 relative to link 1 [rad], wrapped
    float64_t dtheta1             # [-4 pi, 4 pi]
    float64_t dtheta2             # [-9 pi, 9 pi]
    bint book                     # 1: "book" dynamics (gymnasium's default); 0: "nips"
    int64_t elapsed               # steps since the last reset
    int64_t max_steps             # time limit (500)
    rng_t rng                     # this env's random stream

cdef inline void acrobot_reset(acrobot_t* e) noexcept nogil:
    """State ~ U(-0.1, 0.1)^4 rounded to float32 (gymnasium's `.astype(np.float32)`)."""
    e.theta1 = <float32_t>rng_uniform_range(&e.rng, -0.1, 0.1)
    e.theta2 = <float32_t>rng_uniform_range(&e.rng, -0.1, 0.1)
    e.dtheta1 = <float32_t>rng_uniform_range(&e.rng, -0.1, 0.1)
    e.dtheta2 = <float32_t>rng_uniform_range(&e.rng, -0.1, 0.1)
    e.elapsed = 0

cdef inline void acrobot_obs(const acrobot_t* e, float32_t* out) noexcept nogil:
    """OUT out[6] = (cos t1, sin t1, cos t2, sin t2, dt1, dt2) as float32."""
    out[0] = <float32_t>cos(e.theta1)
    out[1] = <float32_t>sin(e.theta1)
    out[2] = <float32_t>cos(e.theta2)
    out[3] = <float32_t>sin(e.theta2)
    out[4] = <float32_t>e.dtheta1
    out[5] = <float32_t>e.dtheta2

cdef inline void acrobot_dsdt(bint book, const float64_t* s, float64_t a,
                              float64_t* ds) noexcept nogil:
    """OUT ds[4] = d/dt (theta1, theta2, dtheta1, dtheta2) under torque a (gymnasium's _dsdt)."""
    cdef float64_t theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3]
    cdef float64_t d1 = 1.0 * 0.25 + 1.0 * (1.0 + 0.25 + 2 * 1.0 * 0.5 * cos(theta2)) + 1.0 + 1.0
    cdef float64_t d2 = 1.0 * (0.25 + 1.0 * 0.5 * cos(theta2)) + 1.0
    cdef float64_t phi2 = 1.0 * 0.5 * 9.8 * cos(theta1 + theta2 - M_PI / 2.0)
    cdef float64_t phi1 = (-1.0 * 1.0 * 0.5 * (dtheta2 * dtheta2) * sin(theta2)
                           - 2 * 1.0 * 1.0 * 0.5 * dtheta2 * dtheta1 * sin(theta2)
                           + (1.0 * 0.5 + 1.0 * 1.0) * 9.8 * cos(theta1 - M_PI / 2)
                           + phi2)
    cdef float64_t ddtheta2
    if book:
        ddtheta2 = (a + d2 / d1 * phi1 - 1.0 * 1.0 * 0.5 * (dtheta1 * dtheta1) * sin(theta2)
                    - phi2) / (1.0 * 0.25 + 1.0 - (d2 * d2) / d1)
    else:
        ddtheta2 = (a + d2 / d1 * phi1 - phi2) / (1.0 * 0.25 + 1.0 - (d2 * d2) / d1)
    ds[0] = dtheta1
    ds[1] = dtheta2
    ds[2] = -(d2 * ddtheta2 + phi1) / d1
    ds[3] = ddtheta2

cdef inline float64_t acrobot_wrap(float64_t x) noexcept nogil:
    while x > M_PI:
        x = x - (M_PI - (-M_PI))
    while x < -M_PI:
        x = x + (M_PI - (-M_PI))
    return x

cdef inline float64_t acrobot_bound(float64_t x, float64_t m) noexcept nogil:
    """min(max(x, -m), m) with Python's min/max tie rules."""
    if -m > x:
        x = -m
    if m < x:
        x = m
    return x

cdef inline void acrobot_step(acrobot_t* e, int64_t action, float32_t* obs_out,
                              float64_t* reward, bint* terminated, bint* truncated) noexcept nogil:
    """Torque -1/0/+1 for action 0/1/2; one RK4 step of dt = 0.2; reward -1 until the goal."""
    cdef float64_t torque = <float64_t>(action - 1)
    cdef float64_t y0[4]
    cdef float64_t y[4]
    cdef float64_t k1[4]
    cdef float64_t k2[4]
    cdef float64_t k3[4]
    cdef float64_t k4[4]
    cdef int j
    cdef float64_t dt = 0.2 - 0, dt2 = dt / 2.0
    y0[0] = e.theta1; y0[1] = e.theta2; y0[2] = e.dtheta1; y0[3] = e.dtheta2
    acrobot_dsdt(e.book, y0, torque, k1)
    for j in range(4):
        y[j] = y0[j] + dt2 * k1[j]
    acrobot_dsdt(e.book, y, torque, k2)
    for j in range(4):
        y[j] = y0[j] + dt2 * k2[j]
    acrobot_dsdt(e.book, y, torque, k3)
    for j in range(4):
        y[j] = y0[j] + dt * k3[j]
    acrobot_dsdt(e.book, y, torque, k4)
    for j in range(4):
        y[j] = y0[j] + dt / 6.0 * (k1[j] + 2 * k2[j] + 2 * k3[j] + k4[j])
    e.theta1 = acrobot_wrap(y[0])
    e.theta2 = acrobot_wrap(y[1])
    e.dtheta1 = acrobot_bound(y[2], 4 * M_PI)
    e.dtheta2 = acrobot_bound(y[3], 9 * M_PI)
    cdef bint term = -cos(e.theta1) - cos(e.theta2 + e.theta1) > 1.0
    reward[0] = 0.0 if term else -1.0
    e.elapsed += 1
    terminated[0] = term
    truncated[0] = e.elapsed >= e.max_steps
    if obs_out != NULL:
        acrobot_obs(e, obs_out)


# ----------------------------------------------------------------------------- any env
cdef union env_state_u:
    cartpole_t cartpole
    pendulum_t pendulum
    mountaincar_t mountaincar
    mountaincar_cont_t mountaincar_cont
    acrobot_t acrobot

cdef struct env_t:
    int kind                      # ENV_CARTPOLE ... ENV_ACROBOT: which member of `s` is live
    env_state_u s                 # the env's state

cdef inline int env_obs_dim(int kind) noexcept nogil:
    if kind == ENV_CARTPOLE:
        return 4
    if kind == ENV_PENDULUM:
        return 3
    if kind == ENV_ACROBOT:
        return 6
    return 2

cdef inline int env_n_actions(int kind) noexcept nogil:
    """Number of discrete actions, 0 for continuous envs (which take one float)."""
    if kind == ENV_CARTPOLE:
        return 2
    if kind == ENV_MOUNTAINCAR or kind == ENV_ACROBOT:
        return 3
    return 0

cdef inline void env_init(env_t* e, int kind, uint64_t seed, int64_t max_steps) noexcept nogil:
    """Seed env ``e`` of ``kind`` with default parameters (call env_reset before stepping).

    max_steps <= 0 selects gymnasium's time limit for the kind."""
    cdef int64_t limits[5]
    limits[0] = 500; limits[1] = 200; limits[2] = 200; limits[3] = 999; limits[4] = 500
    e.kind = kind
    if max_steps <= 0:
        max_steps = limits[kind]
    if kind == ENV_CARTPOLE:
        rng_seed(&e.s.cartpole.rng, seed)
        e.s.cartpole.max_steps = max_steps
    elif kind == ENV_PENDULUM:
        rng_seed(&e.s.pendulum.rng, seed)
        e.s.pendulum.max_steps = max_steps
        e.s.pendulum.g = 10.0
    elif kind == ENV_MOUNTAINCAR:
        rng_seed(&e.s.mountaincar.rng, seed)
        e.s.mountaincar.max_steps = max_steps
    elif kind == ENV_MOUNTAINCAR_CONT:
        rng_seed(&e.s.mountaincar_cont.rng, seed)
        e.s.mountaincar_cont.max_steps = max_steps
    else:
        rng_seed(&e.s.acrobot.rng, seed)
        e.s.acrobot.max_steps = max_steps
        e.s.acrobot.book = True

cdef inline void env_reset(env_t* e) noexcept nogil:
    if e.kind == ENV_CARTPOLE:
        cartpole_reset(&e.s.cartpole)
    elif e.kind == ENV_PENDULUM:
        pendulum_reset(&e.s.pendulum)
    elif e.kind == ENV_MOUNTAINCAR:
        mountaincar_reset(&e.s.mountaincar)
    elif e.kind == ENV_MOUNTAINCAR_CONT:
        mountaincar_cont_reset(&e.s.mountaincar_cont)
    else:
        acrobot_reset(&e.s.acrobot)

cdef inline void env_obs_f32(const env_t* e, float32_t* out) noexcept nogil:
    """OUT out[env_obs_dim(kind)]: the observation gymnasium would return."""
    if e.kind == ENV_CARTPOLE:
        cartpole_obs(&e.s.cartpole, out)
    elif e.kind == ENV_PENDULUM:
        pendulum_obs(&e.s.pendulum, out)
    elif e.kind == ENV_MOUNTAINCAR:
        mountaincar_obs(&e.s.mountaincar, out)
    elif e.kind == ENV_MOUNTAINCAR_CONT:
        mountaincar_cont_obs(&e.s.mountaincar_cont, out)
    else:
        acrobot_obs(&e.s.acrobot, out)

cdef inline void env_obs_f64(const env_t* e, float64_t* out) noexcept nogil:
    """OUT out[obs_dim]: the float32 observation's values stored as float64."""
    cdef float32_t tmp[ENV_MAX_OBS_DIM]
    cdef int j
    env_obs_f32(e, tmp)
    for j in range(env_obs_dim(e.kind)):
        out[j] = tmp[j]

cdef inline void env_step(env_t* e, int64_t action, float64_t cont_action, float32_t* obs_out,
                          float64_t* reward, bint* terminated, bint* truncated) noexcept nogil:
    """One step: ``action`` for discrete kinds, ``cont_action`` for continuous ones.

    OUT obs_out[obs_dim] (may be NULL), reward, terminated, truncated. No automatic reset."""
    if e.kind == ENV_CARTPOLE:
        cartpole_step(&e.s.cartpole, action, obs_out, reward, terminated, truncated)
    elif e.kind == ENV_PENDULUM:
        pendulum_step(&e.s.pendulum, cont_action, obs_out, reward, terminated, truncated)
    elif e.kind == ENV_MOUNTAINCAR:
        mountaincar_step(&e.s.mountaincar, action, obs_out, reward, terminated, truncated)
    elif e.kind == ENV_MOUNTAINCAR_CONT:
        mountaincar_cont_step(&e.s.mountaincar_cont, cont_action, obs_out, reward, terminated,
                              truncated)
    else:
        acrobot_step(&e.s.acrobot, action, obs_out, reward, terminated, truncated)
