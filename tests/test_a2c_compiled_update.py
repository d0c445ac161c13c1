"""A2C's compiled update (PPOUpdateKernel with loss="a2c": A2C's loss, torch's RMSprop or Adam
step) against A2C's torch update: the same weights, batches and optimizer state within float32
rounding, one and several updates; when it is chosen, switching, checkpoints.

Tolerances: parameters within rtol 1e-4 / atol 1e-6. RMSprop's first steps are about
lr * g / (sqrt(1 - alpha) |g| + eps), i.e. up to 10 lr per weight, so where a gradient is near
zero its float32 rounding (1e-9) moves the step by up to lr / eps * 1e-9 = 7e-8: inside atol.
"""
import math

import numpy as np
import pytest
import torch

from rlox import Trainer
from rlox._ext.ppo_update import PPOUpdateKernel
from rlox.algorithms import A2C
from rlox.algorithms._compiled_update import compiled_update_unsupported
from rlox.callbacks import Callback
from rlox.config import A2CConfig
from rlox.policies import DiscretePolicy

RTOL, ATOL = 1e-4, 1e-6
SMALL = dict(n_envs=4, n_steps=5)
METRICS = ("policy_loss", "value_loss", "entropy", "loss", "explained_variance")


def _flat(algo):
    return torch.cat([p.detach().reshape(-1) for p in algo.policy.parameters()]).numpy().copy()


def _torch_state(algo, key):
    opt = algo.optimizers["policy"]
    return np.concatenate([opt.state[p][key].numpy().reshape(-1) for p in algo.policy.parameters()])


CASES = [
    ("CartPole-v1", {}),
    ("CartPole-v1", dict(normalize_advantages=True, ent_coef=0.01, max_grad_norm=0.0)),
    ("CartPole-v1", dict(optimizer="adam", learning_rate=3e-3, hidden=[16, 8, 8])),
    ("Pendulum-v1", dict(ent_coef=0.01, normalize_advantages=True, log_std_init=-0.5)),
    ("Pendulum-v1", dict(normalize_obs=True, normalize_rewards=True, max_grad_norm=10.0, anneal_lr=True)),
]
IDS = ["cartpole", "cartpole-normalized-ent-noclip", "cartpole-adam-deep", "pendulum", "pendulum-normalized"]


@pytest.mark.parametrize("env_id, extra", CASES, ids=IDS)
def test_compiled_steps_match_torch_on_the_same_batches(env_id, extra):
    """Both updates from the same weights on the same batches, step by step: the weights, the
    metrics and the optimizer's state (RMSprop's square average, carried across the updates)
    stay within float32 rounding of each other."""
    kw = dict(SMALL, compiled_collection=False, **extra)
    a = A2C(env_id, seed=3, compiled_update=True, **kw)
    b = A2C(env_id, seed=3, compiled_update=False, **kw)
    assert a.compiled_update and not b.compiled_update
    assert a.update_kernel.optimizer == extra.get("optimizer", "rmsprop")
    np.testing.assert_array_equal(_flat(a), _flat(b))
    for it in range(4):
        batch = b._collect_rollout()
        before = _flat(b)
        ma, mb = a._update(batch), b._update(batch)
        np.testing.assert_allclose(_flat(a), _flat(b), rtol=RTOL, atol=ATOL, err_msg=f"update {it}")
        assert np.abs(_flat(b) - before).max() > 100 * ATOL      # (each step moves the weights)
        for key in METRICS:
            if math.isnan(mb[f"loss/{key}"]):
                assert math.isnan(ma[f"loss/{key}"]), key
            else:
                assert ma[f"loss/{key}"] == pytest.approx(mb[f"loss/{key}"], rel=1e-4, abs=1e-5), key
        assert set(ma) == set(mb)
    state = a.update_kernel.get_optimizer_state()
    assert state["step"] == 4
    for key in a.update_kernel.optimizer_state_keys:
        np.testing.assert_allclose(state[key], _torch_state(b, key), rtol=1e-3, atol=1e-9)
    assert all(int(s["step"]) == 4 for s in b.optimizers["policy"].state.values())


