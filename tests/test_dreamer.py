"""DreamerV3: its parts against hand computations, the sequence replay, and the agent (a short
run that lowers the world-model loss, predict's recurrent state, save/load/resume, bad input)."""
import math

import numpy as np
import pytest
import torch

from rlox.world_models import (ReturnNormalizer, SequenceReplay, TwoHot, categorical_kl, kl_balance, lambda_returns,
                               symexp, symlog, unimix_logits)

# A model small enough for tests on 2 busy cores.
TINY = dict(deter=32, hidden=32, layers=1, groups=4, classes=4, batch_size=4, batch_length=8,
            imagination_horizon=5, n_bins=41, learning_starts=100, steps_per_iteration=100, train_ratio=8)


# ---------------------------------------------------------------------- functions
def test_symlog_symexp_by_hand():
    x = torch.tensor([-100.0, -1.0, 0.0, 0.5, math.e - 1.0, 1e6])
    expected = torch.tensor([-math.log(101.0), -math.log(2.0), 0.0, math.log(1.5), 1.0, math.log(1e6 + 1.0)])
    torch.testing.assert_close(symlog(x), expected)
    torch.testing.assert_close(symexp(symlog(x)), x, rtol=1e-5, atol=1e-5)


def test_twohot_encode_decode_by_hand():
    th = TwoHot(n_bins=5, low=-2.0, high=2.0)           # bins -2, -1, 0, 1, 2 (symlog space)
    # symlog(y) = 0.25 -> 0.75 on bin 0 (index 2) and 0.25 on bin 1 (index 3)
    y = symexp(torch.tensor([0.25]))
    np.testing.assert_allclose(th.encode(y).numpy(), [[0, 0, 0.75, 0.25, 0]], atol=1e-6)
    # exactly on a bin, and clipped past the ends
    np.testing.assert_allclose(th.encode(symexp(torch.tensor([1.0, -5.0, 7.0]))).numpy(),
                               [[0, 0, 0, 1, 0], [1, 0, 0, 0, 0], [0, 0, 0, 0, 1]], atol=1e-6)
    # decoding a two-hot "distribution" returns the value: logits = log of the weights
    big = TwoHot()                                      # 255 bins on [-20, 20]
    y = torch.tensor([-300.0, -1.5, 0.0, 0.3, 42.0, 5000.0])
    w = big.encode(y)
    assert torch.allclose(w.sum(-1), torch.ones(6)) and ((w > 0).sum(-1) <= 2).all()
    torch.testing.assert_close(big.decode(torch.log(w + 1e-30)), y, rtol=1e-4, atol=1e-4)
    # the loss is the cross-entropy: minimal (= entropy of the target) at the target's logits
    loss_at_target = big.loss(torch.log(w + 1e-30), y)
    assert (loss_at_target <= big.loss(torch.zeros_like(w), y)).all()


def test_kl_balance_and_free_bits_by_hand():
    post = torch.log(torch.tensor([[[0.5, 0.5]], [[0.9, 0.1]]]))      # [2 steps, 1 group, 2 classes]
    prior = torch.log(torch.tensor([[[0.5, 0.5]], [[0.1, 0.9]]]))
    kl1 = 0.9 * math.log(0.9 / 0.1) + 0.1 * math.log(0.1 / 0.9)        # 1.7578 nats
    torch.testing.assert_close(categorical_kl(post, prior), torch.tensor([0.0, kl1]))
    dyn, rep, kl = kl_balance(post, prior, free_bits=1.0)
    torch.testing.assert_close(dyn, torch.tensor([1.0, kl1]))           # clipped below at 1 nat
    torch.testing.assert_close(rep, torch.tensor([1.0, kl1]))
    # dynamics loss trains only the prior, representation loss only the posterior
    p, q = post.clone().requires_grad_(True), prior.clone().requires_grad_(True)
    dyn, rep, _ = kl_balance(p, q, free_bits=0.0)
    dyn.sum().backward()
    assert p.grad is None or torch.all(p.grad == 0)
    assert q.grad is not None and q.grad.abs().sum() > 0
    p2, q2 = post.clone().requires_grad_(True), prior.clone().requires_grad_(True)
    _, rep, _ = kl_balance(p2, q2, free_bits=0.0)
    rep.sum().backward()
    assert (q2.grad is None or torch.all(q2.grad == 0)) and p2.grad.abs().sum() > 0
    # below the free bits there is no gradient at all
    p3 = post[:1].clone().requires_grad_(True)
    dyn, rep, _ = kl_balance(p3, prior[:1], free_bits=1.0)
    (dyn + rep).sum().backward()
    assert torch.all(p3.grad == 0)


