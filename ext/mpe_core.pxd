# Native multi-agent particle environments (MPE): the contract of ext/mpe.pyx, whose kernels
# (mpe_reset, mpe_observe, mpe_step; signatures below) take these structs.
#
# Two cooperative scenarios of mpe2 (Farama's MPE, `mpe2.simple_spread_v3` and
# `mpe2.simple_speaker_listener_v4`), reproduced operation by operation: action -> force
# (sensitivity 5), soft contact forces between colliding entities (contact_force 100,
# contact_margin 1e-3, logaddexp penetration), semi-implicit Euler (position with the old
# velocity, then damping 0.25, then force * dt; dt 0.1, mass 1), communication state, rewards
# (spread: local_ratio mix of the global coverage reward and the per-agent collision penalty;
# speaker-listener: minus the squared listener-goal distance), observations in float64 cast
# to float32, truncation once `steps >= max_cycles`. Reset draws come from the env's own
# rng_t (xoshiro256**), not NumPy's PCG64: a seed gives the same episode in rlox on any
# thread count, not the same episode as mpe2.
#
# State layout (one block per env, all owned by MPECore, flat and env-major):
#   pos, vel   float64 [n_envs, n_entities, 2]  agents first, then landmarks (mpe2's
#                                               world.entities order)
#   comm       float64 [n_envs, n_agents, dim_c] each agent's communication state (state.c)
#   goal       int64   [n_envs]                 speaker-listener: index of the goal landmark
#   steps      int64   [n_envs]                 world steps since the last reset
#   rng        rng_t   [n_envs]                 each env's random stream
from _types cimport float64_t, float32_t, int64_t
from _rng cimport rng_t

cdef enum:
    MPE_SPREAD = 0                 # simple_spread_v3: N agents, N landmarks, Discrete(5) / Box(5)
    MPE_SPEAKER_LISTENER = 1       # simple_speaker_listener_v4: speaker (Discrete(3) / Box(3)),
                                   # listener (Discrete(5) / Box(5)), 3 landmarks
    MPE_N_KINDS = 2


cdef struct mpe_spec_t:
    int kind                       # MPE_SPREAD or MPE_SPEAKER_LISTENER
    int n_agents                   # agents (spread: N; speaker-listener: 2)
    int n_landmarks                # landmarks (spread: N; speaker-listener: 3)
    int n_entities                 # n_agents + n_landmarks
    int dim_c                      # communication channel size (spread 2, speaker-listener 3)
    int obs_dim                    # widest observation; narrower ones are zero-padded to it
    int state_dim                  # mpe2's state(): every agent's observation, concatenated
    int act_dim                    # continuous actions: widest Box (5); discrete: 1
    int max_cycles                 # truncation: steps >= max_cycles
    bint continuous                # Box actions in [0, 1] (clipped) instead of Discrete
    float64_t local_ratio          # spread's reward mix: global * (1 - lr) + local * lr


cdef struct mpe_env_t:
    float64_t* pos                 # [n_entities, 2]
    float64_t* vel                 # [n_entities, 2]
    float64_t* comm                # [n_agents, dim_c]
    float64_t* force               # [n_entities, 2] scratch of the current step
    int64_t* goal                  # [1]
    int64_t* steps                 # [1]
    rng_t* rng                     # [1]


# Kernels (ext/mpe.pyx, all noexcept nogil, one env per call):
# cdef void mpe_reset(const mpe_spec_t* spec, mpe_env_t* e) noexcept nogil
#   Draw a new episode from the env's rng (mpe2's reset_world order); steps = 0.

# cdef void mpe_observe(const mpe_spec_t* spec, const mpe_env_t* e, float32_t* obs,
#                       float32_t* state) noexcept nogil
#   OUT obs [n_agents, obs_dim] (zero-padded rows), state [state_dim] (may be NULL).

# cdef bint mpe_step(const mpe_spec_t* spec, mpe_env_t* e, const int64_t* act_d,
#                    const float32_t* act_c, float32_t* rewards) noexcept nogil
#   One world step. IN act_d [n_agents] (discrete, in range) or act_c [n_agents, act_dim]
#   (continuous, no NaN; the other pointer NULL). OUT rewards [n_agents].
#   Returns True when the episode is truncated (steps >= max_cycles).
