"""SAC: smoke, predict, save/load, exact resume, the update's maths, a learning test."""
import math

import numpy as np
import pytest
import torch

from rlox.algorithms.off_policy import OffPolicyWarning
from rlox.algorithms.sac import SAC
from rlox.callbacks import Callback
from rlox.evaluation import evaluate_policy

SMALL = dict(hidden=32, batch_size=64, learning_starts=100, buffer_size=10_000, steps_per_iteration=200)


def same_state(a, b):
    for (name, ma), mb in zip(a._modules().items(), b._modules().values()):
        for (k, x), y in zip(ma.state_dict().items(), mb.state_dict().values()):
            assert torch.equal(x, y), f"{name}.{k} differs"
    assert a.num_timesteps == b.num_timesteps and a._n_updates == b._n_updates
    assert list(a.episode_returns) == list(b.episode_returns)
    np.testing.assert_array_equal(a.collector.obs, b.collector.obs)
    n = len(a.buffer)
    assert n == len(b.buffer)
    np.testing.assert_array_equal(a.buffer.gather(np.arange(n))["next_obs"], b.buffer.gather(np.arange(n))["next_obs"])


def test_smoke_predict_scaled_to_the_bounds():
    sac = SAC("Pendulum-v1", seed=1, **SMALL)
    out = sac.train(400)
    assert out["timesteps"] == 400 and out["episodes"] == 2 and out["n_updates"] == 300
    for key in ("critic_loss", "actor_loss", "ent_coef", "ent_coef_loss", "sps"):
        assert np.isfinite(out[key]), key
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    det = sac.predict(obs, deterministic=True)
    assert det.shape == (16, 1) and det.dtype == np.float32
    assert np.all(np.abs(det) <= 2.0)                      # Pendulum's torque range
    np.testing.assert_array_equal(det, sac.predict(obs, deterministic=True))
    one = sac.predict(obs[0], deterministic=False)
    assert one.shape == (1,) and abs(float(one[0])) <= 2.0
    # predict maps tanh(mean) from [-1, 1] onto [-2, 2].
    with torch.no_grad():
        ref = 2.0 * sac.actor.deterministic(torch.from_numpy(obs)).numpy()
    np.testing.assert_allclose(det, ref, rtol=1e-6, atol=1e-6)


def test_gymnasium_env_object_with_kwargs_and_asymmetric_bounds():
    import gymnasium as gym

    env = gym.make("Pendulum-v1", g=5.0)
    sac = SAC(env_id=env, **SMALL)
    sac.train(250)
    assert sac.collector.env.env is env
    from tests._off_policy_envs import COUNTER_BOX_ID

    box = SAC(gym.make(COUNTER_BOX_ID), **SMALL)
    a = box.predict(np.zeros((64, 2), np.float32))
    assert a.min() >= -3.0 and a.max() <= 5.0 and a.shape == (64, 1)


def test_save_load_predict_round_trip(tmp_path):
    sac = SAC("Pendulum-v1", seed=3, **SMALL)
    sac.train(300)
    path = tmp_path / "sac.pt"
    sac.save(path)
    loaded = SAC.load(path)
    obs = np.random.default_rng(1).normal(size=(8, 3)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True), sac.predict(obs, deterministic=True))
    assert loaded.config == sac.config and torch.equal(loaded.log_alpha, sac.log_alpha)


@pytest.mark.parametrize("kw", [{}, {"use_sde": True, "n_envs": 2, "train_freq": 4, "gradient_steps": 2}],
                         ids=["default", "gsde-2envs"])
def test_load_then_continue_equals_continuing(tmp_path, kw):
    a = SAC("Pendulum-v1", seed=5, **SMALL, **kw)
    a.train(400)
    path = tmp_path / "a.pt"
    a.save(path, include_buffer=True)
    b = SAC.load(path)
    a.train(300)
    b.train(300)
    same_state(a, b)


def test_resume_equals_an_uninterrupted_run(tmp_path):
    path = tmp_path / "mid.pt"

    class SaveAndStop(Callback):
        def on_update(self, metrics):
            if self.num_timesteps >= 400:
                self.algo.save(path, include_buffer=True)
                return False

    full = SAC("Pendulum-v1", seed=2, **SMALL)
    full.train(800)
    cut = SAC("Pendulum-v1", seed=2, callbacks=[SaveAndStop()], **SMALL)
    cut.train(800)
    assert cut.num_timesteps == 400
    resumed = SAC.load(path)
    resumed.train(resume=True)
    same_state(full, resumed)


