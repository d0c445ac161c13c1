"""rlox.wrappers.VecNormalize against a plain NumPy oracle; frozen statistics; saved with the model."""
import numpy as np
import pytest
import torch

import rlox
from rlox.algorithms.base import to_numpy_tree, to_torch_tree
from rlox.wrappers import VecNormalize


def oracle_run(env_id, n, steps, gamma, seed=0, eps=1e-8, clip_obs=10.0, clip_reward=10.0, **env_kw):
    """Step an unwrapped VecEnv and compute what VecNormalize should return, in NumPy."""
    env = rlox.VecEnv(n=n, seed=seed, env_id=env_id, **env_kw)
    rng = np.random.default_rng(seed)
    obs = env.reset_all().astype(np.float64)
    seen = [obs]
    returns = np.zeros(n)
    ret_seen = []
    expected_obs, expected_rewards, actions = [], [], []
    discrete = hasattr(env.single_action_space, "n")
    for _ in range(steps):
        a = rng.integers(0, env.single_action_space.n, n) if discrete else rng.uniform(-2, 2, (n, 1)).astype(np.float32)
        actions.append(a)
        out = env.step_all(a)
        o = out["obs"].astype(np.float64)
        seen.append(o)
        allobs = np.concatenate(seen)
        mean, var = allobs.mean(0), allobs.var(0)
        expected_obs.append(np.clip((o - mean) / np.sqrt(var + eps), -clip_obs, clip_obs))
        returns = returns * gamma + out["rewards"]
        ret_seen.append(returns.copy())
        std = np.sqrt(np.concatenate(ret_seen).var() + eps)
        expected_rewards.append(np.clip(out["rewards"] / std, -clip_reward, clip_reward))
        returns[out["terminated"] | out["truncated"]] = 0.0
    return actions, expected_obs, expected_rewards


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_matches_numpy_oracle(env_id):
    n, steps, gamma = 4, 300, 0.9
    actions, exp_obs, exp_rew = oracle_run(env_id, n, steps, gamma)
    vn = VecNormalize(rlox.VecEnv(n=n, seed=0, env_id=env_id), gamma=gamma)
    vn.reset_all()
    for t in range(steps):
        out = vn.step_all(actions[t])
        np.testing.assert_allclose(out["obs"], exp_obs[t], rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out["rewards"], exp_rew[t], rtol=1e-6, atol=1e-8)
        assert "raw_obs" in out and "raw_rewards" in out


class Spy:
    """A vector env that remembers what it returned (to see the wrapper's raw inputs)."""

    def __init__(self, env):
        self.env, self.last = env, None
        self.num_envs = env.num_envs
        self.single_observation_space, self.single_action_space = env.single_observation_space, env.single_action_space

    def reset_all(self, seed=None):
        return self.env.reset_all(seed=seed)

    def step_all(self, actions):
        self.last = self.env.step_all(actions)
        return self.last


def test_clipping_and_terminal_obs():
    spy = Spy(rlox.VecEnv(n=8, seed=1, env_id="CartPole-v1"))
    vn = VecNormalize(spy, clip_obs=0.5, clip_reward=0.3)
    vn.reset_all()
    finished = 0
    for _ in range(200):
        out = vn.step_all(np.ones(8, dtype=np.int64))
        assert np.abs(out["obs"]).max() <= 0.5 + 1e-6 and np.abs(out["rewards"]).max() <= 0.3 + 1e-12
        # terminal_obs is normalised with the same (updated) statistics as obs, never folded in.
        mean, var = vn.obs_rms.mean(), vn.obs_rms.var()
        expected = np.clip((spy.last["terminal_obs"] - mean) / np.sqrt(var + vn.epsilon), -0.5, 0.5)
        np.testing.assert_allclose(out["terminal_obs"], expected, rtol=1e-4, atol=1e-5)
        finished += int((out["terminated"] | out["truncated"]).sum())
    assert finished > 0


