"""Native envs against gymnasium step by step; VecEnv seeding/autoreset contract; adapters."""
import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import rlox
from tests._threads import kernel_threads
from rlox.envs import (NATIVE_ENV_IDS, Acrobot, CartPole, GymEnv, GymVecEnv, MountainCar,
                       MountainCarContinuous, Pendulum, VecEnv, is_native, make_vec_env)

CLASSES = {"CartPole-v1": CartPole, "Pendulum-v1": Pendulum, "MountainCar-v0": MountainCar,
           "MountainCarContinuous-v0": MountainCarContinuous, "Acrobot-v1": Acrobot}


def _random_actions(space, rng, n, wide=True):
    if isinstance(space, gym.spaces.Discrete):
        return [int(a) for a in rng.integers(space.n, size=n)]
    scale = 1.5 if wide else 1.0  # beyond the bounds: exercises clipping
    return [rng.uniform(-scale * space.high, scale * space.high).astype(np.float32)
            for _ in range(n)]


def _sync(native, genv):
    """Copy gymnasium's state into the native env (float64, as gymnasium holds it)."""
    state = np.asarray(genv.unwrapped.state, dtype=np.float64)
    genv.unwrapped.state = state.copy()
    native.state = state


@pytest.mark.parametrize("env_id,dynamics", [(i, "book") for i in NATIVE_ENV_IDS]
                         + [("Acrobot-v1", "nips")])
def test_matches_gymnasium_step_by_step(env_id, dynamics):
    rng = np.random.default_rng(7)
    genv = gym.make(env_id)
    kwargs = {"dynamics": dynamics} if env_id == "Acrobot-v1" else {}
    env = CLASSES[env_id](seed=3, **kwargs)
    if env_id == "Acrobot-v1":
        genv.unwrapped.book_or_nips = dynamics
    genv.reset(seed=11)
    env.reset()
    _sync(env, genv)
    limit = env.max_episode_steps
    n_steps = 2 * limit + 50
    episodes = 0
    for a in _random_actions(env.action_space, rng, n_steps):
        obs, reward, term, trunc, _ = genv.step(a)
        out = env.step(a)
        np.testing.assert_allclose(out["obs"], obs, atol=1e-5, rtol=0)
        assert out["obs"].dtype == np.float32 and out["obs"].shape == obs.shape
        assert abs(out["reward"] - reward) <= 1e-5
        assert (out["terminated"], out["truncated"]) == (term, trunc)
        if term or trunc:
            episodes += 1
            genv.reset()
            env.reset()
            _sync(env, genv)
    assert episodes >= 2  # time limits were crossed at least twice


@pytest.mark.parametrize("env_id", ["MountainCar-v0", "MountainCarContinuous-v0"])
def test_mountain_car_goal_and_left_wall(env_id):
    """States next to the goal and the left wall: termination and the wall rule match."""
    genv = gym.make(env_id)
    env = CLASSES[env_id](seed=0)
    env.reset()
    genv.reset(seed=0)
    rng = np.random.default_rng(1)
    push = (lambda s: 2 if s > 0 else 0) if env_id == "MountainCar-v0" else (
        lambda s: np.array([1.0 if s > 0 else -1.0], dtype=np.float32))
    for start in [(0.44, 0.02), (0.49, 0.01), (-1.19, -0.05), (-1.2, -0.07), (0.59, 0.07)]:
        state = np.array(start, dtype=np.float64)
        genv.unwrapped.state = state.copy()
        env.state = state
        for _ in range(30):
            a = push(start[1]) if rng.random() < 0.8 else _random_actions(env.action_space, rng, 1)[0]
            obs, reward, term, trunc, _ = genv.step(a)
            out = env.step(a)
            np.testing.assert_allclose(out["obs"], obs, atol=1e-6, rtol=0)
            assert abs(out["reward"] - reward) <= 1e-6
            assert out["terminated"] == term
            if term:
                break


