"""The compiled rollout collection every on-policy algorithm uses by default
(rlox.algorithms._compiled_collection) against the torch collector (RolloutCollector).

Equivalence: the kernel draws actions from its own per-env xoshiro streams, not torch's
generator, so the same seed gives other trajectories. What must agree, and is tested:
  * exactly (within float32/float64 rounding): replaying the kernel's actions through the torch
    collector gives the same observations, rewards (truncation bootstrap included), dones, log
    probs, values, advantages and returns, row for row (same envs, seeds, layout, GAE);
  * in distribution (seeded, so deterministic, and each can fail): the kernel's sampled actions
    are calibrated against torch's distribution for the collected observations (a z test on
    Categorical counts, a KS test of standardised Gaussian noise), and episode lengths of one
    fixed policy collected by both paths pass a two-sample KS test.
"""
import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from scipy import stats

from rlox.algorithms import A2C, PPO, TRPO, VPG
from rlox.algorithms.hybrid_ppo import HybridPPO
from rlox.algorithms.recurrent_ppo import RecurrentPPO
from rlox.callbacks import Callback
from rlox.collectors import RolloutCollector

ALGOS = {PPO: dict(n_envs=2, n_steps=32, batch_size=32, n_epochs=2), A2C: dict(n_envs=2, n_steps=5),
         VPG: dict(n_envs=2, n_steps=32, vf_iters=2), TRPO: dict(n_envs=2, n_steps=32, vf_epochs=1, batch_size=32)}


class _Replay:
    """A policy that plays recorded actions ([T, N, ...]) and scores them with a torch policy."""

    def __init__(self, policy, actions):
        self.policy, self.actions, self.t = policy, actions, 0

    def act(self, obs, deterministic=False, generator=None):
        actions = self.actions[self.t]
        self.t += 1
        log_probs, _, values = self.policy.evaluate_actions(obs, actions)
        return actions, log_probs, values

    def get_value(self, obs):
        return self.policy.get_value(obs)


@pytest.mark.parametrize("env_id, n_steps", [("CartPole-v1", 60), ("Pendulum-v1", 210), ("Acrobot-v1", 40)])
def test_kernel_rollout_replays_through_the_torch_collector(env_id, n_steps):
    n = 3
    algo = PPO(env_id, seed=4, n_envs=n, n_steps=n_steps)
    assert algo.compiled_collection
    batch, _, _ = algo.compiled_collector.collect(algo.policy, n_steps)
    actions = batch.actions.reshape(n_steps, n, *batch.actions.shape[1:])
    ref = RolloutCollector(env_id, n_envs=n, seed=4, gamma=algo.config.gamma, gae_lambda=algo.config.gae_lambda)
    with torch.no_grad():
        want = ref.collect(_Replay(algo.policy, actions), n_steps)
    if env_id == "CartPole-v1":
        assert float(batch.dones.sum()) > 0                      # terminations inside the rollout
    if env_id == "Pendulum-v1":
        assert float(batch.dones.sum()) == n                     # the 200-step time limit: bootstrapped
    torch.testing.assert_close(batch.obs, want.obs, rtol=0, atol=0)
    torch.testing.assert_close(batch.actions, want.actions, rtol=0, atol=0)
    torch.testing.assert_close(batch.dones, want.dones, rtol=0, atol=0)
    # the kernel's forward is torch's float32 MLP (ext/rlox_mlp.pxd): float32 rounding only
    for key in ("log_probs", "values", "rewards"):
        torch.testing.assert_close(getattr(batch, key), getattr(want, key), rtol=1e-5, atol=1e-5, msg=key)
    for key in ("advantages", "returns"):       # (sums over up to 210 steps of the above)
        torch.testing.assert_close(getattr(batch, key), getattr(want, key), rtol=1e-4, atol=1e-4, msg=key)
    assert sorted(algo.compiled_collector.episode_lengths) == sorted(ref.episode_lengths)


