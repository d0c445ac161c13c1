"""PPO's compiled update (rlox.algorithms._compiled_update, PPOUpdateKernel) against PPO's torch
update: the same iterations within float32 rounding, when it is chosen, switching, checkpoints.
A2C's own cases are in test_a2c_compiled_update.py; the fallback reasons of both are here."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from rlox import Trainer
from rlox.algorithms import A2C, PPO
from rlox.callbacks import Callback
from rlox.algorithms.hybrid_ppo import HybridPPO
from rlox.config import PPOConfig
from rlox.plugins import ENV_REGISTRY
from rlox.policies import DiscretePolicy

SMALL = dict(n_envs=2, n_steps=32, batch_size=16, n_epochs=2)
METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "loss", "explained_variance")


def _flat(algo):
    return torch.cat([p.detach().reshape(-1) for p in algo.policy.parameters()]).numpy().copy()


class TwoDimActions(gym.Env):
    """Box(3,) observations, Box(2,) actions: the reward favours a = (obs[0], -obs[1])."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self._t = 0
        self._obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return self._obs, {}

    def step(self, action):
        a = np.asarray(action, np.float32)
        reward = -float((a[0] - self._obs[0]) ** 2 + (a[1] + self._obs[1]) ** 2)
        self._t += 1
        self._obs = self.np_random.uniform(-1, 1, 3).astype(np.float32)
        return self._obs, reward, False, self._t >= 20, {}


ENV_REGISTRY.register("test/TwoDimActions-v0", TwoDimActions, override=True)


@pytest.mark.parametrize("env_id, extra", [
    ("CartPole-v1", {}),
    ("CartPole-v1", dict(anneal_lr=True, anneal_clip=True, clip_vloss=False, max_grad_norm=0.0)),
    ("Pendulum-v1", dict(ent_coef=0.01, normalize_advantages=False)),
    ("Pendulum-v1", dict(normalize_obs=True, normalize_rewards=True, max_grad_norm=10.0)),
    ("test/TwoDimActions-v0", dict(log_std_init=-0.5, hidden=[16, 8, 8])),
], ids=["cartpole", "cartpole-schedules", "pendulum", "pendulum-normalized", "two-dim-actions"])
def test_compiled_update_matches_the_torch_update(env_id, extra):
    """Three iterations from the same seed: the same rollouts (the weights only differ by float32
    rounding, too little to flip a sampled action), the same shuffles, and weights and metrics
    within float32 rounding after three updates of 2 epochs x 4 minibatches. (Torch collection:
    its log probs come from the same float32 forward as the update's, which keeps the two runs
    within these tolerances; tests/test_hybrid_ppo.py compares them under compiled collection.)

    With schedules, the three updates are the first three of a four-iteration run: a run's last
    update has anneal_clip's clip range at 0 (as SB3's), where the clipped objective keeps a
    sample's gradient or drops it on the sign of ratio - 1, i.e. on one ulp of log-prob rounding
    that the two forwards do not share; that update is compared on its schedule values below."""
    budget = 256 if extra.get("anneal_clip") else 192
    a = PPO(env_id, seed=3, compiled_update=True, compiled_collection=False, callbacks=[_StopAt(192)],
            **SMALL, **extra)
    b = PPO(env_id, seed=3, compiled_update=False, compiled_collection=False, callbacks=[_StopAt(192)],
            **SMALL, **extra)
    assert a.compiled_update and not b.compiled_update
    np.testing.assert_array_equal(_flat(a), _flat(b))
    ma, mb = a.train(budget), b.train(budget)
    np.testing.assert_allclose(_flat(a), _flat(b), rtol=1e-4, atol=1e-6)   # (an iteration moves them ~1e-3)
    for key in METRICS:
        assert ma[key] == pytest.approx(mb[key], rel=1e-3, abs=1e-4), key
    assert ma["n_updates"] == mb["n_updates"] == 8
    assert ma["clip_range"] == mb["clip_range"] and ma["learning_rate"] == mb["learning_rate"]
    assert a.torch_gen.get_state().equal(b.torch_gen.get_state())   # the same shuffles drawn
    assert a.num_timesteps == b.num_timesteps == 192
    if extra.get("anneal_clip"):     # the third of four updates: 1/4 of the run left
        assert ma["clip_range"] == pytest.approx(0.25 * a.config.clip_eps)
        assert ma["learning_rate"] == pytest.approx(0.5 * a.config.learning_rate)
        ma, mb = a.train(64), b.train(64)    # a run's last update: clip range at its floor
        assert ma["clip_range"] == mb["clip_range"] == pytest.approx(0.0, abs=1e-7)
        assert ma["n_updates"] == mb["n_updates"] == 8