@pytest.mark.parametrize("env_id", NATIVE_ENV_IDS)
def test_spaces_equal_gymnasium(env_id):
    genv = gym.make(env_id)
    env = CLASSES[env_id](seed=0)
    assert env.observation_space == genv.observation_space
    assert env.action_space == genv.action_space
    vec = VecEnv(n=3, seed=0, env_id=env_id)
    assert vec.single_observation_space == genv.observation_space
    assert vec.single_action_space == genv.action_space
    assert vec.observation_space.shape == (3, *genv.observation_space.shape)
    assert vec.obs_dim == genv.observation_space.shape[0] and vec.env_id == env_id
    assert env.max_episode_steps == genv.spec.max_episode_steps


def _vec_matches_singles(env_id, n, seed, actions):
    vec = VecEnv(n=n, seed=seed, env_id=env_id)
    singles = [CLASSES[env_id](seed=seed + i) for i in range(n)]
    np.testing.assert_array_equal(vec.reset_all(), np.stack([e.reset() for e in singles]))
    for acts in actions:
        out = vec.step_all(acts)
        for i, env in enumerate(singles):
            r = env.step(acts[i])
            np.testing.assert_array_equal(out["terminal_obs"][i], r["obs"])
            assert out["rewards"][i] == r["reward"]
            assert out["terminated"][i] == r["terminated"] and out["truncated"][i] == r["truncated"]
            if r["terminated"] or r["truncated"]:
                np.testing.assert_array_equal(out["obs"][i], env.reset())
            else:
                np.testing.assert_array_equal(out["obs"][i], r["obs"])
    return vec


@pytest.mark.parametrize("env_id", NATIVE_ENV_IDS)
def test_vec_seeding_contract(env_id):
    # 5 envs always step serially (below the parallel work threshold); the threaded path is
    # checked against the serial one in test_vec_large_parallel_path_independent_of_threads.
    rng = np.random.default_rng(0)
    n = 5
    vec = VecEnv(n=n, seed=0, env_id=env_id)
    steps = 260 if env_id != "MountainCarContinuous-v0" else 120
    actions = [np.array(_random_actions(vec.single_action_space, rng, n, wide=False))
               for _ in range(steps)]
    _vec_matches_singles(env_id, n, 42, actions)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1"])
def test_vec_large_parallel_path_independent_of_threads(env_id):
    """Above the serial threshold results are the same at 1 and 2 threads."""
    rng = np.random.default_rng(3)
    n = 2048
    acts = [rng.integers(VecEnv(1, env_id=env_id).single_action_space.n, size=n) for _ in range(60)]
    outs = []
    for t in (1, 2):
        with kernel_threads(t):
            vec = VecEnv(n=n, seed=9, env_id=env_id)
            res = [vec.reset_all()]
            for a in acts:
                o = vec.step_all(a)
                res += [o["obs"], o["rewards"], o["terminated"], o["terminal_obs"]]
        outs.append(res)
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)
    # spot-check two envs against single envs
    for i in (0, n - 1):
        env = CartPole(seed=9 + i) if env_id == "CartPole-v1" else Acrobot(seed=9 + i)
        np.testing.assert_array_equal(outs[0][0][i], env.reset())


@settings(max_examples=25)
@given(n=st.integers(1, 9), seed=st.integers(0, 2**32), data=st.data())
def test_vec_seeding_property(n, seed, data):
    steps = data.draw(st.integers(1, 40))
    acts = data.draw(st.lists(st.lists(st.integers(0, 1), min_size=n, max_size=n),
                              min_size=steps, max_size=steps))
    _vec_matches_singles("CartPole-v1", n, seed, acts)


def test_vec_autoreset_and_terminal_obs():
    vec = VecEnv(n=4, seed=0, max_episode_steps=7)
    vec.reset_all()
    for t in range(1, 15):
        out = vec.step_all(np.ones(4, dtype=np.int64))
        done = out["terminated"] | out["truncated"]
        differs = (out["obs"] != out["terminal_obs"]).any(axis=1)
        np.testing.assert_array_equal(differs, done)
        if t == 7:
            assert out["truncated"].all()
    assert out["rewards"].dtype == np.float64 and out["obs"].dtype == np.float32


def test_reset_all_seed_and_reuse_buffers():
    vec = VecEnv(n=3, seed=5)
    first = vec.reset_all()
    vec.step_all([0, 1, 0])
    np.testing.assert_array_equal(vec.reset_all(seed=5), first)
    fresh = vec.step_all([1, 1, 1])["obs"]
    assert vec.step_all([1, 1, 1])["obs"] is not fresh
    reuse = VecEnv(n=3, seed=5, reuse_buffers=True)
    reuse.reset_all()
    a = reuse.step_all([1, 1, 1])["obs"]
    assert reuse.step_all([1, 1, 1])["obs"] is a


