"""The off-policy framework: OffPolicyCollector (what reaches the buffer, truncation), Polyak
updates, FastAdam, buffer injection, save/load with the buffer, bad input."""
import gymnasium as gym
import numpy as np
import pytest
import torch

import rlox
from rlox.algorithms.dqn import DQN
from rlox.algorithms.off_policy import OffPolicyWarning, buffer_path
from rlox.optim import FastAdam, polyak_update
from rlox.algorithms.sac import SAC
from rlox.algorithms.td3 import TD3
from rlox.callbacks import Callback
from rlox.checkpointing import CheckpointError
from rlox.exploration import EpsilonGreedy, GaussianNoise
from rlox.off_policy_collector import OffPolicyCollector
from tests._off_policy_envs import COUNTER_BOX_ID, COUNTER_ID, COUNTER_TERM_ID

SMALL = dict(hidden=16, batch_size=32, learning_starts=50, buffer_size=5_000)


def all_transitions(buf):
    return buf.gather(np.arange(len(buf)))


def random_policy(n_actions):
    rng = np.random.default_rng(0)
    return lambda obs: rng.integers(0, n_actions, size=len(obs))


# ------------------------------------------------------------------ the collector
@pytest.mark.parametrize("n_envs", [1, 2])
def test_collector_stores_true_final_obs_on_truncation(n_envs):
    buf = rlox.ReplayBuffer(1000, obs_dim=2, act_dim=1)
    col = OffPolicyCollector(COUNTER_ID, n_envs=n_envs, buffer=buf, seed=0)
    res = col.collect(random_policy(2), 12)
    assert res.steps == 12 and len(buf) == 12 * n_envs       # one push_batch per vector step
    assert res.episode_lengths == [5] * (2 * n_envs) and res.episode_returns == [15.0] * (2 * n_envs)
    tr = all_transitions(buf)
    obs, nxt = tr["obs"].reshape(12, n_envs, 2), tr["next_obs"].reshape(12, n_envs, 2)
    trunc, term = tr["truncated"].reshape(12, n_envs), tr["terminated"].reshape(12, n_envs)
    rew = tr["rewards"].reshape(12, n_envs)
    for k in range(12):
        t = k % 5
        np.testing.assert_array_equal(obs[k, :, 0], t)
        np.testing.assert_array_equal(nxt[k, :, 0], t + 1)       # (5, ep) at the limit, not (0, ep + 1)
        np.testing.assert_array_equal(nxt[k, :, 1], k // 5)
        np.testing.assert_array_equal(rew[k], t + 1)
        assert np.all(trunc[k] == (t == 4)) and not term[k].any()
    np.testing.assert_array_equal(col.obs[:, 0], 2)              # 12 steps: 2 into episode 3


def test_collector_terminated_steps_and_single_env_object_path():
    env = gym.make(COUNTER_TERM_ID)
    buf = rlox.ReplayBuffer(100, obs_dim=2, act_dim=1)
    col = OffPolicyCollector(env, n_envs=1, buffer=buf, seed=3)
    assert col.env.env is env                                   # the object itself, no vector wrapper
    col.collect(random_policy(2), 8)
    tr = all_transitions(buf)
    assert tr["terminated"].tolist() == [0, 0, 0, 1, 0, 0, 0, 1]
    assert tr["truncated"].sum() == 0
    assert tr["next_obs"][3].tolist() == [4.0, 0.0]              # final obs of episode 0
    assert tr["obs"][4].tolist() == [0.0, 1.0]


def test_collector_scales_continuous_actions_and_stores_normalised_ones():
    env = gym.make(COUNTER_BOX_ID)
    buf = rlox.ReplayBuffer(100, obs_dim=2, act_dim=1)
    col = OffPolicyCollector(env, buffer=buf, seed=0)
    col.collect(lambda obs: np.array([[-1.0]], dtype=np.float32), 1)
    col.collect(lambda obs: np.array([[1.0]], dtype=np.float32), 1)
    col.collect(lambda obs: np.array([[0.0]], dtype=np.float32), 1)
    seen = [float(a[0]) for a in env.unwrapped.actions]
    assert seen == [-3.0, 5.0, 1.0]                              # [-1, 1] -> [-3, 5]
    assert all_transitions(buf)["actions"][:, 0].tolist() == [-1.0, 1.0, 0.0]


def test_collector_native_env_truncation_and_random_actions():
    buf = rlox.ReplayBuffer(2000, obs_dim=3, act_dim=1)
    col = OffPolicyCollector("Pendulum-v1", n_envs=2, buffer=buf, seed=0)
    assert type(col.env).__name__ == "VecEnv"
    res = col.collect(None, 200, random=True)
    assert res.episode_lengths == [200, 200]
    tr = all_transitions(buf)
    last = tr["truncated"].reshape(200, 2)[-1]
    assert last.tolist() == [1.0, 1.0]
    # The stored next_obs of the last step is the final state, and the collector moved on to a reset.
    assert not np.allclose(tr["next_obs"].reshape(200, 2, 3)[-1], col.obs)
    acts = tr["actions"]
    assert acts.min() >= -1 and acts.max() <= 1 and acts.std() > 0.4     # uniform in [-1, 1]


def test_collector_exploration_is_seeded_from_the_collector():
    cols = [OffPolicyCollector("Pendulum-v1", 1, rlox.ReplayBuffer(100, 3, 1), GaussianNoise(0.5), seed=4)
            for _ in range(2)]
    for c in cols:
        c.collect(lambda obs: np.zeros((1, 1), np.float32), 20)
    np.testing.assert_array_equal(all_transitions(cols[0].buffer)["actions"],
                                  all_transitions(cols[1].buffer)["actions"])


def test_collector_bad_input():
    with pytest.raises(RuntimeError, match="no buffer"):
        OffPolicyCollector("Pendulum-v1").collect(None, 1, random=True)
    with pytest.raises(ValueError, match="n_envs"):
        OffPolicyCollector("Pendulum-v1", n_envs=0)
    with pytest.raises(ValueError, match="EpsilonGreedy"):
        OffPolicyCollector("Pendulum-v1", exploration=EpsilonGreedy())


# ------------------------------------------------------------------ shared maths
def test_polyak_update_maths():
    params = [torch.ones(3), torch.full((2, 2), 4.0)]
    targets = [torch.zeros(3), torch.zeros(2, 2)]
    polyak_update(params, targets, 0.25)
    torch.testing.assert_close(targets[0], torch.full((3,), 0.25))
    torch.testing.assert_close(targets[1], torch.full((2, 2), 1.0))
    polyak_update(params, targets, 0.25)                        # 0.25 + 0.25 * (1 - 0.25)
    torch.testing.assert_close(targets[0], torch.full((3,), 0.4375))
    polyak_update(params, targets, 1.0)                         # hard copy
    torch.testing.assert_close(targets[1], params[1])


def test_fast_adam_matches_torch_adam_and_its_state_dict():
    torch.manual_seed(0)
    nets = [torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)) for _ in range(2)]
    nets[1].load_state_dict(nets[0].state_dict())
    opts = [torch.optim.Adam(nets[0].parameters(), lr=1e-2), FastAdam(nets[1].parameters(), 1e-2)]
    x = torch.randn(16, 4)
    for _ in range(25):
        for net, opt in zip(nets, opts):
            opt.zero_grad()
            (net(x) ** 2).mean().backward()
            opt.step()
    for a, b in zip(nets[0].parameters(), nets[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    plain = torch.optim.Adam(nets[1].parameters(), lr=1e-2)
    plain.load_state_dict(opts[1].state_dict())
    assert int(plain.state_dict()["state"][0]["step"]) == 25


# ------------------------------------------------------------------ algorithms: set-up and bad input
def test_wrong_action_space_names_the_right_algorithm():
    with pytest.raises(ValueError, match="use DQN"):
        SAC("CartPole-v1")
    with pytest.raises(ValueError, match="use DQN"):
        TD3("Acrobot-v1")
    with pytest.raises(ValueError, match="use SAC or TD3"):
        DQN("Pendulum-v1")


def test_predict_checks_the_observation_shape():
    sac = SAC("Pendulum-v1", **SMALL)
    with pytest.raises(ValueError, match=r"obs has shape \(4,\), expected \(3,\)"):
        sac.predict(np.zeros(4, np.float32))
    dqn = DQN("CartPole-v1", hidden=16)
    with pytest.raises(ValueError, match="expected \\(4,\\)"):
        dqn.predict(np.zeros((2, 3), np.float32))


def test_learning_starts_beyond_the_budget_warns():
    sac = SAC("Pendulum-v1", **{**SMALL, "learning_starts": 500})
    with pytest.warns(OffPolicyWarning, match="learning_starts = 500"):
        sac.train(100)
    assert sac._n_updates == 0 and len(sac.buffer) == 100


def test_injected_buffer_and_collector():
    buf = rlox.ReplayBuffer(10_000, obs_dim=3, act_dim=1)
    collector = OffPolicyCollector(env_id="Pendulum-v1", n_envs=4, buffer=buf, exploration=GaussianNoise(sigma=0.1))
    sac = SAC(env_id="Pendulum-v1", buffer=buf, collector=collector, **SMALL)
    assert sac.buffer is buf and sac.collector is collector and sac.config.n_envs == 4
    sac.train(200)
    assert len(buf) == 200 and sac._n_updates == sum(1 for k in range(1, 51) if 4 * k > 50)
    with pytest.raises(ValueError, match="different buffer"):
        SAC("Pendulum-v1", buffer=rlox.ReplayBuffer(10, 3, 1), collector=collector)
    with pytest.raises(ValueError, match="n_envs = 2"):
        SAC("Pendulum-v1", collector=collector, n_envs=2)
    with pytest.raises(ValueError, match="act_dim"):
        SAC("Pendulum-v1", buffer=rlox.ReplayBuffer(10, 3, 2))
    with pytest.raises(ValueError, match="steps 'Pendulum-v1'"):
        SAC("MountainCarContinuous-v0", collector=collector)


def test_dqn_injected_collector_without_exploration_gets_epsilon_greedy():
    col = OffPolicyCollector("CartPole-v1", n_envs=2, buffer=rlox.ReplayBuffer(1000, 4, 1))
    dqn = DQN("CartPole-v1", collector=col, hidden=16)
    assert isinstance(col.exploration, EpsilonGreedy) and dqn.n_envs == 2


def test_iterations_chunk_the_loop_and_callbacks_see_them():
    seen = []

    class Spy(Callback):
        def on_update(self, metrics):
            seen.append((metrics["train/timesteps"], metrics["train/n_updates"]))

    sac = SAC("Pendulum-v1", callbacks=[Spy()], steps_per_iteration=100, **SMALL)
    out = sac.train(350)
    assert [s for s, _ in seen] == [100, 200, 300, 350]
    assert seen[-1][1] == 350 - 50 and out["timesteps"] == 350       # learns once past step 50
    assert np.isfinite(out["critic_loss"]) and "ent_coef" in out
    assert sac.timings["gradient_update"] > 0 and sac.timings["env_step"] > 0


def test_on_step_callback_can_stop_training():
    class StopAt(Callback):
        def on_step(self):
            return self.num_timesteps < 30

    dqn = DQN("CartPole-v1", callbacks=[StopAt()], hidden=16)
    dqn.train(1000)
    assert dqn.num_timesteps == 30


# ------------------------------------------------------------------ save / load with the buffer
def test_save_with_buffer_and_without(tmp_path):
    sac = SAC("Pendulum-v1", **SMALL)
    sac.train(300)
    path = tmp_path / "sac.pt"
    sac.save(path, include_buffer=True)
    assert buffer_path(path).is_file()
    loaded = SAC.load(path)
    assert len(loaded.buffer) == 300
    np.testing.assert_array_equal(all_transitions(loaded.buffer)["obs"], all_transitions(sac.buffer)["obs"])
    sac.save(path)                                   # without: the stale buffer file goes
    assert not buffer_path(path).exists()
    fresh = SAC.load(path)
    assert len(fresh.buffer) == 0 and fresh.num_timesteps == 300
    fresh.train(100)                                 # learning resumes once the buffer has data
    assert fresh._n_updates > sac._n_updates


def test_load_refuses_a_missing_or_mismatched_buffer(tmp_path):
    sac = SAC("Pendulum-v1", **SMALL)
    sac.train(120)
    path = tmp_path / "m.pt"
    sac.save(path, include_buffer=True)
    other = SAC("Pendulum-v1", **SMALL)
    other.train(60)
    other.buffer.save(str(buffer_path(path)))
    with pytest.raises(CheckpointError, match="different saves"):
        SAC.load(path)
    buffer_path(path).unlink()
    with pytest.raises(CheckpointError, match="missing"):
        SAC.load(path)
    with pytest.raises(CheckpointError, match="'sac' model, not 'td3'"):
        TD3.load(path)


def _bf16(make):
    """Build with precision='bfloat16': on a CPU without bfloat16 matrix instructions the
    constructor must warn that it will be slower (and still work)."""
    from rlox.algorithms.off_policy import OffPolicyWarning, _cpu_has_fast_bf16

    if _cpu_has_fast_bf16():
        return make()
    with pytest.warns(OffPolicyWarning, match="no bfloat16 matrix instructions.*precision='float32'"):
        return make()


def test_bfloat16_precision_keeps_float32_weights_and_state(tmp_path):
    sac = _bf16(lambda: SAC("Pendulum-v1", precision="bfloat16", **SMALL))
    out = sac.train(200)
    assert np.isfinite(out["critic_loss"]) and np.isfinite(out["actor_loss"])
    assert all(p.dtype == torch.float32 for p in sac.critic.parameters())
    assert all(s["exp_avg"].dtype == torch.float32 for s in sac.critic_optimizer.state.values())
    assert sac.predict(np.zeros(3, np.float32)).dtype == np.float32
    dqn = _bf16(lambda: DQN("CartPole-v1", precision="bfloat16", n_step=2, double_dqn=True, **SMALL))
    assert np.isfinite(dqn.train(300)["loss"])
    with pytest.raises(ValueError, match="precision"):
        SAC("Pendulum-v1", precision="float16")


@pytest.mark.parametrize("make", [
    lambda: SAC("Pendulum-v1", **SMALL),
    lambda: TD3("MountainCarContinuous-v0", **SMALL),
    lambda: DQN("CartPole-v1", **SMALL),
    lambda: DQN("Acrobot-v1", dueling=True, **SMALL),
], ids=["sac", "td3", "dqn", "dueling-dqn"])
def test_exported_inference_policy_acts_like_predict(tmp_path, make):
    from rlox.artifacts import export_inference
    from rlox.inference import InferencePolicy

    algo = make()
    algo.train(120)
    export_inference(algo, tmp_path)
    policy = InferencePolicy.load(tmp_path)
    obs = np.random.default_rng(0).normal(size=(32, *algo.observation_space.shape)).astype(np.float32)
    ours = algo.predict(obs, deterministic=True)
    theirs = policy.act(obs, deterministic=True)
    if np.issubdtype(np.asarray(ours).dtype, np.integer):
        np.testing.assert_array_equal(theirs, ours)
    else:
        np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)


def test_gymnasium_env_kwargs_survive_save_and_load(tmp_path):
    env = gym.make("Pendulum-v1", g=5.0)
    sac = SAC(env_id=env, **SMALL)
    sac.train(60)
    sac.save(tmp_path / "g.pt")
    loaded = SAC.load(tmp_path / "g.pt")
    assert loaded.collector.env.env.unwrapped.g == 5.0


def test_anneal_lr_decays_linearly_over_the_run():
    seen = []

    class Spy(Callback):
        def on_update(self, metrics):
            seen.append((metrics["train/timesteps"], metrics["train/learning_rate"]))

    dqn = DQN("CartPole-v1", anneal_lr=True, learning_rate=1e-3, learning_starts=0, train_freq=10,
              steps_per_iteration=100, callbacks=[Spy()], hidden=8)
    dqn.train(400)
    # The rate of the last learning phase of each iteration: set after collecting up to that step.
    assert [t for t, _ in seen] == [100, 200, 300, 400]
    for t, lr in seen:
        assert lr == pytest.approx(1e-3 * (1 - t / 400), abs=1e-12)
