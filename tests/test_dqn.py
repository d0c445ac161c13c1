"""DQN: smoke, predict, n-step targets against a hand computation, Double DQN, target-network
schedule, prioritized replay, save/load, exact resume, a learning test."""
import gymnasium as gym
import numpy as np
import pytest
import torch

from rlox.algorithms.dqn import DQN, _dueling_as_sequential
from rlox.callbacks import Callback
from rlox.evaluation import evaluate_policy
from rlox.networks import DuelingQNetwork
from tests._off_policy_envs import COUNTER_ID, COUNTER_TERM_ID
from tests.test_sac import same_state

SMALL = dict(hidden=32, batch_size=32, learning_starts=100, buffer_size=10_000, steps_per_iteration=200)


def constant_target(dqn, value):
    """Make the target network output ``value`` for every action (last layer: zero weights)."""
    with torch.no_grad():
        last = [m for m in dqn.q_net_target.modules() if isinstance(m, torch.nn.Linear)][-1]
        last.weight.zero_()
        last.bias.fill_(value)


def test_smoke_with_every_extension_and_predict():
    dqn = DQN("CartPole-v1", seed=0, double_dqn=True, dueling=True, n_step=3, prioritized=True, **SMALL)
    out = dqn.train(600)
    assert out["timesteps"] == 600 and np.isfinite(out["loss"]) and 0 <= out["epsilon"] <= 1
    assert out["beta"] == pytest.approx(1.0) and out["n_updates"] == 125
    a = dqn.predict(np.zeros(4, np.float32))
    assert isinstance(a, (int, np.integer)) and a in (0, 1)
    batch = dqn.predict(np.zeros((5, 4), np.float32), deterministic=True)
    assert batch.shape == (5,) and batch.dtype == np.int64


def test_defaults_are_sb3s():
    dqn = DQN("CartPole-v1")
    cfg = dqn.config
    assert (cfg.learning_rate, cfg.batch_size, cfg.learning_starts, cfg.train_freq, cfg.gradient_steps,
            cfg.target_update_interval, cfg.tau, cfg.exploration_fraction, cfg.exploration_final_eps,
            cfg.max_grad_norm, cfg.hidden) == (1e-4, 32, 100, 4, 1, 10_000, 1.0, 0.1, 0.05, 10.0, 64)


@pytest.mark.parametrize("n_envs", [1, 2])
@pytest.mark.parametrize("env_id, terminates", [(COUNTER_ID, False), (COUNTER_TERM_ID, True)],
                         ids=["truncated", "terminated"])
@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "per"])
def test_n_step_targets_against_a_hand_computation(n_envs, env_id, terminates, prioritized):
    gamma, n, c = 0.9, 3, 10.0
    dqn = DQN(env_id, n_envs=n_envs, n_step=n, gamma=gamma, prioritized=prioritized, hidden=8,
              learning_starts=10_000, buffer_size=1000)
    dqn.collector.collect(None, 11, random=True)
    constant_target(dqn, c)
    idx = np.arange(len(dqn.buffer))
    target = dqn.td_target(dqn.buffer.gather(idx)).numpy()
    length = 4 if terminates else 5                    # episode length in steps
    for i in idx:
        step = i // n_envs                             # the vector step it was collected at
        t = step % length                              # its step in the episode
        m = min(n, length - t, 11 - step)              # rewards summed: stops at the episode or data end
        ret = sum(gamma ** k * (t + k + 1) for k in range(m))
        ends_episode = t + m == length
        boot = 0.0 if (ends_episode and terminates) else gamma ** m * c
        assert target[i] == pytest.approx(ret + boot, rel=1e-6), (i, t, m)


def test_one_step_target_uses_terminated_only():
    dqn = DQN(COUNTER_ID, gamma=0.5, hidden=8, learning_starts=10_000)
    dqn.collector.collect(None, 6, random=True)
    constant_target(dqn, 4.0)
    batch = dqn.buffer.gather(np.arange(6))
    target = dqn.td_target(batch).numpy()
    # rewards t + 1; the 5th step is truncated (bootstraps), none terminated.
    np.testing.assert_allclose(target, [1 + 2, 2 + 2, 3 + 2, 4 + 2, 5 + 2, 1 + 2])
    batch["terminated"][4] = 1.0
    assert dqn.td_target(batch).numpy()[4] == pytest.approx(5.0)