def test_temperature_and_target_updates_follow_the_formulas():
    sac = SAC("Pendulum-v1", seed=0, tau=0.1, **{**SMALL, "learning_starts": 1000})
    with pytest.warns(OffPolicyWarning):
        sac.train(300)                                      # collect only
    online = [p.detach().clone() for p in sac.critic.parameters()]
    target = [p.detach().clone() for p in sac.critic_target.parameters()]
    log_alpha = float(sac.log_alpha.detach())
    sac._train_step()
    sac._n_updates += 1
    # Polyak with tau = 0.1 against the critic *after* its update.
    for new_online, old_target, new_target in zip(sac.critic.parameters(), target, sac.critic_target.parameters()):
        torch.testing.assert_close(new_target, 0.9 * old_target + 0.1 * new_online.detach())
    assert any(not torch.equal(o, p) for o, p in zip(online, sac.critic.parameters()))
    # The temperature moved by one Adam step (|step| ~ lr).
    assert abs(float(sac.log_alpha.detach()) - log_alpha) == pytest.approx(3e-4, rel=0.05)
    # target_update_interval: no target update on the other steps.
    sac2 = SAC("Pendulum-v1", seed=0, target_update_interval=2, **{**SMALL, "learning_starts": 1000})
    with pytest.warns(OffPolicyWarning):
        sac2.train(300)
    before = [p.detach().clone() for p in sac2.critic_target.parameters()]
    sac2._n_updates = 1
    sac2._train_step()
    assert all(torch.equal(x, y) for x, y in zip(before, sac2.critic_target.parameters()))


@pytest.mark.parametrize("target_entropy, sign", [(100.0, 1), (-100.0, -1)])
def test_temperature_moves_towards_the_entropy_target(target_entropy, sign):
    """J(alpha) = E[-alpha (log pi + target_entropy)]: a target far above any entropy the policy
    can have raises alpha (more exploration), one far below lowers it, by one Adam step."""
    sac = SAC("Pendulum-v1", seed=0, target_entropy=target_entropy, **{**SMALL, "learning_starts": 1000})
    with pytest.warns(OffPolicyWarning):
        sac.train(300)                                      # collect only
    before = float(sac.log_alpha.detach())
    sac._train_step()
    assert (float(sac.log_alpha.detach()) - before) == pytest.approx(sign * 3e-4, rel=0.05)


def test_td_target_bootstraps_on_truncation_but_not_on_termination():
    sac = SAC("Pendulum-v1", seed=0, ent_coef=0.5, auto_entropy=False, **SMALL)
    next_obs = torch.randn(4, 3)
    rewards = torch.tensor([1.0, 1.0, -2.0, 0.0])
    not_done = torch.tensor([1.0, 0.0, 1.0, 0.0])       # rows 0, 2: truncated or running; 1, 3: terminated
    alpha = torch.tensor(0.5)
    gen_state = sac.torch_gen.get_state()
    target = sac.td_target(rewards, not_done, next_obs, alpha)
    sac.torch_gen.set_state(gen_state)
    with torch.no_grad():
        a, logp = sac.actor.sample(next_obs, sac.torch_gen)
        soft_v = sac.critic_target(next_obs, a).min(0).values - 0.5 * logp
    torch.testing.assert_close(target, rewards + not_done * 0.99 * soft_v)
    assert target[1] == 1.0 and target[3] == 0.0


def test_fixed_temperature():
    sac = SAC("Pendulum-v1", auto_entropy=False, ent_coef=0.2, **SMALL)
    assert sac.alpha_optimizer is None and not sac.log_alpha.requires_grad
    out = sac.train(250)
    assert out["ent_coef"] == pytest.approx(0.2) and out["ent_coef_loss"] == 0.0


@pytest.mark.slow
def test_sac_learns_pendulum():
    """A real threshold: random play scores about -1200 on Pendulum."""
    sac = SAC("Pendulum-v1", seed=0, learning_rate=1e-3, hidden=64)
    sac.train(4_000)
    result = evaluate_policy(sac, "Pendulum-v1", n_episodes=10, seed=100)
    assert result["mean_reward"] > -600, result
    assert math.isfinite(sac.mean_reward)
