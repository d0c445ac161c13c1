"""The compiled collection's policy (rlox._ext.hybrid.CompiledPolicy) and rollout kernel
against torch: the same float32 MLP (ext/rlox_mlp.pxd) reading the torch parameters in place."""
import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st

from rlox._ext.hybrid import CompiledPolicy


def _mlp(sizes, seed):
    torch.manual_seed(seed)
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(torch.nn.Tanh())
    return torch.nn.Sequential(*layers)


def _pairs(net):
    return [(m.weight.detach().numpy(), m.bias.detach().numpy()) for m in net if isinstance(m, torch.nn.Linear)]


@given(st.integers(1, 8), st.lists(st.integers(1, 33), min_size=0, max_size=3), st.integers(1, 5),
       st.integers(0, 20), st.integers(0, 1000))
def test_forward_matches_torch(obs_dim, hidden, n_out, batch, seed):
    actor = _mlp([obs_dim, *hidden, n_out], seed)
    critic = _mlp([obs_dim, *hidden, 1], seed + 1)
    pol = CompiledPolicy(_pairs(actor), _pairs(critic), discrete=True, n_streams=max(batch, 1))
    obs = np.random.default_rng(seed).normal(size=(batch, obs_dim))
    head, values = pol.forward(obs)
    with torch.no_grad():
        t = torch.as_tensor(obs, dtype=torch.float64)
        ref_head = actor.double()(t).numpy()
        ref_val = critic.double()(t).numpy()[:, 0]
    assert head.dtype == values.dtype == np.float32
    np.testing.assert_allclose(head, ref_head, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(values, ref_val, rtol=1e-5, atol=1e-5)
    # torch's own float32 forward on the float32 inputs: float32 rounding only
    with torch.no_grad():
        t32 = torch.as_tensor(obs, dtype=torch.float32)
        np.testing.assert_allclose(head, actor.float()(t32).numpy(), rtol=2e-6, atol=2e-6)
        np.testing.assert_allclose(values, critic.float()(t32).numpy()[:, 0], rtol=2e-6, atol=2e-6)


def test_categorical_sampling_distribution_and_logp(n_threads):
    actor = _mlp([3, 16, 4], 0)
    critic = _mlp([3, 16, 1], 1)
    n = 4000
    pol = CompiledPolicy(_pairs(actor), _pairs(critic), discrete=True, n_streams=n, seed=7)
    obs = np.tile(np.array([[0.3, -0.2, 0.5]]), (n, 1))
    actions, logp, values = pol.act(obs)
    with torch.no_grad():
        logits = actor(torch.as_tensor(obs[:1], dtype=torch.float32)).double().numpy()[0]
    probs = np.exp(logits - logits.max())
    probs /= probs.sum()
    freq = np.bincount(actions, minlength=4) / n
    np.testing.assert_allclose(freq, probs, atol=0.03)
    np.testing.assert_allclose(logp, np.log(probs[actions]), rtol=1e-5, atol=1e-6)
    assert actions.dtype == np.int64 and values.shape == (n,)
    # Same seed -> same draws, at any thread count (one stream per row).
    pol.reseed(7)
    again, _, _ = pol.act(obs)
    np.testing.assert_array_equal(again, actions)


def test_gaussian_sampling_moments_and_logp():
    actor = _mlp([2, 8, 2], 3)
    critic = _mlp([2, 8, 1], 4)
    log_std = np.array([-0.5, 0.2], dtype=np.float32)
    n = 5000
    pol = CompiledPolicy(_pairs(actor), _pairs(critic), discrete=False, log_std=log_std, n_streams=n)
    obs = np.tile(np.array([[0.1, 0.9]]), (n, 1))
    actions, logp, _ = pol.act(obs)
    mean, _ = pol.forward(obs[:1])
    assert actions.shape == (n, 2)
    np.testing.assert_allclose(actions.mean(0), mean[0], atol=0.05)
    np.testing.assert_allclose(actions.std(0), np.exp(log_std), rtol=0.05)
    dist = torch.distributions.Normal(torch.as_tensor(mean[0]), torch.as_tensor(log_std).exp())
    ref = dist.log_prob(torch.as_tensor(actions)).sum(-1).numpy()      # float32, as the update scores them
    np.testing.assert_allclose(logp, ref, rtol=1e-5, atol=1e-5)


def test_results_do_not_depend_on_thread_count():
    import rlox

    actor, critic = _mlp([4, 64, 64, 2], 5), _mlp([4, 64, 64, 1], 6)
    obs = np.random.default_rng(0).normal(size=(256, 4))
    out = []
    for n in (1, 2):
        before = rlox.get_num_threads()
        rlox.set_num_threads(n)
        try:
            pol = CompiledPolicy(_pairs(actor), _pairs(critic), discrete=True, n_streams=256, seed=1)
            out.append(pol.act(obs))
        finally:
            rlox.set_num_threads(before)
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_weights_are_read_in_place_and_set_weights_repoints():
    actor, critic = _mlp([4, 8, 2], 0), _mlp([4, 8, 1], 1)
    pol = CompiledPolicy(_pairs(actor), _pairs(critic), discrete=True)
    assert pol.weight_pointers() == [p.data_ptr() for net in (actor, critic) for p in net.parameters()]
    obs = np.ones((1, 4), np.float32)
    before, _ = pol.forward(obs)
    with torch.no_grad():
        for p in actor.parameters():
            p.add_(0.5)                                 # in place: seen without any call
    after, _ = pol.forward(obs)
    assert not np.allclose(before, after)
    with torch.no_grad():
        np.testing.assert_allclose(after, actor(torch.as_tensor(obs)).numpy(), rtol=1e-6, atol=1e-6)
    other = _mlp([4, 8, 2], 7)                          # other tensors: set_weights re-points
    pol.set_weights(_pairs(other), _pairs(critic))
    with torch.no_grad():
        np.testing.assert_allclose(pol.forward(obs)[0], other(torch.as_tensor(obs)).numpy(), rtol=1e-6, atol=1e-6)
    del other                                           # the policy keeps the arrays alive
    import gc
    gc.collect()
    pol.forward(obs)


def test_bad_input():
    actor, critic = _mlp([4, 8, 2], 0), _mlp([4, 8, 1], 1)
    with pytest.raises(ValueError, match="critic must end in 1 output, got 2"):
        CompiledPolicy(_pairs(actor), _pairs(actor), discrete=True)
    with pytest.raises(ValueError, match="actor takes 4 inputs but critic takes 3"):
        CompiledPolicy(_pairs(actor), _pairs(_mlp([3, 8, 1], 0)), discrete=True)
    with pytest.raises(ValueError, match="log_std is required"):
        CompiledPolicy(_pairs(actor), _pairs(critic), discrete=False)
    with pytest.raises(ValueError, match="non-empty list"):
        CompiledPolicy([], _pairs(critic), discrete=True)
    pol = CompiledPolicy(_pairs(actor), _pairs(critic), discrete=True, n_streams=2)
    with pytest.raises(ValueError, match=r"obs has shape \(3, 5\), expected \(B, 4\)"):
        pol.forward(np.zeros((3, 5)))
    with pytest.raises(ValueError, match="obs has 3 rows but the policy has 2 RNG streams"):
        pol.act(np.zeros((3, 4)))
    bad = _pairs(actor)
    bad[0] = (bad[0][0].astype(np.float64), bad[0][1])
    with pytest.raises(TypeError, match="actor layer 0 weight has dtype float64, expected float32"):
        pol.set_weights(bad, _pairs(critic))
    bad[0] = (np.asfortranarray(np.ones((8, 4), np.float32)), bad[0][1])
    with pytest.raises(ValueError, match="actor layer 0 weight is not C-contiguous"):
        pol.set_weights(bad, _pairs(critic))
    bad[0] = (torch.ones(8, 4), bad[0][1])
    with pytest.raises(TypeError, match=r"actor layer 0 weight must be a NumPy float32 array .*got Tensor"):
        pol.set_weights(bad, _pairs(critic))
    with pytest.raises(ValueError, match=r"actor layer 0 weight has shape \(8, 3\), expected \(8, 4\)"):
        pol.set_weights(_pairs(_mlp([3, 8, 2], 0)), _pairs(critic))
    empty_head, empty_val = pol.forward(np.zeros((0, 4)))
    assert empty_head.shape == (0, 2) and empty_val.shape == (0,)


# ---------------------------------------------------------------- the compiled rollout loop
from rlox._ext.hybrid import RolloutKernel  # noqa: E402


def _kernel(env_id, n_envs, seed, max_steps=0, hidden=(16,)):
    import rlox

    vec = rlox.VecEnv(n=1, seed=0, env_id=env_id)
    obs_dim = vec.single_observation_space.shape[0]
    space = vec.single_action_space
    discrete = hasattr(space, "n")
    n_out = int(space.n) if discrete else space.shape[0]
    actor, critic = _mlp([obs_dim, *hidden, n_out], seed), _mlp([obs_dim, *hidden, 1], seed + 1)
    pol = CompiledPolicy(_pairs(actor), _pairs(critic), discrete=discrete,
                         log_std=None if discrete else np.zeros(n_out, np.float32), n_streams=n_envs, seed=seed)
    return pol, RolloutKernel(pol, env_id, n_envs, seed=seed, max_steps=max_steps), critic


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "Acrobot-v1", "MountainCar-v0",
                                    "MountainCarContinuous-v0"])