def test_double_dqn_lets_the_online_network_choose():
    dqn = DQN("CartPole-v1", double_dqn=True, hidden=8, learning_starts=10_000, gamma=1.0)
    dqn.collector.collect(None, 5, random=True)
    batch = dqn.buffer.gather(np.arange(5))
    with torch.no_grad():
        online_last = [m for m in dqn.q_net.modules() if isinstance(m, torch.nn.Linear)][-1]
        online_last.weight.zero_()
        online_last.bias.copy_(torch.tensor([0.0, 1.0]))     # online prefers action 1
        target_last = [m for m in dqn.q_net_target.modules() if isinstance(m, torch.nn.Linear)][-1]
        target_last.weight.zero_()
        target_last.bias.copy_(torch.tensor([7.0, 3.0]))     # target values: max is action 0
    expected = batch["rewards"] + (1 - batch["terminated"]) * 3.0
    np.testing.assert_allclose(dqn.td_target(batch).numpy(), expected)
    dqn.config.double_dqn = False
    np.testing.assert_allclose(dqn.td_target(batch).numpy(), batch["rewards"] + (1 - batch["terminated"]) * 7.0)


@pytest.mark.parametrize("double", [False, True], ids=["dqn", "double"])
def test_a_phase_drawn_up_front_equals_step_by_step_updates(double):
    """With uniform replay the batches and targets of a learning phase are computed in one pass;
    the result must be the per-step algorithm's."""
    kw = dict(seed=0, double_dqn=double, hidden=16, batch_size=8, learning_starts=10_000, n_step=2)
    fast, slow = DQN("CartPole-v1", **kw), DQN("CartPole-v1", **kw)
    for d in (fast, slow):
        d.collector.collect(None, 64, random=True)
    rng_state = slow.np_rng.bit_generator.state
    fast._learn(6)
    slow.np_rng.bit_generator.state = rng_state
    seed = int(slow.np_rng.integers(0, 2**63 - 1))
    b = slow.buffer.sample(6 * 8, seed=seed)
    for i in range(6):
        part = {k: v[i * 8:(i + 1) * 8] for k, v in b.items()}
        slow._update(part, slow.td_target(part))
    for p, q in zip(fast.q_net.parameters(), slow.q_net.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    assert fast._n_updates == 6 and len(fast._metrics) == 6


def test_hard_target_update_every_interval_env_steps():
    dqn = DQN("CartPole-v1", target_update_interval=10, train_freq=4, learning_starts=0, hidden=8, n_envs=1)
    copies = []
    orig = dqn._after_collect

    def spy(steps):
        before = [p.clone() for p in dqn.q_net_target.parameters()]
        orig(steps)
        copies.append(any(not torch.equal(a, b) for a, b in zip(before, dqn.q_net_target.parameters())))
    dqn._after_collect = spy
    dqn.train(40)
    # Calls at 4, 8, 12, ..., 40 env steps: a copy when a multiple of 10 was crossed.
    assert copies == [False, False, True, False, True, False, False, True, False, True]
    assert all(torch.equal(a, b) for a, b in zip(dqn.q_net.parameters(), dqn.q_net_target.parameters())) is False


def test_soft_target_update_with_several_intervals_in_one_phase():
    dqn = DQN("CartPole-v1", tau=0.5, target_update_interval=2, train_freq=8, learning_starts=10_000, hidden=8)
    with torch.no_grad():
        for p in dqn.q_net_target.parameters():
            p.zero_()
    online = [p.detach().clone() for p in dqn.q_net.parameters()]
    dqn._n_calls = 8
    dqn._after_collect(8)                              # 4 updates with tau 0.5: 1 - 0.5^4 of the way
    for p, o in zip(dqn.q_net_target.parameters(), online):
        torch.testing.assert_close(p, (1 - 0.5 ** 4) * o)


def test_prioritized_replay_updates_priorities_and_anneals_beta():
    dqn = DQN("CartPole-v1", prioritized=True, alpha=0.6, beta_start=0.4, seed=0, **SMALL)
    dqn.train(150)
    assert dqn.beta == pytest.approx(1.0)
    pri = dqn.buffer.priorities()
    assert not np.allclose(pri, pri[0])                # TD errors replaced the initial max priority
    dqn._run_start, dqn._run_end, dqn.num_timesteps = 0, 1000, 250
    assert dqn.beta == pytest.approx(0.4 + 0.6 * 0.25)


def test_epsilon_schedule_follows_the_run():
    dqn = DQN("CartPole-v1", exploration_fraction=0.5, exploration_initial_eps=1.0, exploration_final_eps=0.1,
              hidden=8, **{k: v for k, v in SMALL.items() if k != "hidden"})
    out = dqn.train(200)                               # the logged epsilon is the schedule at the run's end
    assert out["epsilon"] == pytest.approx(0.1)
    dqn._run_start, dqn._run_end, dqn.num_timesteps = 0, 1000, 250
    assert dqn.collector.exploration.epsilon(dqn._progress) == pytest.approx(1.0 - 0.9 * 0.5)


def test_dueling_network_exports_as_the_same_function():
    net = DuelingQNetwork(4, 3, [16, 8])
    seq = _dueling_as_sequential(net)
    obs = torch.randn(32, 4)
    torch.testing.assert_close(seq(obs), net(obs))
    dqn = DQN("CartPole-v1", dueling=True, hidden=8)
    spec = dqn.export_policy()
    assert spec["distribution"] == "greedy"
    torch.testing.assert_close(spec["networks"]["q_net"](obs), dqn.q_net(obs))


def test_save_load_and_exact_resume(tmp_path):
    kw = dict(double_dqn=True, n_step=3, prioritized=True, n_envs=2, train_freq=4, **SMALL)
    a = DQN("CartPole-v1", seed=3, **kw)
    a.train(400)
    a.save(tmp_path / "d.pt", include_buffer=True)
    b = DQN.load(tmp_path / "d.pt")
    obs = np.random.default_rng(0).normal(size=(6, 4)).astype(np.float32)
    np.testing.assert_array_equal(a.predict(obs), b.predict(obs))
    np.testing.assert_array_equal(a.buffer.priorities(), b.buffer.priorities())
    a.train(300)
    b.train(300)
    same_state(a, b)
    np.testing.assert_array_equal(a.buffer.priorities(), b.buffer.priorities())

    class SaveAndStop(Callback):
        def on_update(self, metrics):
            if self.num_timesteps >= 400:
                self.algo.save(tmp_path / "mid.pt", include_buffer=True)
                return False

    full = DQN("CartPole-v1", seed=1, **kw)
    full.train(1000)
    cut = DQN("CartPole-v1", seed=1, callbacks=[SaveAndStop()], **kw)
    cut.train(1000)
    resumed = DQN.load(tmp_path / "mid.pt")
    resumed.train(resume=True)
    same_state(full, resumed)


def test_gymnasium_env_object():
    dqn = DQN(env_id=gym.make("CartPole-v1"), **SMALL)
    out = dqn.train(300)
    assert out["timesteps"] == 300



# LunarLander-v3's preset schedule (the RL Zoo's), small networks: what issue 18 compared with SB3.
_ZOO_SCHEDULE = dict(learning_rate=6.3e-4, buffer_size=50_000, learning_starts=0, gamma=0.99,
                     target_update_interval=250, train_freq=4, gradient_steps=-1, exploration_fraction=0.12,
                     exploration_final_eps=0.1)


def test_schedule_matches_sb3_step_for_step():
    """Gradient steps per phase, target-network copies and the epsilon of every exploring step
    are SB3's (stable_baselines3/dqn/dqn.py ``_on_step``, common/off_policy_algorithm.py ``learn``)."""
    sb3 = pytest.importorskip("stable_baselines3")
    import stable_baselines3.dqn.dqn as sb3_dqn

    import rlox.algorithms.dqn as rlox_dqn

    total = 1200
    ours = {"grad": [], "target": [], "eps": []}
    dqn = DQN("CartPole-v1", seed=0, hidden=8, batch_size=8, **_ZOO_SCHEDULE)
    learn, select = dqn._learn, dqn.collector.exploration.select
    explore = dqn.collector.exploration

    def spy_select(policy, obs, progress):
        ours["eps"].append(explore.epsilon(progress))
        return select(policy, obs, progress)
    dqn._learn = lambda n: (ours["grad"].append((dqn.num_timesteps, n)), learn(n))[1]
    explore.select = spy_select
    polyak = rlox_dqn.polyak_update
    try:
        rlox_dqn.polyak_update = lambda a, b, tau: (ours["target"].append(dqn.num_timesteps), polyak(a, b, tau))[1]
        dqn.train(total)
    finally:
        rlox_dqn.polyak_update = polyak

    theirs = {"grad": [], "target": [], "eps": []}
    model = sb3.DQN("MlpPolicy", "CartPole-v1", seed=0, batch_size=8, policy_kwargs=dict(net_arch=[8]),
                    device="cpu", **_ZOO_SCHEDULE)
    train, predict = model.train, model.predict

    def spy_predict(obs, state=None, episode_start=None, deterministic=False):
        theirs["eps"].append(model.exploration_rate)
        return predict(obs, state, episode_start, deterministic)
    model.train = lambda gradient_steps, batch_size: (theirs["grad"].append((model.num_timesteps, gradient_steps)),
                                                      train(gradient_steps, batch_size))[1]
    model.predict = spy_predict
    sb3_polyak = sb3_dqn.polyak_update

    def spy_polyak(params, targets, tau):
        params = list(params)
        if params:                      # (the second call copies batch-norm statistics: none here)
            theirs["target"].append(model.num_timesteps)
        return sb3_polyak(params, targets, tau)
    try:
        sb3_dqn.polyak_update = spy_polyak
        model.learn(total)
    finally:
        sb3_dqn.polyak_update = sb3_polyak

    assert ours["grad"] == theirs["grad"] and ours["grad"][0] == (4, 4)
    # SB3 copies inside the collection phase (at env step 250, 500, ...); rlox at the end of that
    # phase, before its gradient steps: the same network, since none are taken in between.
    assert ours["target"] == [-(-t // 4) * 4 for t in theirs["target"]] and len(ours["target"]) == total // 250
    # Step 0: SB3 acts greedily (its exploration_rate starts at 0 and is first set after a step).
    np.testing.assert_allclose(ours["eps"][1:], theirs["eps"][1:total], atol=1e-12)


def test_gradient_step_matches_sb3():
    """From the same weights and batches, rlox's update is SB3's (Huber loss, grad-norm clip 10,
    Adam eps 1e-8, hard target): identical weights after 30 steps."""
    sb3 = pytest.importorskip("stable_baselines3")
    import torch.nn.functional as F

    dqn = DQN("CartPole-v1", seed=0, hidden=[32, 32], batch_size=16, **_ZOO_SCHEDULE)
    model = sb3.DQN("MlpPolicy", "CartPole-v1", seed=0, batch_size=16, policy_kwargs=dict(net_arch=[32, 32]),
                    device="cpu", **_ZOO_SCHEDULE)
    linear = lambda m: [x for x in m.modules() if isinstance(x, torch.nn.Linear)]   # noqa: E731
    with torch.no_grad():
        for ours, theirs in ((dqn.q_net, model.q_net), (dqn.q_net_target, model.q_net_target)):
            for a, b in zip(linear(ours), linear(theirs), strict=True):
                a.weight.copy_(b.weight)
                a.bias.copy_(b.bias)
    rng = np.random.default_rng(0)
    for _ in range(30):
        b = {"obs": rng.normal(size=(16, 4)).astype(np.float32), "next_obs": rng.normal(size=(16, 4)).astype(np.float32),
             "actions": rng.integers(0, 2, size=(16, 1)).astype(np.float32),
             "rewards": (10 * rng.normal(size=16)).astype(np.float32),
             "terminated": (rng.random(16) < 0.2).astype(np.float32)}
        dqn._update(b, dqn.td_target(b))
        obs, next_obs = torch.from_numpy(b["obs"]), torch.from_numpy(b["next_obs"])
        with torch.no_grad():
            target = (torch.from_numpy(b["rewards"])[:, None] + (1 - torch.from_numpy(b["terminated"])[:, None])
                      * 0.99 * model.q_net_target(next_obs).max(dim=1).values[:, None])
        q = model.q_net(obs).gather(1, torch.from_numpy(b["actions"]).long())
        loss = F.smooth_l1_loss(q, target)
        model.policy.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.policy.parameters(), 10)
        model.policy.optimizer.step()
    for a, b in zip(linear(dqn.q_net), linear(model.q_net)):
        torch.testing.assert_close(a.weight, b.weight, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_dqn_learns_cartpole():
    """RL Zoo's CartPole hyperparameters, 25k steps (the zoo reaches 500 at 50k)."""
    dqn = DQN("CartPole-v1", seed=0, learning_rate=2.3e-3, batch_size=64, buffer_size=100_000,
              learning_starts=1000, gamma=0.99, target_update_interval=10, train_freq=256,
              gradient_steps=128, exploration_fraction=0.16, exploration_final_eps=0.04, hidden=[256, 256])
    dqn.train(25_000)
    result = evaluate_policy(dqn, "CartPole-v1", n_episodes=10, seed=100)
    assert result["mean_reward"] > 150, result