@pytest.mark.parametrize("env_id, extra", [CASES[0], CASES[3]], ids=["cartpole", "pendulum"])
def test_compiled_training_matches_the_torch_update(env_id, extra):
    """Ten iterations of train(): the same rollouts (the weights only differ by rounding, too
    little to flip a sampled action), so the same weights within float32 rounding."""
    kw = dict(SMALL, compiled_collection=False, **extra)
    a = A2C(env_id, seed=4, compiled_update=True, **kw)
    b = A2C(env_id, seed=4, compiled_update=False, **kw)
    ma, mb = a.train(200), b.train(200)
    np.testing.assert_allclose(_flat(a), _flat(b), rtol=1e-3, atol=1e-5)
    for key in ("policy_loss", "value_loss", "entropy", "loss"):
        assert ma[key] == pytest.approx(mb[key], rel=1e-3, abs=1e-4), key
    assert a.num_timesteps == b.num_timesteps == 200


def test_rmsprop_step_is_torchs_formula():
    """One kernel step with ent_coef = vf_coef = 0 and no clipping from zero state: the weights
    move by exactly RMSprop's first step, p - lr g / (sqrt((1 - alpha) g^2) + eps), with g the
    kernel's own gradient (eps after the sqrt, as torch places it; TF places it inside)."""
    pol = DiscretePolicy(4, 2, [8])
    k = PPOUpdateKernel(4, [8], 2, True, loss="a2c", optimizer="rmsprop", alpha=0.9, eps=1e-3,
                        clip_vloss=False, normalize_advantages=False, max_grad_norm=0.0, vf_coef=0.0)
    for name, p in pol.named_parameters():
        k.parameters()[name][...] = p.detach().numpy()
    g = np.random.default_rng(0)
    obs = g.normal(size=(6, 4)).astype(np.float32)
    batch = (obs, g.integers(0, 2, 6), np.zeros(6, np.float32), g.normal(size=6).astype(np.float32),
             np.zeros(6, np.float32), np.zeros(6, np.float32))
    p0 = k.flat_parameters.copy()
    m = k.step(*batch, lr=0.01)
    grad = k.flat_gradients.astype(np.float64)
    expected = p0 - 0.01 * grad / (np.sqrt(0.1 * grad ** 2) + 1e-3)
    np.testing.assert_allclose(k.flat_parameters, expected, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(k.get_optimizer_state()["square_avg"], 0.1 * grad ** 2, rtol=1e-5, atol=1e-12)
    assert set(m) == set(METRICS) and k.opt_step == k.adam_step == 1


# ---------------------------------------------------------------- when it runs
def test_default_is_compiled_on_cpu_and_shares_the_weights():
    algo = A2C("CartPole-v1", seed=0, **SMALL)
    assert algo.config.compiled_update is None and algo.compiled_update
    assert algo.update_kernel.loss == "a2c" and algo.update_kernel.optimizer == "rmsprop"
    assert algo.update_kernel.alpha == 0.99 and algo.update_kernel.eps == 1e-5
    flat = algo.update_kernel.flat_parameters
    assert all(np.shares_memory(p.detach().numpy(), flat) for p in algo.policy.parameters())
    before = _flat(algo)
    metrics = algo.train(40)
    np.testing.assert_array_equal(_flat(algo), flat)          # torch sees the kernel's steps
    assert not np.array_equal(before, flat)
    assert "loss" in metrics and "explained_variance" in metrics
    assert A2C("Pendulum-v1", seed=0, **SMALL).compiled_update
    assert not A2C("CartPole-v1", seed=0, compiled_update=False, **SMALL).compiled_update


# The fallback reasons (gSDE, ReLU, a custom policy) are tested for PPO and A2C together in
# test_compiled_update.py.


def test_another_device_is_a_reason():
    """(No accelerator needed: the reason is read from the algorithm's device.)"""
    algo = A2C("CartPole-v1", seed=0, **SMALL)
    algo.device = torch.device("cuda")
    assert compiled_update_unsupported(algo) == ("the compiled update runs on the CPU, but device is 'cuda'; "
                                                 "pass compiled_update=False to train with torch there")


def test_an_optimizer_the_kernel_cannot_step_falls_back_with_its_reason():
    class MomentumA2C(A2C):
        def _setup_optimizers(self):
            self.optimizers = {"policy": torch.optim.RMSprop(self.policy.parameters(), lr=7e-4, momentum=0.9)}
            self._setup_compiled_update()

    algo = MomentumA2C("CartPole-v1", seed=0, **SMALL)
    assert not algo.compiled_update
    with pytest.raises(ValueError, match=r"plain RMSprop \(no momentum, not centred\), got RMSprop; pass "
                                         r"compiled_update=False"):
        MomentumA2C("CartPole-v1", seed=0, compiled_update=True, **SMALL)


def test_a_loss_hook_switches_to_the_torch_update():
    class ScaleLoss(Callback):
        def on_minibatch_loss(self, loss, metrics):
            return 2.0 * loss

    algo = A2C("CartPole-v1", seed=0, callbacks=[ScaleLoss()], **SMALL)
    assert algo.compiled_update
    algo.train(40)
    assert not algo.compiled_update                          # switched, RMSprop's state carried over
    assert all(int(s["step"]) == 2 for s in algo.optimizers["policy"].state.values())


def test_config_field_is_checked_and_reaches_the_algorithm_through_the_trainer():
    assert A2CConfig().compiled_update is None
    with pytest.raises(ValueError, match=r"A2CConfig.compiled_update must be True, False or None.*got 'yes'"):
        A2CConfig(compiled_update="yes")
    trainer = Trainer("a2c", env="CartPole-v1", seed=0, config={"compiled_update": False, **SMALL})
    assert not trainer.algo.compiled_update
    assert Trainer("a2c", env="CartPole-v1", seed=0, config=SMALL).algo.compiled_update


# ---------------------------------------------------------------- switching and checkpoints
@pytest.mark.parametrize("optimizer", ["rmsprop", "adam"])
def test_switching_mid_run_carries_the_optimizer_state(optimizer):
    """compiled, torch, compiled iterations give the weights of torch-only iterations: the
    optimizer's state and step count cross each switch."""
    kw = dict(SMALL, optimizer=optimizer, compiled_collection=False)
    mixed = A2C("CartPole-v1", seed=5, **kw)
    ref = A2C("CartPole-v1", seed=5, compiled_update=False, **kw)
    mixed.train(60)
    kstate = mixed.update_kernel.get_optimizer_state()
    mixed.compiled_update = False
    key = mixed.update_kernel.optimizer_state_keys[-1]
    np.testing.assert_array_equal(_torch_state(mixed, key), kstate[key])
    assert all(int(s["step"]) == 3 for s in mixed.optimizers["policy"].state.values())
    mixed.train(60)
    mixed.compiled_update = True
    assert mixed.update_kernel.opt_step == 6
    mixed.train(60)
    ref.train(60), ref.train(60), ref.train(60)
    np.testing.assert_allclose(_flat(mixed), _flat(ref), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1"])
def test_save_load_resumes_exactly(env_id, tmp_path):
    cont = A2C(env_id, seed=6, **SMALL)
    cont.train(100)
    cont.train(100)
    first = A2C(env_id, seed=6, **SMALL)
    first.train(100)
    first.save(tmp_path / "c.pt")
    resumed = A2C.load(tmp_path / "c.pt")
    assert resumed.compiled_update
    assert all(np.shares_memory(p.detach().numpy(), resumed.update_kernel.flat_parameters)
               for p in resumed.policy.parameters())
    state, got = first.update_kernel.get_optimizer_state(), resumed.update_kernel.get_optimizer_state()
    assert got["step"] == state["step"] == 5
    np.testing.assert_array_equal(got["square_avg"], state["square_avg"])
    resumed.train(100)
    np.testing.assert_array_equal(_flat(resumed), _flat(cont))


def test_checkpoint_keeps_the_update_that_was_running(tmp_path):
    algo = A2C("CartPole-v1", seed=7, **SMALL)
    algo.train(40)
    algo.compiled_update = False
    algo.train(40)
    algo.save(tmp_path / "t.pt")
    loaded = A2C.load(tmp_path / "t.pt")
    assert loaded.config.compiled_update is None and not loaded.compiled_update
    loaded.compiled_update = True
    assert loaded.update_kernel.opt_step == 4
    torch_only = A2C("CartPole-v1", seed=8, compiled_update=False, **SMALL)
    torch_only.train(40)
    torch_only.save(tmp_path / "u.pt")
    again = A2C.load(tmp_path / "u.pt")
    assert not again.compiled_update
    again.compiled_update = True
    np.testing.assert_array_equal(again.update_kernel.get_optimizer_state()["square_avg"],
                                  _torch_state(torch_only, "square_avg"))
    again.train(40)
    assert again.update_kernel.opt_step == 4


# ---------------------------------------------------------------- the kernel's boundary
def test_kernel_rejects_what_a2c_does_not_have():
    with pytest.raises(ValueError, match=r"loss must be one of \('ppo', 'a2c'\), got 'trpo'"):
        PPOUpdateKernel(4, [8], 2, True, loss="trpo")
    with pytest.raises(ValueError, match=r"optimizer must be one of \('adam', 'rmsprop'\), got 'sgd'"):
        PPOUpdateKernel(4, [8], 2, True, optimizer="sgd")
    with pytest.raises(ValueError, match=r"pass clip_vloss=False with loss='a2c'"):
        PPOUpdateKernel(4, [8], 2, True, loss="a2c")
    with pytest.raises(ValueError, match=r"alpha \(RMSprop's smoothing constant\) must be in \[0, 1\), got 1.0"):
        PPOUpdateKernel(4, [8], 2, True, optimizer="rmsprop", alpha=1.0)
    k = PPOUpdateKernel(4, [8], 2, True, loss="a2c", clip_vloss=False, optimizer="rmsprop")
    n = k.n_params
    obs = np.zeros((3, 4), np.float32)
    z = np.zeros(3, np.float32)
    k.bind(obs, np.zeros(3, np.int64), z, z, z, z)
    with pytest.raises(ValueError, match=r"A2C's loss \(loss='a2c'\) has none: leave it None, got 0.2"):
        k.run_epoch(None, 3, 1e-3, 0.2)
    with pytest.raises(ValueError, match=r"has no approx_kl: leave it inf, got 0.1"):
        k.run_epoch(None, 3, 1e-3, None, 0.1)
    with pytest.raises(ValueError, match=r"get_adam_state is for optimizer='adam'; this kernel steps with 'rmsprop'"):
        k.get_adam_state()
    with pytest.raises(ValueError, match=r"the rmsprop optimizer's state is step and square_avg; got exp_avg"):
        k.set_optimizer_state(1, exp_avg=np.zeros(n, np.float32))
    with pytest.raises(ValueError, match=rf"square_avg has shape \({n - 1},\), expected \({n},\)"):
        k.set_optimizer_state(1, square_avg=np.zeros(n - 1, np.float32))
    with pytest.raises(ValueError, match=r"square_avg must be finite and >= 0"):
        k.set_optimizer_state(1, square_avg=np.full(n, -1.0, np.float32))
    with pytest.raises(ValueError, match="step must be an int >= 0"):
        k.set_optimizer_state(-1, square_avg=np.zeros(n, np.float32))
    assert not k.run_epoch(None, 3, 1e-3)
    assert set(k.metrics()) == set(METRICS)
    ppo = PPOUpdateKernel(4, [8], 2, True)
    ppo.bind(obs, np.zeros(3, np.int64), z, z, z, z)
    with pytest.raises(ValueError, match=r"clip_eps \(PPO's clip range, > 0\) is required for loss='ppo'"):
        ppo.run_epoch(None, 3, 1e-3)