# ---------------------------------------------------------------- one set of weights
def _scored_by_torch(algo, batch):
    """The batch's log-probs and values as the torch policy scores them now."""
    with torch.no_grad():
        log_probs, _, values = algo.policy.evaluate_actions(batch.obs, batch.actions)
    return log_probs, values.reshape(-1)


def _reads_torch_parameters(algo):
    want = [t.data_ptr() for net in (algo.policy.actor, algo.policy.critic) for t in net.parameters()]
    if not algo.policy.discrete:
        want.append(algo.policy.log_std.data_ptr())
    return algo.compiled_collector.policy.weight_pointers() == want


@pytest.mark.parametrize("cls, env_id, compiled_update", [
    (PPO, "CartPole-v1", True), (PPO, "Pendulum-v1", True), (A2C, "CartPole-v1", True),
    (A2C, "Acrobot-v1", False), (VPG, "CartPole-v1", None)])
def test_the_collection_reads_the_updated_weights_in_place(cls, env_id, compiled_update):
    """After updates (compiled: into PPOUpdateKernel's flat buffer; torch: into the torch
    parameters) the kernel samples with the new weights, read where the update wrote them:
    its pointers are the torch parameters' (so, compiled, inside the flat buffer), and the
    collected log-probs and values are torch's for the same rows."""
    kw = dict(ALGOS[cls])
    if compiled_update is not None:
        kw["compiled_update"] = compiled_update
    algo = cls(env_id, seed=1, **kw)
    first = algo.compiled_collector.policy.weight_pointers()
    algo.train(2 * kw["n_envs"] * kw["n_steps"])
    assert _reads_torch_parameters(algo)
    if compiled_update:
        flat = algo.update_kernel.flat_parameters
        assert all(flat.ctypes.data <= p < flat.ctypes.data + flat.nbytes for p in first)
        assert algo.compiled_collector.policy.weight_pointers() == first    # never re-pointed
    assert algo.compiled_collector.zero_copy
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 16)
    log_probs, values = _scored_by_torch(algo, batch)
    torch.testing.assert_close(batch.log_probs, log_probs, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(batch.values, values, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("compiled_update", [True, False])
def test_load_state_dict_and_replaced_tensors_are_picked_up(compiled_update):
    algo = PPO("CartPole-v1", seed=2, compiled_update=compiled_update, **ALGOS[PPO])
    other = PPO("CartPole-v1", seed=9, **ALGOS[PPO])
    other.train(64)
    algo.policy.load_state_dict(other.policy.state_dict())          # copied in place
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 16)
    torch.testing.assert_close(batch.values, _scored_by_torch(other, batch)[1], rtol=1e-5, atol=1e-5)
    # a parameter swapped for another tensor: the next rollout reads the new one
    with torch.no_grad():
        algo.policy.critic[-1].bias.data = algo.policy.critic[-1].bias.data + 3.0
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 16)
    assert _reads_torch_parameters(algo)
    torch.testing.assert_close(batch.values, _scored_by_torch(algo, batch)[1], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(batch.values, _scored_by_torch(other, batch)[1] + 3.0, rtol=1e-5, atol=1e-5)
    algo.train(64)                  # (the compiled update re-shares the swapped tensor; still in sync)
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 16)
    assert _reads_torch_parameters(algo) and algo.compiled_collector.zero_copy
    torch.testing.assert_close(batch.log_probs, _scored_by_torch(algo, batch)[0], rtol=1e-5, atol=1e-5)


def test_parameters_it_cannot_read_in_place_are_staged():
    """A non-contiguous parameter (or, with compiled_collection=True, one on another device)
    is read through a float32 CPU copy made at each rollout."""
    algo = A2C("CartPole-v1", seed=4, compiled_update=False, **ALGOS[A2C])
    w = algo.policy.actor[0].weight
    w.data = w.data.t().contiguous().t()                 # same values, column-major
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 8)
    assert not algo.compiled_collector.zero_copy
    torch.testing.assert_close(batch.log_probs, _scored_by_torch(algo, batch)[0], rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        w.mul_(2.0)                                      # staged again at the next rollout
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 8)
    torch.testing.assert_close(batch.log_probs, _scored_by_torch(algo, batch)[0], rtol=1e-5, atol=1e-5)


