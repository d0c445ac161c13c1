"""rlox.exploration: noise statistics, schedules, seeding, state round trips, bad input."""
import numpy as np
import pytest
from gymnasium import spaces

from rlox.exploration import EpsilonGreedy, GaussianNoise, OrnsteinUhlenbeckNoise, linear_schedule

BOX = spaces.Box(-2.0, 2.0, shape=(2,), dtype=np.float32)
DISCRETE = spaces.Discrete(3)


def zeros_policy(obs):
    return np.zeros((len(obs), 2), dtype=np.float32)


def test_gaussian_noise_statistics_and_clipping():
    noise = GaussianNoise(sigma=0.3, seed=0).bind(BOX, n_envs=4)
    draws = np.concatenate([noise.sample() for _ in range(5000)])
    assert draws.shape == (20000, 2) and draws.dtype == np.float32
    assert abs(draws.mean()) < 0.01 and draws.std() == pytest.approx(0.3, rel=0.02)
    big = GaussianNoise(sigma=10.0, seed=0).bind(BOX, 4)
    acts = big.select(zeros_policy, np.zeros((4, 3), np.float32), progress=0.0)
    assert acts.shape == (4, 2) and np.all(np.abs(acts) <= 1.0)


def test_seeded_noise_is_reproducible_and_state_round_trips():
    a = GaussianNoise(0.1, seed=7).bind(BOX, 2)
    b = GaussianNoise(0.1, seed=7).bind(BOX, 2)
    np.testing.assert_array_equal(a.sample(), b.sample())
    state = a.state_dict()
    first = a.sample()
    a.load_state_dict(state)
    np.testing.assert_array_equal(a.sample(), first)


def test_ornstein_uhlenbeck_is_correlated_mean_reverting_and_resets_per_env():
    ou = OrnsteinUhlenbeckNoise(sigma=0.2, theta=0.15, dt=1e-2, seed=1).bind(BOX, n_envs=3)
    xs = np.stack([ou.sample() for _ in range(20000)])          # [T, 3, 2]
    lag1 = np.corrcoef(xs[:-1, 0, 0], xs[1:, 0, 0])[0, 1]
    assert lag1 > 0.99                                           # strongly autocorrelated
    # Stationary std of the discretised process: sigma * sqrt(dt / (1 - (1 - theta dt)^2)).
    stat = 0.2 * np.sqrt(1e-2 / (1 - (1 - 0.15 * 1e-2) ** 2))
    assert xs[5000:].std() == pytest.approx(stat, rel=0.35)
    ou.reset(np.array([True, False, False]))
    assert np.all(ou.x[0] == 0.0) and np.any(ou.x[1] != 0.0)
    state = ou.state_dict()
    nxt = ou.sample()
    ou.load_state_dict(state)
    np.testing.assert_array_equal(ou.sample(), nxt)


def test_linear_schedule_and_epsilon():
    assert linear_schedule(1.0, 0.1, 0.5, 0.0) == 1.0
    assert linear_schedule(1.0, 0.1, 0.5, 0.25) == pytest.approx(0.55)
    assert linear_schedule(1.0, 0.1, 0.5, 0.9) == pytest.approx(0.1)
    eps = EpsilonGreedy(1.0, 0.05, fraction=0.1)
    assert [round(eps.epsilon(p), 4) for p in (0.0, 0.05, 0.1, 1.0)] == [1.0, 0.525, 0.05, 0.05]


def test_epsilon_greedy_skips_the_policy_when_all_envs_explore():
    calls = []

    def policy(obs):
        calls.append(len(obs))
        return np.full(len(obs), 2)

    eg = EpsilonGreedy(1.0, 0.0, fraction=0.5, seed=0).bind(DISCRETE, n_envs=8)
    acts = eg.select(policy, np.zeros((8, 4), np.float32), progress=0.0)       # epsilon = 1
    assert calls == [] and acts.shape == (8,) and set(acts.tolist()) <= {0, 1, 2}
    acts = eg.select(policy, np.zeros((8, 4), np.float32), progress=0.9)       # epsilon = 0
    assert calls == [8] and np.all(acts == 2)
    # Half-way: about half the actions are random (a third of those happen to be 2).
    eg2 = EpsilonGreedy(1.0, 0.0, fraction=1.0, seed=1).bind(DISCRETE, n_envs=1000)
    acts = eg2.select(lambda o: np.full(len(o), 2), np.zeros((1000, 4), np.float32), progress=0.5)
    assert 0.25 < np.mean(acts != 2) < 0.42


def test_bind_checks_the_action_space():
    with pytest.raises(ValueError, match="EpsilonGreedy"):
        GaussianNoise(0.1).bind(DISCRETE, 1)
    with pytest.raises(ValueError, match="GaussianNoise"):
        EpsilonGreedy().bind(BOX, 1)


@pytest.mark.parametrize("make", [
    lambda: GaussianNoise(sigma=-0.1),
    lambda: GaussianNoise(sigma=float("nan")),
    lambda: OrnsteinUhlenbeckNoise(dt=0.0),
    lambda: EpsilonGreedy(initial_eps=1.5),
    lambda: EpsilonGreedy(fraction=0.0),
])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()