def test_rollout_replays_exactly_through_vecenv(env_id, n_threads):
    """Feeding the kernel's actions to rlox.VecEnv(n, seed) reproduces its observations,
    rewards and dones; truncated steps carry reward + gamma * V(final observation)."""
    import rlox

    n, T, seed, gamma = 3, 40, 11, 0.9
    pol, kern, critic = _kernel(env_id, n, seed, max_steps=15)
    roll = kern.collect(T, gamma)
    vec = rlox.VecEnv(n=n, seed=seed, env_id=env_id, max_episode_steps=15)
    obs = vec.reset_all()
    np.testing.assert_allclose(roll["obs"][:, 0], obs, rtol=0, atol=0)
    n_done = 0
    for t in range(T):
        np.testing.assert_array_equal(roll["obs"][:, t], obs)
        acts = roll["actions"][:, t]
        acts = acts.astype(np.int64) if acts.ndim == 1 and hasattr(vec.single_action_space, "n") else acts
        out = vec.step_all(acts)
        done = out["terminated"] | out["truncated"]
        np.testing.assert_array_equal(roll["dones"][:, t], done.astype(np.float32))
        boot = out["truncated"] & ~out["terminated"]
        final_v = critic(torch.as_tensor(out["terminal_obs"], dtype=torch.float32)).detach().double().numpy()[:, 0]
        expect = np.asarray(out["rewards"], np.float64) + np.where(boot, gamma * final_v, 0.0)
        np.testing.assert_allclose(roll["rewards"][:, t], expect, rtol=1e-5, atol=1e-5)
        n_done += int(done.sum())
        obs = out["obs"]
    np.testing.assert_array_equal(kern.obs, obs)
    assert len(roll["episode_returns"]) == n_done and n_done > 0
    _, values = pol.forward(obs)
    np.testing.assert_array_equal(roll["last_values"], values)


