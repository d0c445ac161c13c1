"""rlox.networks: shapes, the squashed-Gaussian log-probability, the fused twin critics."""
import math

import numpy as np
import pytest
import torch
from torch.distributions import Normal, TanhTransform, TransformedDistribution

from rlox.networks import (DeterministicPolicy, DuelingQNetwork, QNetwork, SimpleQNetwork,
                           SquashedGaussianPolicy, TwinQNetwork, hidden_sizes)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_hidden_sizes():
    assert hidden_sizes(64) == [64, 64]
    assert hidden_sizes([400, 300]) == [400, 300]
    for bad in (0, [], [3, 0], True, [2.5]):
        with pytest.raises((ValueError, TypeError)):
            hidden_sizes(bad)


def test_squashed_gaussian_shapes_and_bounds():
    actor = SquashedGaussianPolicy(obs_dim=3, act_dim=2, hidden=32)
    obs = torch.randn(7, 3) * 10
    action, log_prob = actor.sample(obs)
    assert action.shape == (7, 2) and log_prob.shape == (7,)
    assert bool((action.abs() < 1).all())
    det = actor.deterministic(obs)
    mean, log_std = actor(obs)
    torch.testing.assert_close(det, torch.tanh(mean))
    assert bool((log_std >= -20).all() and (log_std <= 2).all())


def test_squashed_gaussian_log_prob_matches_torch_distribution():
    actor = SquashedGaussianPolicy(obs_dim=4, act_dim=3, hidden=16)
    obs = torch.randn(256, 4)
    gen = torch.Generator().manual_seed(3)
    action, log_prob = actor.sample(obs, gen)
    mean, log_std = actor(obs)
    # Recover the pre-squash sample from the same generator draw.
    eps = torch.randn(mean.shape, generator=torch.Generator().manual_seed(3))
    u = mean + log_std.exp() * eps
    torch.testing.assert_close(action, torch.tanh(u))
    ref = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform()]).log_prob(torch.tanh(u)).sum(-1)
    # TanhTransform's log-det is the same stable formula; compare away from the saturated tails.
    ok = torch.tanh(u).abs().max(-1).values < 0.999
    torch.testing.assert_close(log_prob[ok], ref[ok], rtol=1e-4, atol=1e-4)


def test_squashed_gaussian_is_reparameterised_and_generator_reproducible():
    actor = SquashedGaussianPolicy(obs_dim=3, act_dim=1, hidden=8)
    obs = torch.randn(5, 3)
    a1, lp1 = actor.sample(obs, torch.Generator().manual_seed(1))
    a2, lp2 = actor.sample(obs, torch.Generator().manual_seed(1))
    torch.testing.assert_close(a1, a2)
    (a1.sum() + lp1.sum()).backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in actor.parameters())


def test_sample_action_equals_sample_from_the_same_draw():
    for use_sde in (False, True):
        actor = SquashedGaussianPolicy(obs_dim=3, act_dim=2, hidden=16, use_sde=use_sde, log_std_init=-1.0)
        actor.reset_noise(1, torch.Generator().manual_seed(5))
        obs = torch.randn(6, 3)
        g1, g2 = torch.Generator().manual_seed(2), torch.Generator().manual_seed(2)
        for _ in range(2):   # the generators stay in step
            action, _ = actor.sample(obs, g1)
            assert torch.equal(actor.sample_action(obs, g2), action)
        with torch.inference_mode():
            assert torch.equal(actor.sample_action(obs, g2), actor.sample(obs, g1)[0])