def test_continuous_clipping_matches_in_range():
    vec = VecEnv(n=2, seed=0, env_id="Pendulum-v1")
    other = VecEnv(n=2, seed=0, env_id="Pendulum-v1")
    vec.reset_all()
    other.reset_all()
    a = vec.step_all(np.array([[50.0], [-np.inf]]))
    b = other.step_all(np.array([2.0, -2.0], dtype=np.float32))
    np.testing.assert_array_equal(a["obs"], b["obs"])
    np.testing.assert_array_equal(a["rewards"], b["rewards"])


def test_bad_input_messages():
    vec = VecEnv(n=4, seed=0)
    with pytest.raises(RuntimeError, match="reset_all"):
        vec.step_all([0] * 4)
    vec.reset_all()
    with pytest.raises(ValueError, match=r"actions\[2\] = 5 is out of range .*\[0, 2\)"):
        vec.step_all([0, 1, 5, 0])
    with pytest.raises(ValueError, match=r"actions\[0\] = -1"):
        vec.step_all([-1, 1, 1, 0])
    with pytest.raises(ValueError, match=r"shape \(3,\) but the VecEnv has 4 envs"):
        vec.step_all([0, 1, 1])
    with pytest.raises(TypeError, match="must be integers"):
        vec.step_all([0.0, 1.0, 1.0, 0.0])
    cont = VecEnv(n=2, seed=0, env_id="MountainCarContinuous-v0")
    cont.reset_all()
    with pytest.raises(ValueError, match=r"actions\[1\] is NaN"):
        cont.step_all([0.5, np.nan])
    with pytest.raises(ValueError, match=r"shape \(2, 2\)"):
        cont.step_all(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="n must be >= 1, got 0"):
        VecEnv(n=0)
    with pytest.raises(TypeError, match="n must be an int"):
        VecEnv(n=2.5)
    with pytest.raises(ValueError, match="not native"):
        VecEnv(n=2, env_id="LunarLander-v3")
    with pytest.raises(ValueError, match="seed = -1 is out of range"):
        VecEnv(n=2, seed=-1)
    with pytest.raises(ValueError, match="max_episode_steps must be >= 1"):
        CartPole(seed=0, max_episode_steps=0)
    env = CartPole(seed=0)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    with pytest.raises(ValueError, match="action 2 is out of range for CartPole-v1"):
        env.step(2)
    with pytest.raises(TypeError, match="must be an int"):
        env.step(0.5)
    with pytest.raises(ValueError, match=r"state for CartPole-v1 has shape \(3,\)"):
        env.state = [0.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="NaN"):
        _nan_pendulum()
    with pytest.raises(ValueError, match="dynamics must be"):
        Acrobot(seed=0, dynamics="other")
    vec.close()
    with pytest.raises(RuntimeError, match="closed"):
        vec.step_all([0] * 4)


def _nan_pendulum():
    env = Pendulum(seed=0)
    env.reset()
    env.step(np.array([np.nan], dtype=np.float32))


@settings(max_examples=30)
@given(actions=st.lists(st.integers(-2**63, 2**63 - 1), min_size=1, max_size=6))
def test_discrete_actions_never_out_of_bounds(actions):
    vec = VecEnv(n=len(actions), seed=0, env_id="Acrobot-v1")
    vec.reset_all()
    if all(0 <= a < 3 for a in actions):
        assert vec.step_all(actions)["obs"].shape == (len(actions), 6)
    else:
        with pytest.raises(ValueError, match="out of range"):
            vec.step_all(actions)


def test_is_native_and_make_vec_env():
    assert all(is_native(i) for i in NATIVE_ENV_IDS) and not is_native("LunarLander-v3")
    assert not is_native(None)
    assert isinstance(make_vec_env("Acrobot-v1", 3, seed=0), VecEnv)
    gv = make_vec_env("CartPole-v1", 2, seed=0, sutton_barto_reward=True)
    assert isinstance(gv, GymVecEnv)
    assert "CartPole" in rlox.__all__ and "VecEnv" in rlox.__all__ and rlox.GymVecEnv is GymVecEnv


