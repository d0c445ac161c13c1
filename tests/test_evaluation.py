"""rlox.evaluation: IQM, stratified bootstrap CI, performance profiles, evaluate_policy."""
import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, strategies as st
from scipy import stats as sps

from rlox.evaluation import (evaluate_policy, interquartile_mean, performance_profiles,
                             stratified_bootstrap_ci)
from tests.reference.evaluation_ref import iqm_ref, profile_ref

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)


def test_guide_sample():
    scores = [450, 480, 500, 200, 490]
    iqm = interquartile_mean(scores)
    assert iqm == pytest.approx((450 + 480 + 490) / 3)
    lower, upper = stratified_bootstrap_ci(scores, n_bootstrap=10_000, ci=0.95)
    assert 200 <= lower <= iqm <= upper <= 500
    profiles = performance_profiles(
        {"rlox": [450, 480, 500], "baseline": [300, 350, 400]},
        thresholds=[100, 200, 300, 400, 500],
    )
    np.testing.assert_allclose(profiles["rlox"], [1, 1, 1, 1, 0])
    np.testing.assert_allclose(profiles["baseline"], [1, 1, 2 / 3, 0, 0])


@given(st.lists(finite, min_size=1, max_size=40))
def test_iqm_matches_oracle_and_scipy(xs):
    got = interquartile_mean(xs)
    assert got == pytest.approx(iqm_ref(xs), rel=1e-9, abs=1e-6)
    assert got == pytest.approx(float(sps.trim_mean(xs, 0.25)), rel=1e-9, abs=1e-6)


def test_iqm_2d_pools_runs_and_tasks():
    scores = np.arange(12.0).reshape(4, 3)
    assert interquartile_mean(scores) == pytest.approx(iqm_ref(scores.tolist()))


def test_iqm_small_inputs():
    assert interquartile_mean([7.0]) == 7.0
    assert interquartile_mean([1.0, 3.0, 100.0]) == pytest.approx(104 / 3)   # n < 4: nothing cut
    assert interquartile_mean([1.0, 2.0, 3.0, 100.0]) == pytest.approx(2.5)  # one cut each end


@given(st.lists(finite, min_size=1, max_size=15),
       st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=6))
def test_profiles_match_oracle(xs, taus):
    got = performance_profiles({"m": xs}, thresholds=taus)["m"]
    np.testing.assert_allclose(got, profile_ref(xs, taus))


@given(st.lists(finite, min_size=2, max_size=12), st.integers(0, 2**31))
def test_bootstrap_ci_brackets_bootstrap_range(xs, seed):
    lo, hi = stratified_bootstrap_ci(xs, n_bootstrap=200, ci=0.9, seed=seed)
    assert min(xs) - 1e-6 <= lo <= hi <= max(xs) + 1e-6


def test_bootstrap_ci_constant_scores_and_reproducible():
    assert stratified_bootstrap_ci([3.0] * 5, n_bootstrap=100) == pytest.approx((3.0, 3.0))
    a = stratified_bootstrap_ci([1, 5, 2, 8, 9, 3], n_bootstrap=500, seed=7)
    b = stratified_bootstrap_ci([1, 5, 2, 8, 9, 3], n_bootstrap=500, seed=7)
    assert a == b


def test_bootstrap_ci_is_stratified_per_task():
    # Task 0 scores are all 0, task 1 all 10: a stratified resample always has 3 of each,
    # so the pooled IQM of every resample is exactly 5 and the interval collapses.
    scores = np.array([[0.0, 10.0]] * 3)
    assert stratified_bootstrap_ci(scores, n_bootstrap=300) == pytest.approx((5.0, 5.0))


def test_bootstrap_custom_statistic_matches_loop():
    xs = np.array([1.0, 4.0, 2.0, 8.0, 5.0])
    lo, hi = stratified_bootstrap_ci(xs, n_bootstrap=400, ci=0.8, statistic=np.median, seed=3)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 5, size=(400, 5, 1))
    meds = [np.median(xs[idx[b, :, 0]]) for b in range(400)]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(meds, [0.1, 0.9])))


@pytest.mark.parametrize("bad, match", [
    ([], "empty"), ([1.0, float("nan")], "NaN"), (np.zeros((2, 2, 2)), "1-D"), ("abc", "numbers"),
])
def test_bad_scores(bad, match):
    with pytest.raises((ValueError, TypeError), match=match):
        interquartile_mean(bad)


def test_bad_bootstrap_args():
    with pytest.raises(ValueError, match="n_bootstrap must be an integer >= 1, got 0"):
        stratified_bootstrap_ci([1, 2], n_bootstrap=0)
    with pytest.raises(ValueError, match=r"ci must be in the open interval \(0, 1\), got 1.5"):
        stratified_bootstrap_ci([1, 2], ci=1.5)


def test_bad_profiles_args():
    with pytest.raises(ValueError, match="non-empty mapping"):
        performance_profiles({}, thresholds=[1])
    with pytest.raises(ValueError, match="thresholds must be a non-empty 1-D"):
        performance_profiles({"a": [1]}, thresholds=[])


class _Greedy:
    """CartPole heuristic: push towards the pole's lean (keeps it up for a long time)."""

    def __init__(self):
        self.calls = []

    def predict(self, obs, deterministic=False):
        self.calls.append(deterministic)
        return np.array(1 if obs[2] + 0.5 * obs[3] > 0 else 0)


def test_evaluate_policy_runs_episodes_and_reports():
    agent = _Greedy()
    res = evaluate_policy(agent, "CartPole-v1", n_episodes=3, deterministic=True, seed=5)
    assert res["n_episodes"] == 3 and res["episode_rewards"].shape == (3,)
    assert res["mean_reward"] == pytest.approx(res["episode_rewards"].mean())
    assert res["std_reward"] == pytest.approx(res["episode_rewards"].std())
    # CartPole pays 1 per step, so return == length.
    np.testing.assert_array_equal(res["episode_rewards"], res["episode_lengths"])
    assert res["mean_reward"] > 100 and all(agent.calls)
    again = evaluate_policy(_Greedy(), "CartPole-v1", n_episodes=3, seed=5)
    np.testing.assert_array_equal(again["episode_rewards"], res["episode_rewards"])


def test_evaluate_policy_matches_manual_loop_with_callable_and_env_object():
    env = gym.make("Pendulum-v1")
    policy = lambda obs: np.array([-2.0 * obs[2]], dtype=np.float32)  # noqa: E731
    res = evaluate_policy(policy, env, n_episodes=2, seed=11)
    for ep in range(2):
        obs, _ = env.reset(seed=11 + ep)
        total, done = 0.0, False
        while not done:
            obs, r, term, trunc, _ = env.step(policy(obs))
            total += r
            done = term or trunc
        assert res["episode_rewards"][ep] == pytest.approx(total)
    assert res["episode_lengths"].tolist() == [200, 200]


def test_evaluate_policy_max_steps_and_errors():
    res = evaluate_policy(lambda o: 0, "CartPole-v1", n_episodes=2, max_episode_steps=3)
    assert (res["episode_lengths"] <= 3).all()
    with pytest.raises(ValueError, match="n_episodes must be an integer >= 1, got 0"):
        evaluate_policy(lambda o: 0, "CartPole-v1", n_episodes=0)
    with pytest.raises(TypeError, match="predict"):
        evaluate_policy(object(), "CartPole-v1", n_episodes=1)
    with pytest.raises(ValueError, match="unknown env 'NoSuchEnv-v9'"):
        evaluate_policy(lambda o: 0, "NoSuchEnv-v9", n_episodes=1)