def test_gsde_noise_is_state_dependent_and_fixed_between_resets():
    actor = SquashedGaussianPolicy(obs_dim=2, act_dim=1, hidden=16, use_sde=True, log_std_init=-1.0)
    gen = torch.Generator().manual_seed(0)
    actor.reset_noise(1, gen)
    obs = torch.randn(4, 2)
    a1, lp1 = actor.sample(obs)
    a2, lp2 = actor.sample(obs)
    torch.testing.assert_close(a1, a2)        # same matrix, same state -> same action
    actor.reset_noise(1, gen)
    a3, _ = actor.sample(obs)
    assert not torch.allclose(a1, a3)
    # log-prob: Gaussian with variance z^2 @ std^2 (+1e-6), then the tanh correction.
    z = actor._features(obs).detach()
    mean = actor._mean(actor._features(obs))
    var = z.square() @ actor.sde_log_std.exp().square() + 1e-6
    u = torch.atanh(a3.clamp(-1 + 1e-7, 1 - 1e-7))
    ref = Normal(mean, var.sqrt()).log_prob(u).sum(-1) - torch.log(1 - torch.tanh(u) ** 2).sum(-1)
    _, lp3 = actor.sample(obs)
    torch.testing.assert_close(lp3, ref, rtol=1e-3, atol=1e-3)
    # Per-row matrices (one per env) give different noise for the same state.
    actor.reset_noise(2, gen)
    a = actor.sample(torch.stack([obs[0], obs[0]]))[0]
    assert not torch.allclose(a[0], a[1])


def test_gsde_trains_the_features_through_the_noise():
    """SB3's SAC builds its gSDE with learn_features=True: the noise z(s) @ W and its variance
    are differentiable in the features z(s). With the mean head zeroed, the action depends on
    the trunk only through the noise, so the trunk must still get a gradient."""
    actor = SquashedGaussianPolicy(obs_dim=2, act_dim=1, hidden=16, use_sde=True, log_std_init=-1.0)
    actor.reset_noise(1, torch.Generator().manual_seed(0))
    with torch.no_grad():
        actor.mu.weight.zero_()
    obs = torch.randn(8, 2)
    action, _ = actor.sample(obs)
    action.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in actor.trunk.parameters())
    actor.zero_grad()
    actor.reset_noise(1, torch.Generator().manual_seed(0))   # (the matrix's graph was used)
    _, log_prob = actor.sample(obs)          # and through the variance of the log-probability
    log_prob.sum().backward()
    assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in actor.trunk.parameters())


def test_deterministic_policy_scales_by_max_action():
    actor = DeterministicPolicy(obs_dim=3, act_dim=2, hidden=16, max_action=2.0)
    out = actor(torch.randn(9, 3) * 100)
    assert out.shape == (9, 2) and bool((out.abs() <= 2.0).all())
    per_dim = DeterministicPolicy(3, 2, 16, max_action=[1.0, 3.0])
    assert per_dim.max_action.tolist() == [1.0, 3.0]
    with pytest.raises(ValueError, match="max_action"):
        DeterministicPolicy(3, 2, 16, max_action=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="max_action"):
        DeterministicPolicy(3, 2, 16, max_action=-1.0)


def test_qnetwork_returns_one_value_per_sample():
    critic = QNetwork(obs_dim=3, act_dim=1, hidden=256)
    q = critic(torch.randn(11, 3), torch.randn(11, 1))
    assert q.shape == (11,)


def test_twin_q_equals_its_members():
    q1, q2 = QNetwork(3, 2, [32, 16]), QNetwork(3, 2, [32, 16])
    twin = TwinQNetwork.from_qnetworks(q1, q2)
    obs, act = torch.randn(20, 3), torch.randn(20, 2)
    out = twin(obs, act)
    assert out.shape == (2, 20)
    torch.testing.assert_close(out[0], q1(obs, act))
    torch.testing.assert_close(out[1], q2(obs, act))
    torch.testing.assert_close(twin.q1(obs, act), q1(obs, act))
    back = twin.unstack()
    torch.testing.assert_close(back[1](obs, act), q2(obs, act))