class _StopAt(Callback):
    """Stops a run once ``steps`` env steps are done (after that iteration's update)."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps

    def on_update(self, metrics):
        return self.num_timesteps < self.steps


@pytest.mark.parametrize("cls, atol", [(PPO, 1e-6), (HybridPPO, 5e-6)], ids=["ppo", "hybrid_ppo"])
def test_target_kl_stops_like_the_torch_update(cls, atol):
    kw = dict(SMALL, n_epochs=10, target_kl=1e-4, learning_rate=3e-3)
    a = cls("CartPole-v1", seed=4, compiled_update=True, **kw)
    b = cls("CartPole-v1", seed=4, compiled_update=False, **kw)
    ma, mb = a.train(64), b.train(64)
    assert ma["n_updates"] == mb["n_updates"] < 10 * 4
    assert ma["epochs_done"] == mb["epochs_done"]
    np.testing.assert_allclose(_flat(a), _flat(b), rtol=1e-4, atol=atol)


# ---------------------------------------------------------------- when it runs
def test_default_is_compiled_on_cpu_with_the_default_policy():
    algo = PPO("CartPole-v1", seed=0, **SMALL)
    assert algo.config.compiled_update is None and algo.compiled_update
    flat = algo.update_kernel.flat_parameters
    assert all(np.shares_memory(p.detach().numpy(), flat) for p in algo.policy.parameters())
    before = _flat(algo)
    algo.train(64)
    np.testing.assert_array_equal(_flat(algo), flat)          # torch sees the kernel's steps
    assert not np.array_equal(before, flat)
    assert PPO("Pendulum-v1", seed=0, **SMALL).compiled_update
    assert not PPO("CartPole-v1", seed=0, compiled_update=False, **SMALL).compiled_update


@pytest.mark.parametrize("cls, small, steps", [(PPO, SMALL, 64), (A2C, dict(n_envs=4, n_steps=5), 40)],
                         ids=["PPO", "A2C"])
@pytest.mark.parametrize("env_id, kwargs, message", [
    ("Pendulum-v1", dict(use_sde=True), r"not gSDE \(use_sde=True\); pass compiled_update=False"),
    ("CartPole-v1", dict(activation="relu"), r"supports Tanh MLPs, got activation='relu'; pass compiled_update=False"),
    ("CartPole-v1", dict(policy="custom"), r"not a custom policy=; pass compiled_update=False"),
], ids=["use_sde", "relu", "custom-policy"])
def test_torch_where_it_cannot_run_and_a_clear_error_when_asked_for(cls, small, steps, env_id, kwargs, message):
    if kwargs.get("policy") == "custom":         # even rlox's own class, when the caller built it
        kwargs = dict(policy=DiscretePolicy(4, 2, hidden=64))
    algo = cls(env_id, seed=0, **small, **kwargs)
    assert not algo.compiled_update and algo.update_kernel is None
    algo.train(steps)                                         # the torch update trains it
    name = cls.__name__
    with pytest.raises(ValueError, match=name + r"\(compiled_update=True\) cannot run here: .*" + message):
        cls(env_id, seed=0, compiled_update=True, **small, **kwargs)
    with pytest.raises(ValueError, match=name + r".compiled_update = True cannot run here: .*" + message):
        algo.compiled_update = True
    assert not algo.compiled_update


def test_config_field_is_checked_and_reaches_the_algorithm_through_the_trainer():
    assert PPOConfig().compiled_update is None
    with pytest.raises(ValueError, match=r"PPOConfig.compiled_update must be True, False or None.*got 'yes'"):
        PPOConfig(compiled_update="yes")
    with pytest.raises(ValueError, match="compiled_update must be True, False or None"):
        PPO("CartPole-v1", compiled_update=1)
    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config={"compiled_update": False, **SMALL})
    assert not trainer.algo.compiled_update
    assert Trainer("ppo", env="CartPole-v1", seed=0, config=SMALL).algo.compiled_update


@pytest.mark.gpu
@pytest.mark.parametrize("cls", [PPO, HybridPPO], ids=["ppo", "hybrid_ppo"])
def test_cuda_device_uses_torch(cls):
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    algo = cls("CartPole-v1", seed=0, device="cuda", **SMALL)
    assert not algo.compiled_update and algo.update_kernel is None
    algo.train(64)
    with pytest.raises(ValueError, match="compiled update runs on the CPU, but device is 'cuda'"):
        cls("CartPole-v1", device="cuda", compiled_update=True)


# ---------------------------------------------------------------- switching and checkpoints
def test_switching_mid_run_carries_adam_state():
    """compiled, torch, compiled iterations give the weights of three torch iterations: Adam's
    moments and step count cross each switch (a lost state would change the bias correction)."""
    mixed = PPO("CartPole-v1", seed=5, **SMALL)
    ref = PPO("CartPole-v1", seed=5, compiled_update=False, **SMALL)
    mixed.train(64)
    kstate = mixed.update_kernel.get_adam_state()
    mixed.compiled_update = False
    opt, params = mixed.optimizers["policy"], list(mixed.policy.parameters())
    np.testing.assert_array_equal(
        np.concatenate([opt.state[p]["exp_avg_sq"].numpy().reshape(-1) for p in params]), kstate["exp_avg_sq"])
    assert all(int(opt.state[p]["step"]) == kstate["step"] == 8 for p in params)
    mixed.train(64)
    mixed.compiled_update = True
    assert mixed.update_kernel.adam_step == 16
    mixed.train(64)
    ref.train(64), ref.train(64), ref.train(64)
    np.testing.assert_allclose(_flat(mixed), _flat(ref), rtol=1e-4, atol=1e-6)
    with pytest.raises(TypeError, match="compiled_update must be True or False"):
        mixed.compiled_update = "yes"


@pytest.mark.parametrize("env_id, extra", [
    ("CartPole-v1", {}),
    ("Pendulum-v1", dict(normalize_obs=True, normalize_rewards=True, anneal_clip=True)),
], ids=["cartpole", "pendulum-normalized"])
def test_save_load_resumes_exactly(env_id, extra, tmp_path):
    kw = dict(SMALL, **extra)
    cont = PPO(env_id, seed=6, **kw)
    cont.train(128)
    cont.train(128)
    first = PPO(env_id, seed=6, **kw)
    first.train(128)
    first.save(tmp_path / "c.pt")
    resumed = PPO.load(tmp_path / "c.pt")
    assert resumed.compiled_update
    assert all(np.shares_memory(p.detach().numpy(), resumed.update_kernel.flat_parameters)
               for p in resumed.policy.parameters())
    state, got = first.update_kernel.get_adam_state(), resumed.update_kernel.get_adam_state()
    assert got["step"] == state["step"] == 16
    np.testing.assert_array_equal(got["exp_avg"], state["exp_avg"])
    np.testing.assert_array_equal(got["exp_avg_sq"], state["exp_avg_sq"])
    resumed.train(128)
    np.testing.assert_array_equal(_flat(resumed), _flat(cont))
    if extra.get("normalize_obs"):
        np.testing.assert_array_equal(resumed.obs_normalizer().obs_rms.mean(), cont.obs_normalizer().obs_rms.mean())


@pytest.mark.parametrize("cls", [PPO, HybridPPO], ids=["ppo", "hybrid_ppo"])
def test_checkpoint_keeps_the_update_that_was_running(cls, tmp_path):
    """Either update reads the other's checkpoint; a resumed run continues with the update it
    was saved with, and a switched one from the same Adam moments."""
    algo = cls("CartPole-v1", seed=7, **SMALL)
    algo.train(64)
    algo.compiled_update = False
    algo.train(64)
    algo.save(tmp_path / "t.pt")
    loaded = cls.load(tmp_path / "t.pt")
    assert loaded.config.compiled_update is None and not loaded.compiled_update
    loaded.compiled_update = True
    assert loaded.update_kernel.adam_step == 16
    torch_only = cls("CartPole-v1", seed=8, compiled_update=False, **SMALL)
    torch_only.train(64)
    torch_only.save(tmp_path / "u.pt")
    again = cls.load(tmp_path / "u.pt")
    assert not again.compiled_update
    again.compiled_update = True
    assert again.update_kernel.adam_step == 8
    again.train(64)
    assert again.update_kernel.adam_step == 16


@pytest.mark.parametrize("cls", [PPO, HybridPPO], ids=["ppo", "hybrid_ppo"])
def test_replaced_parameter_tensor_is_shared_again(cls):
    algo = cls("CartPole-v1", seed=8, **SMALL)
    w = algo.policy.actor[0].weight
    with torch.no_grad():
        w.data = w.data.clone() + 0.01              # a new tensor, no longer the kernel's memory
    algo.train(64)
    assert np.shares_memory(w.detach().numpy(), algo.update_kernel.flat_parameters)