def test_sampled_actions_follow_the_torch_distribution():
    # Categorical: per row p_r = softmax(actor(obs_r)); the count of action 1 has mean sum p_r and
    # variance sum p_r (1 - p_r). A sampler off by a few percent fails |z| < 4 at this size.
    algo = PPO("CartPole-v1", seed=0, n_envs=16, n_steps=256)
    with torch.no_grad():
        for p in algo.policy.actor[-1].parameters():    # a policy far from uniform, state-dependent
            p.mul_(100.0)
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 256)
    with torch.no_grad():
        p1 = torch.softmax(algo.policy.actor(batch.obs), -1)[:, 1].double()
    assert 0.05 < float(p1.mean()) < 0.95 and float(p1.std()) > 0.05
    count = float((batch.actions == 1).sum())
    z = (count - float(p1.sum())) / float((p1 * (1 - p1)).sum().sqrt())
    assert abs(z) < 4, z
    # Gaussian: (a - mean) / std must be standard normal.
    algo = PPO("Pendulum-v1", seed=0, n_envs=16, n_steps=256, log_std_init=-0.5)
    batch, _, _ = algo.compiled_collector.collect(algo.policy, 256)
    with torch.no_grad():
        mean = algo.policy.actor(batch.obs)
    noise = ((batch.actions - mean) / algo.policy.log_std.exp()).detach().reshape(-1).numpy()
    assert stats.kstest(noise, "norm").pvalue > 1e-3


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Acrobot-v1"])
def test_episode_lengths_match_the_torch_path_in_distribution(env_id):
    """One fixed (initial) policy, 16 envs x 1024 steps through each path: the episode lengths
    must pass a two-sample KS test (p > 1e-3). The kernel with greedy actions instead of
    samples fails it (checked below), so the test can tell samplers apart."""
    kw = dict(seed=1, n_envs=16, n_steps=1024 if env_id == "CartPole-v1" else 2048)
    compiled = PPO(env_id, **kw)
    torch_path = PPO(env_id, compiled_collection=False, **kw)
    compiled.compiled_collector.collect(compiled.policy, kw["n_steps"])
    a = compiled.compiled_collector.episode_lengths
    torch_path.collector.collect(torch_path.policy, kw["n_steps"], generator=torch_path.torch_gen)
    b = np.asarray(torch_path.collector.episode_lengths)
    assert len(a) > 40 and len(b) > 40
    assert stats.ks_2samp(a, b).pvalue > 1e-3, (np.mean(a), np.mean(b))
    if env_id == "CartPole-v1":     # a wrong sampler (argmax) is caught
        with torch.no_grad():
            for p in compiled.policy.actor[-1].parameters():
                p.mul_(1e4)
        compiled.compiled_collector.collect(compiled.policy, kw["n_steps"])
        assert stats.ks_2samp(compiled.compiled_collector.episode_lengths, b).pvalue < 1e-3


# ---------------------------------------------------------------- when it runs
@pytest.mark.parametrize("cls", list(ALGOS), ids=lambda c: c.__name__)
def test_compiled_by_default_for_every_on_policy_algorithm(cls):
    algo = cls("CartPole-v1", seed=0, **ALGOS[cls])
    assert algo.compiled_collection and algo.compiled_collector is not None
    algo.train(64)
    assert algo.collector._obs is None                   # the torch collector never stepped
    off = cls("CartPole-v1", seed=0, compiled_collection=False, **ALGOS[cls])
    assert not off.compiled_collection and off.compiled_collector is None
    off.train(64)
    assert off.collector._obs is not None and off.config.compiled_collection is False