def test_twin_q_gradients_match_separate_networks():
    q1, q2 = QNetwork(3, 1, 16), QNetwork(3, 1, 16)
    twin = TwinQNetwork.from_qnetworks(q1, q2)
    obs, act = torch.randn(8, 3), torch.randn(8, 1)
    target = torch.randn(8)
    ((twin(obs, act) - target) ** 2).mean(1).sum().backward()
    (((q1(obs, act) - target) ** 2).mean() + ((q2(obs, act) - target) ** 2).mean()).backward()
    lin1 = [m for m in q1.net if isinstance(m, torch.nn.Linear)]
    lin2 = [m for m in q2.net if isinstance(m, torch.nn.Linear)]
    for layer, w in enumerate(twin.weights):
        torch.testing.assert_close(w.grad[0], lin1[layer].weight.grad.T)
        torch.testing.assert_close(w.grad[1], lin2[layer].weight.grad.T)


def test_twin_q_detach_params_gives_input_gradients_only():
    twin = TwinQNetwork(3, 1, 16)
    act = torch.randn(6, 1, requires_grad=True)
    twin(torch.randn(6, 3), act, detach_params=True).min(0).values.sum().backward()
    assert act.grad is not None and act.grad.abs().sum() > 0
    assert all(p.grad is None for p in twin.parameters())


def test_twin_q_init_is_like_nn_linear():
    twin = TwinQNetwork(4, 2, 256, n_critics=2)
    w = twin.weights[1].detach()
    bound = 1 / math.sqrt(256)
    assert float(w.abs().max()) <= bound
    assert float(w.std()) == pytest.approx(bound / math.sqrt(3), rel=0.05)
    assert not torch.equal(w[0], w[1])          # independent members


def test_simple_and_dueling_q_networks():
    obs = torch.randn(13, 4)
    assert SimpleQNetwork(obs_dim=4, act_dim=2, hidden=256)(obs).shape == (13, 2)
    net = DuelingQNetwork(obs_dim=4, act_dim=3, hidden=[32, 32])
    q = net(obs)
    assert q.shape == (13, 3)
    z = net.trunk(obs)
    v, a = net.value(z), net.advantage(z)
    torch.testing.assert_close(q, v + a - a.mean(-1, keepdim=True))
    # Q averages to V over actions: the dueling identifiability constraint.
    torch.testing.assert_close(q.mean(-1), v.squeeze(-1))
    one_layer = DuelingQNetwork(4, 2, [8])
    assert isinstance(one_layer.trunk, torch.nn.Identity) and one_layer(obs).shape == (13, 2)


def test_bad_dims_raise():
    with pytest.raises(ValueError, match="obs_dim"):
        QNetwork(0, 1, 8)
    with pytest.raises(ValueError, match="act_dim"):
        SimpleQNetwork(4, -2, 8)
    with pytest.raises(ValueError, match="n_critics"):
        TwinQNetwork(3, 1, 8, n_critics=0)
    with pytest.raises(ValueError, match="same"):
        TwinQNetwork.from_qnetworks(QNetwork(3, 1, 8), QNetwork(4, 1, 8))
    assert np.isfinite(float(QNetwork(3, 1, 8)(torch.zeros(1, 3), torch.zeros(1, 1)).detach()))


def test_twin_min_q_matches_autograd_through_both_members():
    twin = TwinQNetwork(3, 2, [16, 8])
    obs = torch.randn(64, 3)
    a1 = torch.randn(64, 2, requires_grad=True)
    a2 = a1.detach().clone().requires_grad_(True)
    ref = twin(obs, a1, detach_params=True).min(0).values
    out = twin.min_q(obs, a2)
    torch.testing.assert_close(out, ref)
    w = torch.randn(64)
    (ref * w).sum().backward()
    (out * w).sum().backward()
    torch.testing.assert_close(a2.grad, a1.grad)
    assert all(p.grad is None for p in twin.parameters())
    # Both members are the minimum somewhere in this batch (the test covers both branches).
    q = twin(obs, a1).detach()
    assert (q[0] < q[1]).any() and (q[1] < q[0]).any()