def test_rollout_thread_invariant_and_log_probs_match_torch():
    import rlox

    out = []
    for nt in (1, 2):
        before = rlox.get_num_threads()
        rlox.set_num_threads(nt)
        try:
            pol, kern, _ = _kernel("CartPole-v1", 16, 3, hidden=(64, 64))
            out.append(kern.collect(64, 0.99))
        finally:
            rlox.set_num_threads(before)
    for key in out[0]:
        np.testing.assert_array_equal(out[0][key], out[1][key])
    roll = out[0]
    head, values = pol.forward(roll["obs"].reshape(-1, 4))
    logits = torch.as_tensor(head)
    ref = torch.distributions.Categorical(logits=logits).log_prob(
        torch.as_tensor(roll["actions"].reshape(-1).astype(np.int64))).numpy()
    np.testing.assert_allclose(roll["log_probs"].reshape(-1), ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(roll["values"].reshape(-1), values, rtol=1e-6, atol=1e-6)
    # CartPole pays 1 per step: finished episodes' returns equal their lengths.
    np.testing.assert_array_equal(roll["episode_returns"], roll["episode_lengths"])


def test_rollout_with_many_envs_is_thread_invariant():
    """From 256 envs the per-step env loop runs as a prange (and the batched forward is large
    enough for OpenBLAS to thread, which the kernel holds to one thread): same results."""
    import rlox

    out = []
    for nt in (1, 2):
        before = rlox.get_num_threads()
        rlox.set_num_threads(nt)
        try:
            _, kern, _ = _kernel("Pendulum-v1", 256, 5, max_steps=6, hidden=(64, 64))
            out.append(kern.collect(8, 0.9))
        finally:
            rlox.set_num_threads(before)
    for key in out[0]:
        np.testing.assert_array_equal(out[0][key], out[1][key])
    assert out[0]["dones"].sum() == 256                  # every env truncated once: bootstrapped


def test_rollout_bad_input():
    pol, kern, _ = _kernel("CartPole-v1", 2, 0)
    with pytest.raises(ValueError, match="not a native env"):
        RolloutKernel(pol, "LunarLander-v3", 2)
    with pytest.raises(ValueError, match="n_envs is 3 but the policy has 2 RNG streams"):
        RolloutKernel(pol, "CartPole-v1", 3)
    with pytest.raises(ValueError, match="policy takes 4 inputs but Pendulum-v1 observations have 3"):
        RolloutKernel(pol, "Pendulum-v1", 2)
    with pytest.raises(ValueError, match="Acrobot-v1 has 3 discrete actions"):
        RolloutKernel(CompiledPolicy(_pairs(_mlp([6, 8, 2], 0)), _pairs(_mlp([6, 8, 1], 0)), True,
                                     n_streams=2), "Acrobot-v1", 2)
    with pytest.raises(ValueError, match="n_steps must be >= 1, got 0"):
        kern.collect(0, 0.99)
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\], got 1.5"):
        kern.collect(4, 1.5)


