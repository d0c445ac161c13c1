"""The native MPE kernels (ext/mpe.pyx) against mpe2, step by step: the same world state and
the same actions give the same observations, state, rewards and truncations (within 1e-5)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mpe2")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402
from mpe2 import simple_speaker_listener_v4, simple_spread_v3  # noqa: E402

import rlox  # noqa: E402
from rlox.multiagent.envs import MultiAgentVecEnv, make_multiagent_vec_env  # noqa: E402

MODULES = {"spread_v3": simple_spread_v3, "speaker_listener_v4": simple_speaker_listener_v4}


def _pair(name, n_agents, continuous, max_cycles=25, local_ratio=None):
    kw = dict(max_cycles=max_cycles, continuous_actions=continuous)
    if name == "spread_v3":
        kw["N"] = n_agents
        if local_ratio is not None:
            kw["local_ratio"] = local_ratio
    pz = MODULES[name].parallel_env(**kw)
    pz.reset(seed=0)
    nat = MultiAgentVecEnv(name, 1, n_agents, seed=0, max_cycles=max_cycles, continuous_actions=continuous,
                           local_ratio=local_ratio)
    nat.reset()
    return pz, nat


def _set_both(pz, nat, pos, vel, comm, goal, steps):
    raw = pz.aec_env.unwrapped
    world = raw.world
    for e, p, v in zip(world.agents + world.landmarks, pos, vel):
        e.state.p_pos = np.array(p, dtype=np.float64)
        e.state.p_vel = np.array(v, dtype=np.float64) if e.movable else np.zeros(2)
    for a, c in zip(world.agents, comm):
        a.state.c = np.array(c, dtype=np.float64)
    if hasattr(world.agents[0], "goal_b"):
        world.agents[0].goal_b = world.landmarks[goal]
    raw.steps = steps
    vel = np.array(vel, dtype=np.float64)
    for i, e in enumerate(world.agents + world.landmarks):
        if not e.movable:
            vel[i] = 0.0
    nat.set_world(0, pos, vel, comm, goal, steps)
    return nat.observe()


def _compare(pz, nat, obs_pz, out, final):
    obs_nat = out["final_obs"] if final else out["obs"]
    for j, a in enumerate(pz.possible_agents):
        d = len(obs_pz[a])
        np.testing.assert_allclose(obs_nat[0, j, :d], obs_pz[a], atol=1e-5, rtol=0)
        assert not obs_nat[0, j, d:].any()          # zero padding


coords = st.floats(-2.0, 2.0, allow_nan=False, width=64)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), name=st.sampled_from(["spread_v3", "speaker_listener_v4"]), continuous=st.booleans(),
       n_agents=st.integers(1, 5), local_ratio=st.sampled_from([None, 0.0, 0.3, 1.0]))
def test_native_matches_mpe2_step_by_step(data, name, continuous, n_agents, local_ratio):
    if name == "speaker_listener_v4":
        n_agents, local_ratio = 2, None
    max_cycles = data.draw(st.integers(1, 8), label="max_cycles")
    pz, nat = _pair(name, n_agents, continuous, max_cycles, local_ratio)
    n_ent = nat.core.n_agents + nat.core.n_landmarks
    # Agents often start inside each other's radius so the contact forces are exercised.
    pos = data.draw(st.lists(st.tuples(coords, coords), min_size=n_ent, max_size=n_ent), label="pos")
    vel = data.draw(st.lists(st.tuples(st.floats(-1, 1), st.floats(-1, 1)), min_size=n_ent, max_size=n_ent))
    comm = data.draw(st.lists(st.lists(st.floats(0, 1), min_size=nat.core.dim_c, max_size=nat.core.dim_c),
                              min_size=n_agents, max_size=n_agents), label="comm")
    goal = data.draw(st.integers(0, 2)) if name == "speaker_listener_v4" else 0
    steps = data.draw(st.integers(0, max_cycles - 1), label="steps")
    out = _set_both(pz, nat, pos, vel, comm, goal, steps)
    # The observations and global state of the set world.
    raw = pz.aec_env.unwrapped
    obs_pz = {a: raw.observe(a) for a in pz.possible_agents}
    _compare(pz, nat, obs_pz, out, final=False)
    np.testing.assert_allclose(out["state"][0], pz.state(), atol=1e-5, rtol=0)
    for _ in range(max_cycles - steps):
        if continuous:
            acts = np.array(data.draw(st.lists(st.lists(st.floats(-0.5, 1.5, width=32), min_size=5, max_size=5),
                                               min_size=n_agents, max_size=n_agents)), np.float32)[None]
            pa = {a: acts[0, j, :nat.act_dims[j]].copy() for j, a in enumerate(pz.possible_agents)}
        else:
            acts = np.array([[data.draw(st.integers(0, k - 1)) for k in nat.act_dims]], np.int64)
            pa = {a: int(acts[0, j]) for j, a in enumerate(pz.possible_agents)}
        out = nat.step(acts)
        state_nat = (out["final_state"] if out["done"][0] else out["state"]).copy()
        obs_pz, rew, term, trunc, _ = pz.step(pa)
        _compare(pz, nat, obs_pz, out, final=bool(out["done"][0]))
        np.testing.assert_allclose(state_nat[0], pz.state(), atol=1e-5, rtol=0)
        for j, a in enumerate(pz.possible_agents):
            if np.isnan(rew[a]):
                # Two entities at exactly the same point: mpe2's contact force divides by their
                # zero distance; the native step must give the same NaN, not some other number.
                assert np.isnan(out["rewards"][0, j])
            else:
                assert abs(out["rewards"][0, j] - rew[a]) <= 1e-5 * max(1.0, abs(rew[a]))
            assert bool(out["truncated"][0, j]) == trunc[a]
            assert bool(out["terminated"][0, j]) == term[a]
        if out["done"][0]:
            assert not pz.agents                    # mpe2 ended the episode on the same step
            break
    else:
        raise AssertionError("the episode did not end at max_cycles")


def test_reset_is_per_env_and_thread_count_independent():
    a = MultiAgentVecEnv("spread_v3", 64, 3, seed=7)
    b = MultiAgentVecEnv("spread_v3", 64, 3, seed=7)
    rng = np.random.default_rng(0)
    acts = rng.integers(0, 5, size=(30, 64, 3))
    rlox.set_num_threads(1)
    a.reset()
    ra = [a.step(x)["obs"].copy() for x in acts]
    rlox.set_num_threads(2)
    try:
        b.reset()
        rb = [b.step(x)["obs"].copy() for x in acts]
    finally:
        rlox.set_num_threads(1)
    np.testing.assert_array_equal(np.stack(ra), np.stack(rb))
    # Env i's episodes depend on (seed, i) only: env 5 of 64 == env 0 of a 1-env run seeded 12.
    c = MultiAgentVecEnv("spread_v3", 1, 3, seed=12)
    np.testing.assert_array_equal(c.reset()["obs"][0], MultiAgentVecEnv("spread_v3", 64, 3, seed=7).reset()["obs"][5])
    # Spread's agents start in [-1, 1]^2 with zero velocity.
    obs = MultiAgentVecEnv("spread_v3", 256, 3, seed=1).reset()["obs"]
    assert np.abs(obs[..., 2:4]).max() <= 1 and not obs[..., :2].any()


def test_truncation_resets_and_state_round_trip():
    env = MultiAgentVecEnv("spread_v3", 4, 3, seed=0, max_cycles=5)
    env.reset()
    for t in range(5):
        out = env.step(np.zeros((4, 3), np.int64))
        assert out["done"].all() == (t == 4)
    snap = env.get_state()
    assert (snap["steps"] == 0).all()
    x = [env.step(np.full((4, 3), 2)) for _ in range(3)][-1]["obs"].copy()
    env.set_state(snap)
    y = [env.step(np.full((4, 3), 2)) for _ in range(3)][-1]["obs"].copy()
    np.testing.assert_array_equal(x, y)


def test_bad_input_errors():
    with pytest.raises(ValueError, match="did you mean 'spread_v3'"):
        MultiAgentVecEnv("sprad_v3", 2)
    with pytest.raises(ValueError, match="exactly 2 agents"):
        MultiAgentVecEnv("speaker_listener_v4", 2, n_agents=3)
    with pytest.raises(ValueError, match="has no native kernel"):
        MultiAgentVecEnv("simple_tag_v3", 2)
    with pytest.raises(ValueError, match="n_agents must be >= 1"):
        MultiAgentVecEnv("spread_v3", 2, n_agents=0)
    env = MultiAgentVecEnv("spread_v3", 2, 3)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros((2, 3), np.int64))
    env.reset()
    with pytest.raises(ValueError, match=r"actions\[0, 2\] = 5 is out of range for agent 2 of simple_spread_v3; "
                                         r"expected an int in \[0, 5\)"):
        env.step(np.array([[0, 1, 5], [0, 0, 0]]))
    with pytest.raises(ValueError, match=r"shape \(3,\), expected \(2, 3\)"):
        env.step(np.zeros(3, np.int64))
    with pytest.raises(TypeError, match="discrete actions .ints., got an array of dtype float32"):
        env.step(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match=r"no action for \['agent_2'\]"):
        env.step({"agent_0": [0, 0], "agent_1": [0, 0]})
    with pytest.raises(ValueError, match=r"unknown agent\(s\) \['agent_9'\]"):
        env.step({"agent_0": [0, 0], "agent_1": [0, 0], "agent_2": [0, 0], "agent_9": [0, 0]})
    out = env.step({"agent_0": [1, 2], "agent_1": [3, 4], "agent_2": [0, 0]})     # a full dict works
    assert out["obs"].shape == (2, 3, 18)
    cont = MultiAgentVecEnv("spread_v3", 1, 2, continuous_actions=True)
    cont.reset()
    with pytest.raises(ValueError, match="NaN"):
        cont.step(np.full((1, 2, 5), np.nan, np.float32))
    with pytest.raises(ValueError, match="finite"):
        env.set_world(0, np.full((6, 2), np.inf), np.zeros((6, 2)), np.zeros((3, 2)))
    with pytest.raises(IndexError, match="out of range"):
        env.get_world(2)
    with pytest.raises(ValueError, match="MPE state 'pos' has shape"):
        env.set_state({**env.get_state(), "pos": np.zeros((1, 6, 2))})


def test_make_multiagent_vec_env_choices():
    assert make_multiagent_vec_env("spread_v3", 2, n_agents=4).native
    pz = make_multiagent_vec_env("spread_v3", 2, n_agents=4, native=False)
    assert not pz.native and pz.n_agents == 4 and pz.state_dim == 4 * pz.obs_dim
    with pytest.raises(ValueError, match="native=True but simple_tag_v3 has no native kernel"):
        make_multiagent_vec_env("tag_v3", 1, native=True)
    with pytest.raises(ValueError, match="n_agents=5 does not fit simple_reference_v3: it has 2 agents"):
        make_multiagent_vec_env("reference_v3", 1, n_agents=5)
    with pytest.raises(TypeError, match="CartPole-v1 is a CartPole, not a PettingZoo env"):
        make_multiagent_vec_env("CartPole-v1", 1)       # a single-agent ENV_REGISTRY entry
    with pytest.raises(ValueError, match="unknown multi-agent env 'nothing_v9'"):
        make_multiagent_vec_env("nothing_v9", 1)


def test_aec_env_conversion_and_refusal():
    aec = simple_spread_v3.env(N=2)
    venv = make_multiagent_vec_env(aec, 1)
    assert venv.n_agents == 2
    venv.reset()
    assert venv.step(np.zeros((1, 2), np.int64))["rewards"].shape == (1, 2)
    from pettingzoo.classic import tictactoe_v3

    with pytest.raises(TypeError, match="cannot be converted to a parallel env"):
        make_multiagent_vec_env(tictactoe_v3.env(), 1)