def test_twohot_nll_equals_dense_cross_entropy():
    th = TwoHot()
    gen = torch.Generator().manual_seed(0)
    logits = torch.randn(7, 5, 255, generator=gen, requires_grad=True)
    y1, y2 = torch.randn(7, 5, generator=gen) * 300, torch.randn(7, 5, generator=gen)
    logp = torch.log_softmax(logits, -1)
    dense = -(th.encode(y1) * logp).sum(-1) - 0.5 * (th.encode(y2) * logp).sum(-1)
    fast = th.nll(logp, [y1, y2], [1.0, 0.5])
    torch.testing.assert_close(fast, dense)
    g_dense, = torch.autograd.grad(dense.sum(), logits, retain_graph=True)
    g_fast, = torch.autograd.grad(fast.sum(), logits)
    torch.testing.assert_close(g_fast, g_dense)
    torch.testing.assert_close(th.loss(logits, y1), -(th.encode(y1) * logp).sum(-1))
    with pytest.raises(ValueError, match="2 targets but 1 scales"):
        th.nll(logp, [y1, y2], [1.0])


def test_rssm_observe_matches_observe_step_loop():
    from rlox.world_models import RSSM

    torch.manual_seed(0)
    rssm = RSSM(embed_dim=6, act_dim=2, deter=8, hidden=8, groups=3, classes=4)
    B, T = 3, 6
    embed, actions = torch.randn(B, T, 6), torch.randn(B, T, 2)
    is_first = torch.zeros(B, T)
    is_first[:, 0] = 1.0
    is_first[1, 3] = 1.0                                   # an episode boundary inside a window
    h, z, post, prior = rssm.observe(embed, actions, is_first, torch.Generator().manual_seed(1))
    gen, state = torch.Generator().manual_seed(1), rssm.initial(B)
    for t in range(T):
        state, post_t, prior_t = rssm.observe_step(state, actions[:, t], embed[:, t], is_first[:, t], gen)
        torch.testing.assert_close(h[:, t], state.h)
        torch.testing.assert_close(z[:, t], state.z)       # the same draws: one uniform per latent per step
        torch.testing.assert_close(post[:, t], post_t)
        torch.testing.assert_close(prior[:, t], prior_t)


def test_rssm_sample_frequencies_and_straight_through():
    from rlox.world_models import RSSM

    probs = torch.tensor([0.1, 0.2, 0.0, 0.7]).expand(20_000, 4).clone().requires_grad_(True)
    z = RSSM.sample_probs(probs, torch.Generator().manual_seed(0))
    freq = z.detach().mean(0)
    assert freq[2] == 0.0 and torch.allclose(freq, probs[0].detach(), atol=0.015), freq
    assert torch.all(z.detach().sum(-1) == 1.0)
    (z * torch.arange(4.0)).sum().backward()              # straight-through: d z / d probs = identity
    torch.testing.assert_close(probs.grad, torch.arange(4.0).expand(20_000, 4))


def test_unimix():
    logits = torch.tensor([[100.0, 0.0, 0.0, 0.0]])
    probs = unimix_logits(logits, 0.01).exp()
    torch.testing.assert_close(probs, torch.tensor([[0.99 + 0.0025, 0.0025, 0.0025, 0.0025]]))


def test_return_normalizer_by_hand():
    norm = ReturnNormalizer(decay=0.5)
    r = torch.arange(101, dtype=torch.float32)          # 5th percentile 5, 95th 95: range 90
    assert norm.update(r) == pytest.approx(90.0)
    assert norm.update(r * 0.0) == pytest.approx(45.0)   # EMA: 0.5 * 90 + 0.5 * 0
    small = ReturnNormalizer(decay=0.0)
    assert small.update(torch.linspace(0, 0.1, 50)) == 1.0     # max(1, S): small returns are not scaled up