def test_frozen_statistics_do_not_move():
    vn = VecNormalize(rlox.VecEnv(n=4, seed=0, env_id="Pendulum-v1"))
    vn.reset_all()
    for _ in range(20):
        vn.step_all(np.zeros((4, 1), np.float32))
    vn.training = False
    count, mean, rcount = vn.obs_rms.count(), vn.obs_rms.mean().copy(), vn.ret_rms.count()
    for _ in range(20):
        vn.step_all(np.ones((4, 1), np.float32))
    vn.reset_all()
    assert (vn.obs_rms.count(), vn.ret_rms.count()) == (count, rcount)
    np.testing.assert_array_equal(vn.obs_rms.mean(), mean)


def test_state_dict_round_trip_without_pickle(tmp_path):
    vn = VecNormalize(rlox.VecEnv(n=3, seed=0, env_id="CartPole-v1"), clip_obs=4.0, gamma=0.95)
    vn.reset_all()
    for _ in range(50):
        vn.step_all(np.zeros(3, dtype=np.int64))
    torch.save(to_torch_tree(vn.state_dict()), tmp_path / "vn.pt")
    state = to_numpy_tree(torch.load(tmp_path / "vn.pt", weights_only=True))
    fresh = VecNormalize(rlox.VecEnv(n=3, seed=0, env_id="CartPole-v1"))
    fresh.load_state_dict(state)
    assert (fresh.clip_obs, fresh.gamma) == (4.0, 0.95)
    np.testing.assert_array_equal(fresh.obs_rms.mean(), vn.obs_rms.mean())
    np.testing.assert_array_equal(fresh.ret_rms.var(), vn.ret_rms.var())
    x = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_array_equal(fresh.normalize_obs(x), vn.normalize_obs(x))
    other = VecNormalize(rlox.VecEnv(n=3, seed=0, env_id="Pendulum-v1"))
    with pytest.raises(ValueError, match="saved observation statistics have 4 dims; this env's observations have 3"):
        other.load_state_dict(state)


def test_saved_with_the_model_and_frozen_at_evaluation(tmp_path):
    from rlox import Trainer
    from rlox.evaluation import evaluate_policy

    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config={"n_envs": 4, "n_steps": 32, "batch_size": 64},
                      wrappers=[VecNormalize(norm_obs=True, norm_reward=True, clip_obs=10.0)])
    trainer.train(256)
    norm = trainer.algo.obs_normalizer()
    count = norm.obs_rms.count()
    evaluate_policy(trainer, "CartPole-v1", n_episodes=2)
    assert norm.obs_rms.count() == count                       # evaluation does not update statistics
    trainer.save(tmp_path / "m.pt")
    loaded = Trainer.from_checkpoint(tmp_path / "m.pt", algorithm="ppo", env="CartPole-v1")
    lnorm = loaded.algo.obs_normalizer()
    assert lnorm is not None and lnorm.obs_rms.count() == count
    np.testing.assert_array_equal(lnorm.obs_rms.mean(), norm.obs_rms.mean())
    np.testing.assert_array_equal(lnorm.ret_rms.var(), norm.ret_rms.var())
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True), trainer.predict(obs, deterministic=True))


def test_argument_errors():
    for kw, msg in ((dict(clip_obs=0), "clip_obs must be a finite number > 0"),
                    (dict(clip_reward=float("inf")), "clip_reward must be a finite number > 0"),
                    (dict(clip_obs=True), "clip_obs must be a finite number > 0"),
                    (dict(gamma=1.5), r"gamma must be in \[0, 1\]"),
                    (dict(epsilon=-1), "epsilon must be a finite number >= 0")):
        with pytest.raises(ValueError, match=msg):
            VecNormalize(**kw)
    vn = VecNormalize()
    with pytest.raises(RuntimeError, match="is not bound to an env"):
        vn.reset_all()
    vn.wrap(rlox.VecEnv(n=2, seed=0))
    with pytest.raises(RuntimeError, match="already wraps another env"):
        vn.wrap(rlox.VecEnv(n=2, seed=0))