# ---------------------------------------------------------------- the compiled update
from rlox.algorithms.hybrid_ppo import HybridPPO  # noqa: E402

SMALL = dict(n_envs=2, n_steps=32, batch_size=16, n_epochs=2)


def _flat(algo):
    return torch.cat([p.detach().reshape(-1) for p in algo.policy.parameters()]).numpy().copy()


def test_compiled_update_is_the_default_and_shares_the_weights():
    algo = HybridPPO("CartPole-v1", seed=0, **SMALL)
    assert algo.compiled_update and algo.update_kernel is not None
    flat = algo.update_kernel.flat_parameters
    assert all(np.shares_memory(p.detach().numpy(), flat) for p in algo.policy.parameters())
    before = _flat(algo)
    metrics = algo.train(128)
    after = _flat(algo)
    assert not np.array_equal(before, after)
    np.testing.assert_array_equal(after, flat)                 # torch sees the kernel's steps
    assert {"policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "loss",
            "explained_variance", "n_updates", "epochs_done"} <= set(metrics)
    assert metrics["n_updates"] == 2 * (64 // 16)
    # the collection reads the same buffer, in place: nothing was copied to it after the update
    ptrs = algo.compiled.weight_pointers()
    lo, hi = flat.ctypes.data, flat.ctypes.data + flat.nbytes
    assert all(lo <= p < hi for p in ptrs) and sorted(set(ptrs)) == sorted(ptrs)
    obs = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    head, values = algo.compiled.forward(obs)
    with torch.no_grad():
        ref = algo.policy.actor(torch.as_tensor(obs)).numpy()
        ref_v = algo.policy.critic(torch.as_tensor(obs)).numpy()[:, 0]
    np.testing.assert_allclose(head, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values, ref_v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("env_id, extra", [
    ("CartPole-v1", {}),
    ("Pendulum-v1", dict(clip_vloss=False, ent_coef=0.01)),
    ("Acrobot-v1", dict(normalize_advantages=False, max_grad_norm=10.0)),
])
def test_compiled_update_matches_the_torch_update(env_id, extra):
    """One iteration from the same seed: the same rollout (identical weights before), the same
    shuffles, and weights / metrics within float32 rounding after 2 epochs x 4 minibatches."""
    a = HybridPPO(env_id, seed=3, compiled_update=True, **SMALL, **extra)
    b = HybridPPO(env_id, seed=3, compiled_update=False, **SMALL, **extra)
    np.testing.assert_array_equal(_flat(a), _flat(b))
    ma, mb = a.train(64), b.train(64)
    np.testing.assert_allclose(_flat(a), _flat(b), rtol=1e-4, atol=5e-6)
    for key in ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction", "loss",
                "explained_variance"):
        assert ma[key] == pytest.approx(mb[key], rel=1e-4, abs=1e-5), key
    assert ma["n_updates"] == mb["n_updates"] == 8
    assert a.torch_gen.get_state().equal(b.torch_gen.get_state())   # the same shuffles drawn


def test_switching_the_update_carries_adam_state():
    algo = HybridPPO("CartPole-v1", seed=5, **SMALL)
    algo.train(64)
    kstate = algo.update_kernel.get_adam_state()
    algo.compiled_update = False
    opt = algo.optimizers["policy"]
    params = list(algo.policy.parameters())
    np.testing.assert_array_equal(
        np.concatenate([opt.state[p]["exp_avg_sq"].numpy().reshape(-1) for p in params]), kstate["exp_avg_sq"])
    assert all(int(opt.state[p]["step"]) == kstate["step"] for p in params)
    algo.train(64)                                  # torch steps on the shared weights
    assert algo.update_kernel.get_adam_state()["step"] == kstate["step"]
    algo.compiled_update = True
    after = algo.update_kernel.get_adam_state()
    assert after["step"] == int(opt.state[params[0]]["step"]) == 2 * kstate["step"]
    np.testing.assert_array_equal(
        after["exp_avg"], np.concatenate([opt.state[p]["exp_avg"].numpy().reshape(-1) for p in params]))
    with pytest.raises(TypeError, match="compiled_update must be True or False"):
        algo.compiled_update = "yes"


def test_checkpoints_read_with_either_update(tmp_path):
    """A checkpoint holds Adam's state in the torch optimizer's format: a compiled run resumes
    exactly, and a run switched to the torch update continues from the same moments."""
    algo = HybridPPO("Pendulum-v1", seed=6, **SMALL)
    algo.train(128)
    algo.save(tmp_path / "c.pt")
    state = algo.update_kernel.get_adam_state()
    loaded = HybridPPO.load(tmp_path / "c.pt")
    assert loaded.compiled_update
    got = loaded.update_kernel.get_adam_state()
    assert got["step"] == state["step"]
    np.testing.assert_array_equal(got["exp_avg"], state["exp_avg"])
    np.testing.assert_array_equal(got["exp_avg_sq"], state["exp_avg_sq"])
    np.testing.assert_array_equal(_flat(loaded), _flat(algo))
    assert all(np.shares_memory(p.detach().numpy(), loaded.update_kernel.flat_parameters)
               for p in loaded.policy.parameters())
    # the torch update from the same checkpoint: its optimizer holds the same moments
    loaded.compiled_update = False
    opt = loaded.optimizers["policy"]
    np.testing.assert_array_equal(
        np.concatenate([opt.state[p]["exp_avg"].numpy().reshape(-1) for p in loaded.policy.parameters()]),
        state["exp_avg"])
    loaded.train(64)