@pytest.mark.parametrize("env_id, extra, why", [
    ("LunarLander-v3", {}, "native envs only"),
    ("CartPole-v1", dict(normalize_obs=True), "without normalisation or wrappers"),
    ("CartPole-v1", dict(normalize_rewards=True), "without normalisation or wrappers"),
    ("CartPole-v1", dict(activation="relu"), "Tanh MLPs, got activation='relu'"),
    ("Pendulum-v1", dict(use_sde=True), "not gSDE"),
    ("CartPole-v1", dict(rollout_episodes=1), "not episode-bounded rollouts"),
])
def test_auto_falls_back_to_torch_and_true_says_why(env_id, extra, why):
    if env_id == "LunarLander-v3":
        pytest.importorskip("Box2D")
    algo = PPO(env_id, n_envs=2, n_steps=8, **extra)
    assert not algo.compiled_collection and why in algo._compiled_collection_why_not
    algo.train(16)
    with pytest.raises(ValueError, match=r"PPO\(compiled_collection=True\) cannot run here: .*" + re.escape(why)):
        PPO(env_id, n_envs=2, n_steps=8, compiled_collection=True, **extra)


def test_auto_rules_for_other_policies_envs_and_devices():
    env = gym.make("CartPole-v1")
    assert not PPO(env, n_envs=2).compiled_collection            # a gymnasium env object
    custom = PPO("CartPole-v1", n_envs=2).policy
    algo = PPO("CartPole-v1", n_envs=2, policy=custom)
    assert not algo.compiled_collection and "custom or recurrent" in algo._compiled_collection_why_not
    rec = RecurrentPPO("CartPole-v1", n_envs=2, n_steps=8, lstm_hidden_size=8)
    assert not rec.compiled_collection
    with pytest.raises(ValueError, match="custom or recurrent"):
        RecurrentPPO("CartPole-v1", n_envs=2, compiled_collection=True)
    with pytest.raises(ValueError, match=r"compiled_collection must be True, False or None.*'yes'"):
        PPO("CartPole-v1", compiled_collection="yes")
    with pytest.raises(ValueError, match=r"HybridPPO always collects in compiled code.*compiled_collection=False"):
        HybridPPO("CartPole-v1", compiled_collection=False)
    assert HybridPPO("CartPole-v1", n_envs=2).config.compiled_collection is True


# ---------------------------------------------------------------- per-step callbacks
class _CountSteps(Callback):
    def __init__(self, stop_at=None):
        super().__init__()
        self.calls, self.stop_at = 0, stop_at

    def on_step(self):
        self.calls += 1
        return None if self.stop_at is None or self.calls < self.stop_at else False


def test_per_step_callbacks_run_per_kernel_step_with_the_same_trajectories():
    kw = dict(seed=2, n_envs=3, n_steps=16, batch_size=48, n_epochs=1)
    plain, stepped = PPO("CartPole-v1", **kw), PPO("CartPole-v1", callbacks=[_CountSteps()], **kw)
    assert stepped.compiled_collection
    a, _, _ = plain.compiled_collector.collect(plain.policy, 16)
    b, _, _ = stepped.compiled_collector.collect(stepped.policy, 16, on_step=stepped.callbacks.on_step)
    for key in ("obs", "actions", "log_probs", "values", "rewards", "dones", "advantages", "returns"):
        torch.testing.assert_close(getattr(a, key), getattr(b, key), rtol=0, atol=0, msg=key)
    assert stepped.callbacks[0].calls == 16
    np.testing.assert_array_equal(np.sort(plain.compiled_collector.episode_lengths),
                                  np.sort(stepped.compiled_collector.episode_lengths))
    # a False from on_step stops training after the rollout, as on the torch path
    stopper = PPO("CartPole-v1", callbacks=[_CountSteps(stop_at=5)], **kw)
    stopper.train(48 * 4)
    assert stopper.num_timesteps == 48 and stopper.callbacks[0].calls == 16


