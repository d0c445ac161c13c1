"""TD3: smoke, predict, save/load, exact resume, delayed updates, target smoothing, learning."""
import numpy as np
import pytest
import torch

from rlox.algorithms.off_policy import OffPolicyWarning
from rlox.algorithms.td3 import TD3
from rlox.callbacks import Callback
from rlox.evaluation import evaluate_policy
from rlox.exploration import GaussianNoise, OrnsteinUhlenbeckNoise
from tests.test_sac import same_state

SMALL = dict(hidden=32, batch_size=64, learning_starts=100, buffer_size=10_000, steps_per_iteration=200)


def test_smoke_and_predict():
    td3 = TD3("Pendulum-v1", seed=0, **SMALL)
    out = td3.train(400)
    assert out["timesteps"] == 400 and out["n_updates"] == 300
    assert np.isfinite(out["critic_loss"]) and np.isfinite(out["actor_loss"])
    assert isinstance(td3.collector.exploration, GaussianNoise) and td3.collector.exploration.sigma == 0.1
    obs = np.random.default_rng(0).normal(size=(10, 3)).astype(np.float32)
    a = td3.predict(obs, deterministic=True)
    assert a.shape == (10, 1) and np.all(np.abs(a) <= 2.0)
    np.testing.assert_array_equal(a, td3.predict(obs, deterministic=False))   # a deterministic policy
    with torch.no_grad():
        np.testing.assert_allclose(a, 2.0 * td3.actor(torch.from_numpy(obs)).numpy(), rtol=1e-6)


def test_default_networks_are_sb3s_400_300_and_ou_noise_option():
    td3 = TD3("Pendulum-v1")
    assert [w.shape[-1] for w in td3.critic.weights] == [400, 300, 1]
    ou = TD3("Pendulum-v1", noise_type="ornstein-uhlenbeck", exploration_noise=0.5, hidden=16)
    assert isinstance(ou.collector.exploration, OrnsteinUhlenbeckNoise) and ou.collector.exploration.sigma == 0.5


def test_delayed_actor_and_target_updates():
    td3 = TD3("Pendulum-v1", seed=0, policy_delay=3, tau=0.2, **{**SMALL, "learning_starts": 1000})
    with pytest.warns(OffPolicyWarning):
        td3.train(300)
    snap = lambda m: [p.detach().clone() for p in m.parameters()]      # noqa: E731
    for step in range(1, 7):
        actor, a_targ, c_targ = snap(td3.actor), snap(td3.actor_target), snap(td3.critic_target)
        values = td3._train_step()
        td3._n_updates += 1
        changed = any(not torch.equal(x, y) for x, y in zip(actor, td3.actor.parameters()))
        assert changed == (step % 3 == 0), step
        assert bool(torch.isnan(values[1])) == (step % 3 != 0)
        if step % 3 == 0:
            for old, new, online in zip(c_targ, td3.critic_target.parameters(), td3.critic.parameters()):
                torch.testing.assert_close(new, 0.8 * old + 0.2 * online.detach())
            for old, new, online in zip(a_targ, td3.actor_target.parameters(), td3.actor.parameters()):
                torch.testing.assert_close(new, 0.8 * old + 0.2 * online.detach())
        else:
            assert all(torch.equal(x, y) for x, y in zip(c_targ, td3.critic_target.parameters()))


def test_target_policy_smoothing_is_clipped_noise_around_the_target_action():
    td3 = TD3("Pendulum-v1", seed=0, target_noise=0.2, noise_clip=0.5, **SMALL)
    next_obs = torch.randn(8192, 3)
    rewards, not_done = torch.zeros(8192), torch.ones(8192)
    # A target critic that returns its action input: relu(a) - relu(-a) = a.
    with torch.no_grad():
        for w in td3.critic_target.weights:
            w.zero_()
        for b in td3.critic_target.biases:
            b.zero_()
        td3.critic_target.weight_0[:, 3, 0] = 1.0       # input 3 is the action (obs_dim 3)
        td3.critic_target.weight_0[:, 3, 1] = -1.0
        td3.critic_target.weight_1[:, 0, 0] = 1.0
        td3.critic_target.weight_1[:, 1, 1] = 1.0
        td3.critic_target.weight_2[:, 0, 0] = 1.0
        td3.critic_target.weight_2[:, 1, 0] = -1.0
        base = td3.actor_target(next_obs)[:, 0]
    smoothed = td3.td_target(rewards, not_done, next_obs) / 0.99
    noise = (smoothed - base)[base.abs() < 0.5]          # rows the [-1, 1] clamp cannot reach
    assert noise.numel() > 1000
    assert noise.abs().max() <= 0.5 + 1e-5 and noise.abs().max() > 0.45     # clipped at noise_clip
    assert float(noise.std()) == pytest.approx(0.2, rel=0.08)
    assert abs(float(noise.mean())) < 0.02


def test_save_load_and_exact_resume(tmp_path):
    a = TD3("Pendulum-v1", seed=4, **SMALL)
    a.train(350)
    path = tmp_path / "td3.pt"
    a.save(path, include_buffer=True)
    b = TD3.load(path)
    obs = np.zeros((2, 3), np.float32)
    np.testing.assert_array_equal(a.predict(obs), b.predict(obs))
    a.train(300)
    b.train(300)
    same_state(a, b)

    class SaveAndStop(Callback):
        def on_update(self, metrics):
            if self.num_timesteps >= 400:
                self.algo.save(tmp_path / "mid.pt", include_buffer=True)
                return False

    full = TD3("Pendulum-v1", seed=1, noise_type="ornstein-uhlenbeck", **SMALL)
    full.train(800)
    cut = TD3("Pendulum-v1", seed=1, noise_type="ornstein-uhlenbeck", callbacks=[SaveAndStop()], **SMALL)
    cut.train(800)
    resumed = TD3.load(tmp_path / "mid.pt")
    resumed.train(resume=True)
    same_state(full, resumed)


@pytest.mark.slow
def test_td3_learns_pendulum():
    """A real threshold: random play scores about -1200 on Pendulum (TD3 needs more steps than SAC)."""
    td3 = TD3("Pendulum-v1", seed=0, learning_rate=1e-3, hidden=64, gamma=0.98, learning_starts=1000)
    td3.train(8_000)
    result = evaluate_policy(td3, "Pendulum-v1", n_episodes=10, seed=100)
    assert result["mean_reward"] > -600, result
