"""PPOLoss against a hand computation; the policies' interface, shapes, log-probs and KLs
against torch.distributions."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from rlox.losses import PPOLoss, explained_variance
from rlox.policies import ContinuousPolicy, DiscretePolicy, make_policy


class Fixed(torch.nn.Module):
    """A policy returning given log-probs, entropies and values (whatever the input)."""

    def __init__(self, logp, ent, values):
        super().__init__()
        self.logp, self.ent, self.v = logp, ent, values

    def evaluate_actions(self, obs, actions):
        return self.logp, self.ent, self.v


def test_ppo_loss_matches_hand_computation():
    old_logp = torch.tensor([-1.0, -1.0, -1.0])
    new_logp = torch.tensor([-0.5, -1.5, -1.0])      # ratios e^0.5, e^-0.5, 1
    adv = torch.tensor([1.0, 1.0, -2.0])
    ret = torch.tensor([1.0, 0.0, 2.0])
    old_v = torch.tensor([0.5, 0.5, 0.5])
    new_v = torch.tensor([1.0, 0.0, 0.6])
    ent = torch.tensor([0.7, 0.7, 0.7])
    eps = 0.2
    fn = PPOLoss(clip_eps=eps, vf_coef=0.5, ent_coef=0.01, clip_vloss=True, normalize_advantages=False)
    loss, m = fn(Fixed(new_logp, ent, new_v), torch.zeros(3, 1), torch.zeros(3), old_logp, adv, ret, old_v)

    r = [math.exp(0.5), math.exp(-0.5), 1.0]
    a = [1.0, 1.0, -2.0]
    pg = np.mean([max(-a[i] * r[i], -a[i] * min(max(r[i], 1 - eps), 1 + eps)) for i in range(3)])
    v_cl = [0.5 + min(max(nv - 0.5, -eps), eps) for nv in (1.0, 0.0, 0.6)]
    vl = 0.5 * np.mean([max((nv - R) ** 2, (vc - R) ** 2) for nv, vc, R in zip((1.0, 0.0, 0.6), v_cl, (1.0, 0.0, 2.0))])
    total = pg + 0.5 * vl - 0.01 * 0.7
    kl = np.mean([(ri - 1) - math.log(ri) for ri in r])
    assert float(m["policy_loss"]) == pytest.approx(pg, rel=1e-6)
    assert float(m["value_loss"]) == pytest.approx(vl, rel=1e-6)
    assert float(loss) == pytest.approx(total, rel=1e-6)
    assert float(m["approx_kl"]) == pytest.approx(kl, rel=1e-6)
    assert float(m["clip_fraction"]) == pytest.approx(2 / 3)
    assert float(m["entropy"]) == pytest.approx(0.7)
    ev = 1 - np.var(np.array([1.0, 0.0, 2.0]) - np.array([1.0, 0.0, 0.6])) / np.var([1.0, 0.0, 2.0])
    assert float(m["explained_variance"]) == pytest.approx(ev, rel=1e-6)


def test_ppo_loss_unclipped_value_and_advantage_normalisation():
    logp = torch.zeros(4)
    fn = PPOLoss(clip_vloss=False, normalize_advantages=True, ent_coef=0.0)
    adv = torch.tensor([1.0, 2.0, 3.0, 4.0])
    loss, m = fn(Fixed(logp, torch.zeros(4), torch.zeros(4)), torch.zeros(4, 1), torch.zeros(4), logp,
                 adv, torch.ones(4), torch.zeros(4))
    norm = (adv - adv.mean()) / (adv.std() + 1e-8)
    assert float(m["policy_loss"]) == pytest.approx(float(-norm.mean()), abs=1e-6)
    assert float(m["value_loss"]) == pytest.approx(0.5)


def test_ppo_loss_bad_input():
    with pytest.raises(ValueError, match="clip_eps must be a finite number > 0"):
        PPOLoss(clip_eps=0)
    fn = PPOLoss()
    z = torch.zeros(3)
    with pytest.raises(ValueError, match="advantages has 2 rows but obs has 3"):
        fn(Fixed(z, z, z), torch.zeros(3, 1), z, z, torch.zeros(2), z, z)


def test_explained_variance():
    r = torch.tensor([1.0, 2.0, 3.0])
    assert float(explained_variance(r, r)) == 1.0
    assert math.isnan(float(explained_variance(r, torch.ones(3))))


def test_discrete_policy_matches_categorical():
    torch.manual_seed(0)
    pol = DiscretePolicy(obs_dim=4, n_actions=3, hidden=[16, 8])
    obs = torch.randn(6, 4)
    actions, logp = pol.get_action_and_logprob(obs, generator=torch.Generator().manual_seed(1))
    dist = torch.distributions.Categorical(logits=pol.actor(obs))
    torch.testing.assert_close(logp, dist.log_prob(actions))
    lp2, ent = pol.get_logprob_and_entropy(obs, actions)
    torch.testing.assert_close(lp2, dist.log_prob(actions))
    torch.testing.assert_close(ent, dist.entropy())
    assert pol.get_value(obs).shape == (6,)
    greedy, _ = pol.get_action_and_logprob(obs, deterministic=True)
    torch.testing.assert_close(greedy, dist.probs.argmax(-1))
    other = DiscretePolicy(4, 3, hidden=[16, 8])
    kl = DiscretePolicy.kl(pol.dist_params(obs), other.dist_params(obs))
    ref = torch.distributions.kl_divergence(dist, torch.distributions.Categorical(logits=other.actor(obs)))
    torch.testing.assert_close(kl, ref, rtol=1e-5, atol=1e-6)


def test_continuous_policy_matches_normal():
    torch.manual_seed(0)
    pol = ContinuousPolicy(obs_dim=3, act_dim=2, log_std_init=-0.5)
    obs = torch.randn(5, 3)
    actions, logp = pol.get_action_and_logprob(obs)
    dist = torch.distributions.Normal(pol.actor(obs), pol.log_std.exp())
    torch.testing.assert_close(logp, dist.log_prob(actions).sum(-1))
    _, ent = pol.get_logprob_and_entropy(obs, actions)
    torch.testing.assert_close(ent, dist.entropy().sum(-1))
    other = ContinuousPolicy(3, 2, log_std_init=0.3)
    kl = ContinuousPolicy.kl(pol.dist_params(obs), other.dist_params(obs))
    ref = torch.distributions.kl_divergence(dist, torch.distributions.Normal(other.actor(obs), other.log_std.exp())).sum(-1)
    torch.testing.assert_close(kl, ref, rtol=1e-5, atol=1e-6)


def test_orthogonal_init_gains():
    pol = DiscretePolicy(4, 2, hidden=64)
    head = pol.actor[-1].weight.detach()
    # Orthogonal rows scaled by the gain: each row of a [2, 64] head has norm 0.01.
    torch.testing.assert_close(head.norm(dim=1), torch.full((2,), 0.01), rtol=1e-4, atol=1e-6)
    assert all(float(m.bias.detach().abs().sum()) == 0 for m in pol.actor if isinstance(m, torch.nn.Linear))


def test_make_policy_spaces_and_errors():
    box = gym.spaces.Box(-1, 1, (3,))
    assert isinstance(make_policy(box, gym.spaces.Discrete(2)), DiscretePolicy)
    assert isinstance(make_policy(box, gym.spaces.Box(-1, 1, (2,))), ContinuousPolicy)
    with pytest.raises(TypeError, match="TRPO supports Discrete and Box action spaces, got Dict"):
        make_policy(box, gym.spaces.Dict({"a": gym.spaces.Discrete(2)}), algorithm="TRPO")
    with pytest.raises(TypeError, match="needs a Box observation space"):
        make_policy(gym.spaces.Discrete(3), gym.spaces.Discrete(2))
    with pytest.raises(ValueError, match="n_actions must be an int >= 1"):
        DiscretePolicy(4, 0)


def test_gsde_distribution_and_noise():
    torch.manual_seed(0)
    pol = ContinuousPolicy(obs_dim=3, act_dim=2, hidden=[8, 5], log_std_init=-0.5, use_sde=True)
    assert pol.log_std.shape == (5, 2)
    obs = torch.randn(4, 3)
    mean, latent = pol._mean_latent(obs)
    sigma = torch.sqrt((latent ** 2) @ (pol.log_std.exp() ** 2) + 1e-6)
    g = torch.Generator().manual_seed(3)
    pol.reset_noise(4, g)
    a1, logp = pol.get_action_and_logprob(obs)
    a2, _ = pol.get_action_and_logprob(obs)
    torch.testing.assert_close(a1, a2)                 # same noise until the next reset_noise
    torch.testing.assert_close(a1 - mean, torch.bmm(latent.unsqueeze(1), pol.sde_noise).squeeze(1))
    ref = torch.distributions.Normal(mean, sigma)
    torch.testing.assert_close(logp, ref.log_prob(a1).sum(-1))
    _, ent = pol.get_logprob_and_entropy(obs, a1)
    torch.testing.assert_close(ent, ref.entropy().sum(-1))
    pol.reset_noise(4, g)
    a3, _ = pol.get_action_and_logprob(obs)
    assert not torch.allclose(a1, a3)
    with pytest.raises(ValueError, match="use_sde .* needs a continuous"):
        make_policy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), use_sde=True)


def test_collector_redraws_gsde_noise_every_sample_freq_steps():
    from rlox.collectors import RolloutCollector

    pol = ContinuousPolicy(3, 1, use_sde=True)
    draws = []
    original = pol.reset_noise

    def counting(n, generator=None):
        draws.append(n)
        original(n, generator)

    pol.reset_noise = counting
    RolloutCollector("Pendulum-v1", n_envs=2, seed=0).collect(pol, n_steps=10, sde_sample_freq=4)
    assert draws == [2, 2, 2]                           # steps 0, 4, 8