# ---------------------------------------------------------------- switching and checkpoints
def test_switching_hands_the_episodes_over():
    algo = A2C("CartPole-v1", seed=3, n_envs=4, n_steps=8)
    algo.train(64)
    kstate = algo.compiled_collector.kernel.get_state()
    algo.compiled_collection = False
    np.testing.assert_array_equal(algo.collector._obs, kstate["obs"].reshape(4, 4).astype(np.float32))
    np.testing.assert_array_equal(algo.collector._ep_len, kstate["ep_len"])
    algo.train(64)
    assert algo.num_timesteps == 128
    algo.compiled_collection = True
    np.testing.assert_array_equal(algo.compiled_collector.kernel.obs, algo.collector._obs)
    algo.train(64)
    with pytest.raises(TypeError, match="compiled_collection must be True or False"):
        algo.compiled_collection = "no"
    relu = A2C("CartPole-v1", n_envs=2, activation="relu")
    with pytest.raises(ValueError, match="compiled_collection = True cannot run here: .*activation='relu'"):
        relu.compiled_collection = True


@pytest.mark.parametrize("cls", list(ALGOS), ids=lambda c: c.__name__)
@pytest.mark.parametrize("compiled", [True, False])
def test_choice_is_recorded_and_resume_is_exact(cls, compiled, tmp_path):
    kw = dict(ALGOS[cls], compiled_collection=None if compiled else False)
    cont = cls("CartPole-v1", seed=7, **kw)
    cont.train(128)
    m_cont = cont.train(128)
    first = cls("CartPole-v1", seed=7, **kw)
    first.train(128)
    first.save(tmp_path / "c.pt")
    ckpt = torch.load(tmp_path / "c.pt", weights_only=True)
    assert ckpt["state"]["compiled_collection"] is compiled
    resumed = cls.load(tmp_path / "c.pt")
    assert resumed.compiled_collection is compiled
    m_res = resumed.train(128)
    torch.testing.assert_close(torch.cat([p.reshape(-1) for p in resumed.policy.parameters()]),
                               torch.cat([p.reshape(-1) for p in cont.policy.parameters()]), rtol=0, atol=0)
    assert m_res["mean_reward"] == m_cont["mean_reward"] or np.isnan(m_cont["mean_reward"])


def test_checkpoint_switched_to_torch_resumes_on_torch(tmp_path):
    algo = PPO("CartPole-v1", seed=5, **ALGOS[PPO])
    algo.train(64)
    algo.compiled_collection = False                 # (config says None: auto; the state says torch)
    algo.train(64)
    algo.save(tmp_path / "c.pt")
    loaded = PPO.load(tmp_path / "c.pt")
    assert not loaded.compiled_collection
    np.testing.assert_array_equal(loaded.collector._obs, algo.collector._obs)


def test_checkpoints_from_before_compiled_collection_load_as_they_ran(tmp_path):
    """A PPO checkpoint without the field collected with torch, and resumes with torch; a
    HybridPPO one (kernel state, no field) resumes compiled."""
    algo = PPO("CartPole-v1", seed=8, compiled_collection=False, **ALGOS[PPO])
    algo.train(64)
    algo.save(tmp_path / "new.pt")
    ckpt = torch.load(tmp_path / "new.pt", weights_only=True)
    del ckpt["config"]["compiled_collection"], ckpt["state"]["compiled_collection"]
    torch.save(ckpt, tmp_path / "old.pt")
    loaded = PPO.load(tmp_path / "old.pt")
    assert loaded.config.compiled_collection is None and not loaded.compiled_collection
    np.testing.assert_array_equal(loaded.collector._obs, algo.collector._obs)
    hybrid = HybridPPO("CartPole-v1", seed=8, **ALGOS[PPO])
    hybrid.train(64)
    hybrid.save(tmp_path / "h.pt")
    ckpt = torch.load(tmp_path / "h.pt", weights_only=True)
    del ckpt["config"]["compiled_collection"], ckpt["state"]["compiled_collection"]
    torch.save(ckpt, tmp_path / "h_old.pt")
    loaded = HybridPPO.load(tmp_path / "h_old.pt")
    assert loaded.compiled_collection
    np.testing.assert_array_equal(loaded.kernel.obs, hybrid.kernel.obs)