def test_lambda_returns_by_hand():
    rewards = torch.tensor([[1.0], [2.0]])
    values = torch.tensor([[0.0], [10.0], [20.0]])
    conts = torch.tensor([[1.0], [0.0]])
    g, lam = 0.5, 0.5
    r1 = 2.0 + g * 0.0 * ((1 - lam) * 20 + lam * 20)                  # = 2
    r0 = 1.0 + g * 1.0 * ((1 - lam) * 10 + lam * r1)                   # = 1 + 0.5 * (5 + 1) = 4
    torch.testing.assert_close(lambda_returns(rewards, values, conts, g, lam), torch.tensor([[r0], [r1]]))


# ---------------------------------------------------------------------- replay
def test_sequence_replay_windows_and_resets():
    rep = SequenceReplay(capacity=20, n_envs=2, obs_shape=(1,), act_dim=1)
    for t in range(15):
        rep.add(np.array([[t], [100 + t]], np.float32), np.zeros((2, 1)), np.full(2, t, np.float32),
                np.array([t == 0, t == 0]), np.zeros(2, bool))
        if t == 6:          # env 1 ends an episode: its reset record goes in its own ring only
            rep.add(np.array([[-1]], np.float32), np.zeros((1, 1)), np.zeros(1, np.float32), np.ones(1, bool),
                    np.zeros(1, bool), env_ids=[1])
    assert list(rep.sizes) == [10, 10] and len(rep) == 20
    b = rep.sample(64, 4, np.random.default_rng(0))
    assert b["obs"].shape == (64, 4, 1) and b["is_first"][:, 0].all()
    for seq in b["obs"][..., 0]:
        if 0 <= seq[0] < 100:     # env 0: consecutive, within the last 10 records (5..14)
            assert np.all(np.diff(seq) == 1) and seq[0] >= 5
    with pytest.raises(ValueError, match="expected"):
        rep.add(np.zeros((2, 3)), np.zeros((2, 1)), np.zeros(2), np.zeros(2, bool), np.zeros(2, bool))
    with pytest.raises(ValueError, match="length=11"):
        rep.sample(2, 11, np.random.default_rng(0))
    clone = SequenceReplay(capacity=20, n_envs=2, obs_shape=(1,), act_dim=1)
    clone.load_state_dict(rep.state_dict())
    np.testing.assert_array_equal(clone.sample(8, 4, np.random.default_rng(1))["obs"],
                                  rep.sample(8, 4, np.random.default_rng(1))["obs"])


# ---------------------------------------------------------------------- the agent
def test_dreamer_improves_world_model_and_predicts(tmp_path):
    from rlox.algorithms.dreamer_v3 import DreamerV3

    algo = DreamerV3("Pendulum-v1", seed=0, **TINY, model_lr=1e-3)
    algo.train(total_timesteps=120)
    first = [algo._train_step()["loss/world_model"] for _ in range(3)]
    for _ in range(30):
        metrics = algo._train_step()
    last = [algo._train_step()["loss/world_model"] for _ in range(3)]
    assert np.mean(last) < 0.75 * np.mean(first), (first, last)
    assert all(np.isfinite(v) for v in metrics.values())
    # predict: one obs -> one action in bounds; a batch keeps one recurrent state per env
    a = algo.predict(np.zeros(3, np.float32), deterministic=True)
    assert a.shape == (1,) and -2.0 <= a[0] <= 2.0
    batch = algo.predict(np.zeros((4, 3), np.float32))
    assert batch.shape == (4, 1) and algo._pred_state[0].h.shape == (4, 32)
    algo.reset_state([1])
    assert algo._pred_state[2].tolist() == [0.0, 1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match=r"expected \(3,\)"):
        algo.predict(np.zeros((84, 84), np.float32))
    # save / load round trip: same deterministic actions; resume continues to the run's end
    algo.reset_state()
    path = tmp_path / "dreamer.pt"
    algo.save(path)
    loaded = DreamerV3.load(path)
    obs = np.random.default_rng(0).normal(size=(2, 3)).astype(np.float32)
    np.testing.assert_allclose(loaded.predict(obs, deterministic=True), algo.predict(obs, deterministic=True))
    assert loaded.updates == algo.updates and len(loaded.replay) == len(algo.replay)