def test_gym_env_dict_interface():
    env = GymEnv(gym.make("Acrobot-v1"), seed=4)
    obs = env.reset()
    ref = gym.make("Acrobot-v1")
    np.testing.assert_array_equal(obs, ref.reset(seed=4)[0])
    out = env.step(1)
    o, r, te, tr, _ = ref.step(1)
    np.testing.assert_array_equal(out["obs"], o)
    assert (out["reward"], out["terminated"], out["truncated"]) == (r, te, tr)
    assert env.observation_space == ref.observation_space and env.action_space == ref.action_space
    with pytest.raises(TypeError, match="gymnasium.Env"):
        GymEnv("CartPole-v1")


@pytest.mark.parametrize("source", ["id", "env", "fns"])
def test_gym_vec_env_terminal_obs_against_underlying_envs(source):
    n, limit = 3, 9
    if source == "id":
        vec = GymVecEnv("CartPole-v1", n, seed=10, max_episode_steps=limit)
    elif source == "env":
        vec = GymVecEnv(gym.make("CartPole-v1", max_episode_steps=limit), n, seed=10)
    else:
        vec = GymVecEnv([lambda: gym.make("CartPole-v1", max_episode_steps=limit)] * n, seed=10)
    refs = [gym.make("CartPole-v1", max_episode_steps=limit) for _ in range(n)]
    obs = vec.reset_all()
    np.testing.assert_array_equal(obs, np.stack([e.reset(seed=10 + i)[0] for i, e in enumerate(refs)]))
    rng = np.random.default_rng(0)
    seen_trunc = seen_term = False
    for _ in range(40):
        acts = rng.integers(2, size=n)
        out = vec.step_all(acts)
        for i, e in enumerate(refs):
            o, r, te, tr, _ = e.step(int(acts[i]))
            np.testing.assert_array_equal(out["terminal_obs"][i], o)
            assert (out["terminated"][i], out["truncated"][i], out["rewards"][i]) == (te, tr, r)
            if te or tr:
                np.testing.assert_array_equal(out["obs"][i], e.reset()[0])
                seen_trunc |= tr
                seen_term |= te
            else:
                np.testing.assert_array_equal(out["obs"][i], o)
    assert seen_trunc
    assert vec.num_envs == n and vec.obs_dim == 4 and out["obs"].dtype == np.float32
    with pytest.raises(ValueError, match=r"actions\[1\] = 7 is out of range"):
        vec.step_all([0, 7, 1])
    with pytest.raises(ValueError, match="expected \\(3,\\)"):
        vec.step_all([0, 1])


def test_gym_vec_env_continuous_and_bad_args():
    vec = GymVecEnv("Pendulum-v1", 2, seed=0)
    vec.reset_all()
    assert vec.step_all([0.5, -0.5])["obs"].shape == (2, 3)
    with pytest.raises(ValueError, match="NaN"):
        vec.step_all([np.nan, 0.0])
    with pytest.raises(ValueError, match="n_envs = 3 but 2 env factories"):
        GymVecEnv([lambda: gym.make("CartPole-v1")] * 2, n_envs=3)
    with pytest.raises(ValueError, match="n_envs must be an int >= 1"):
        GymVecEnv("CartPole-v1", 0)


def test_adaptive_parallel_stepping_gives_the_serial_results():
    """VecEnv times its serial and OpenMP paths and switches between them; every step must be
    the same whichever path ran it."""
    outs = {}
    for threads in (1, 2):
        with kernel_threads(threads):
            vec = rlox.VecEnv(n=256, seed=3, env_id="Acrobot-v1")
            vec.reset_all()
            rng = np.random.default_rng(0)
            trace = []
            for _ in range(300):                   # crosses several probes of the other path
                out = vec.step_all(rng.integers(0, 3, size=256))
                trace.append(np.concatenate([out["obs"].ravel(), out["rewards"]]))
            outs[threads] = np.stack(trace)
            if threads == 1:                       # one thread: never the OpenMP path
                assert vec.parallel_stepping is False
    np.testing.assert_array_equal(outs[1], outs[2])