def test_dreamer_discrete_images_and_resume(tmp_path):
    import gymnasium as gym
    from gymnasium import spaces

    from rlox.algorithms.dreamer_v3 import DreamerV3

    class Blink(gym.Env):
        """16x16 uint8 frames, channel-last; reward for matching the action to the frame's colour."""
        observation_space = spaces.Box(0, 255, (16, 16, 3), np.uint8)
        action_space = spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t, self.c = 0, int(self.np_random.integers(2))
            return np.full((16, 16, 3), 255 * self.c, np.uint8), {}

        def step(self, action):
            r = float(action == self.c)
            self.t += 1
            self.c = int(self.np_random.integers(2))
            return np.full((16, 16, 3), 255 * self.c, np.uint8), r, False, self.t >= 20, {}

    gym.register("RloxTestBlink-v0", entry_point=lambda: Blink())
    algo = DreamerV3("RloxTestBlink-v0", seed=1, **TINY, cnn_depth=4)
    assert algo.image and algo.channels_last and algo.model_obs_shape == (3, 16, 16)
    assert algo.replay.obs.dtype == np.uint8
    algo.train(total_timesteps=140)
    assert algo.updates > 0 and algo.episodes >= 5
    path = tmp_path / "blink.pt"
    algo._run_end = algo.num_timesteps + 40       # (as if saved in the middle of a longer run)
    algo.save(path)
    resumed = DreamerV3.load(path)
    resumed.train(resume=True)
    assert resumed.num_timesteps == algo.num_timesteps + 40 and resumed.updates > algo.updates
    action = resumed.predict(np.zeros((16, 16, 3), np.uint8))
    assert action in (0, 1)


def test_dreamer_bad_input():
    from rlox.algorithms.dreamer_v3 import DreamerV3
    from rlox.config import DreamerV3Config

    with pytest.raises(ValueError, match="actor_grad = 'backprop' needs continuous"):
        DreamerV3("CartPole-v1", **TINY, actor_grad="backprop")
    with pytest.raises(ValueError, match="size = 'XXL' is not allowed"):
        DreamerV3Config(size="XXL")
    with pytest.raises(ValueError, match="batch_length = 64 is larger than buffer_size = 10"):
        DreamerV3Config(buffer_size=10)
    with pytest.raises(TypeError, match="unknown config field"):
        DreamerV3("Pendulum-v1", horizon=5)


def test_trainer_dreamer_registered():
    from rlox import Trainer
    from rlox.plugins import ALGORITHM_REGISTRY

    assert "dreamer" in ALGORITHM_REGISTRY.list()
    t = Trainer("dreamer", env="CartPole-v1", seed=0, config=TINY)
    metrics = t.train(total_timesteps=150)
    assert t.algo.updates > 0 and np.isfinite(metrics["mean_reward"])
    assert t.predict(np.zeros(4, np.float32)) in (0, 1)
    calls = []
    t.algo.reset_state = lambda *a: calls.append(a)      # evaluation starts each episode afresh
    assert np.isfinite(t.evaluate(n_episodes=2)["mean_reward"])
    assert calls == [(), ([0],), ([0],)]                  # the whole state first (it may hold another batch size)


def test_trainer_dreamer_pendulum_preset():
    """Trainer("dreamer", env="Pendulum-v1") and DreamerV3Trainer take the measured Pendulum
    preset (train_ratio 96, lr 3e-4 / 8e-5); explicit user settings win; preset=False opts out."""
    from rlox import DreamerV3Trainer, Trainer

    def picked(t):
        c = t.algo.config
        return (c.train_ratio, c.model_lr, c.actor_lr, c.critic_lr)

    assert picked(Trainer("dreamer", env="Pendulum-v1", seed=0)) == (96.0, 3e-4, 8e-5, 8e-5)
    assert picked(DreamerV3Trainer(env="Pendulum-v1", seed=42)) == (96.0, 3e-4, 8e-5, 8e-5)
    user = Trainer("dreamer", env="Pendulum-v1", seed=0, config={"train_ratio": 32.0}, actor_lr=1e-5)
    assert picked(user) == (32.0, 3e-4, 1e-5, 8e-5)
    assert picked(Trainer("dreamer", env="Pendulum-v1", seed=0, preset=False)) == (512.0, 1e-4, 3e-5, 3e-5)
    assert picked(Trainer("dreamer", env="CartPole-v1", seed=0)) == (512.0, 1e-4, 3e-5, 3e-5)   # no preset
