"""Offline RL: TD3+BC, IQL, CQL and BC (rlox.algorithms.{td3_bc,iql,cql,bc}) and the dataset
tools of rlox.offline (collect_dataset, normalized_score, loaders' bad-input errors)."""
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlox
from rlox.algorithms.bc import BC, bc_loss
from rlox.algorithms.cql import CQL, cql_penalty, discrete_cql_penalty, mean_action_td_target
from rlox.algorithms.iql import IQL, expectile_loss, iql_actor_loss
from rlox.algorithms.td3_bc import TD3BC, td3_bc_actor_loss
from rlox.callbacks import Callback
from rlox.evaluation import evaluate_policy
from rlox.networks import GaussianPolicy
from rlox.offline import (OfflineDatasetBuffer, collect_dataset, normalized_score, pendulum_swingup_policy,
                          REFERENCE_SCORES)

SMALL = dict(hidden=32, batch_size=32, steps_per_iteration=10)
ALGOS = [(TD3BC, {}), (IQL, {}), (CQL, {}), (CQL, {"target_action_gap": 1.0}), (CQL, {"backup": "mean"}), (BC, {}),
         (BC, {"policy": "gaussian"})]


def arrays(n=200, obs_dim=3, act_dim=2, seed=0):
    rng = np.random.default_rng(seed)
    trunc = np.zeros(n, bool)
    trunc[49::50] = True
    return dict(observations=rng.normal(size=(n, obs_dim)).astype(np.float32),
                next_observations=rng.normal(size=(n, obs_dim)).astype(np.float32),
                actions=rng.uniform(-1, 1, (n, act_dim)).astype(np.float32),
                rewards=rng.normal(size=n).astype(np.float32), terminals=np.zeros(n, bool), timeouts=trunc)


def buffer(**kw):
    a = arrays(**kw)
    return OfflineDatasetBuffer(a["observations"], a["next_observations"], a["actions"], a["rewards"],
                                a["terminals"], a["timeouts"])


@pytest.fixture(scope="module")
def pendulum_expert():
    """The hand-written swing-up controller with a little action noise (about -150 per episode)."""
    return collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 4000, noise=0.1, seed=0)


# ---------------------------------------------------------------- losses against hand computations
def test_td3_bc_actor_loss_by_hand():
    q = torch.tensor([1.0, -3.0])
    pi = torch.tensor([[0.5], [0.0]])
    a = torch.tensor([[0.0], [1.0]])
    loss, lmbda = td3_bc_actor_loss(q, pi, a, alpha=2.5)
    # lambda = 2.5 / mean(|1|, |-3|) = 1.25; -1.25 * mean(1, -3) = 1.25; MSE = (0.25 + 1) / 2
    assert float(lmbda) == pytest.approx(1.25)
    assert float(loss) == pytest.approx(1.25 + 0.625)


def test_expectile_and_iql_actor_loss_by_hand():
    u = torch.tensor([2.0, -1.0])
    # 0.7 * 4 and 0.3 * 1, averaged
    assert float(expectile_loss(u, 0.7)) == pytest.approx((2.8 + 0.3) / 2)
    assert float(expectile_loss(u, 0.5)) == pytest.approx(0.5 * (4 + 1) / 2)
    log_prob = torch.tensor([-1.0, -2.0])
    adv = torch.tensor([0.5, 10.0])
    loss, w = iql_actor_loss(log_prob, adv, temperature=2.0, max_weight=100.0)
    w0 = math.exp(1.0)                         # exp(2 * 0.5); exp(2 * 10) is clipped at 100
    assert float(loss) == pytest.approx(-(w0 * -1.0 + 100.0 * -2.0) / 2, rel=1e-6)
    assert float(w) == pytest.approx((w0 + 100.0) / 2, rel=1e-6)


def test_cql_penalties_by_hand():
    q_data = torch.tensor([[1.0, 0.0]])                          # one critic, B = 2
    q_samples = torch.tensor([[[1.0, 2.0], [0.0, 0.0]]])         # K = 2
    log_density = torch.tensor([[0.0, math.log(2.0)], [0.0, 0.0]])
    pen = cql_penalty(q_data, q_samples, log_density)
    row0 = math.log(math.exp(1.0) + math.exp(2.0 - math.log(2.0))) - 1.0
    row1 = math.log(2.0) - 0.0
    assert pen.shape == (1,) and float(pen[0]) == pytest.approx((row0 + row1) / 2, rel=1e-6)
    # temperature T: T * logsumexp(x / T)
    pen_t = cql_penalty(q_data, q_samples, log_density, temperature=2.0)
    row0_t = 2 * math.log(math.exp(0.5) + math.exp((2.0 - math.log(2.0)) / 2)) - 1.0
    row1_t = 2 * math.log(2.0)
    assert float(pen_t[0]) == pytest.approx((row0_t + row1_t) / 2, rel=1e-6)
    qv = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]])
    got = discrete_cql_penalty(qv, torch.tensor([2, 0]))
    want = ((math.log(math.e + math.e ** 2 + math.e ** 3) - 3.0) + (math.log(3.0) - 0.0)) / 2
    assert float(got) == pytest.approx(want, rel=1e-6)


def test_cql_mean_action_target_by_hand():
    class Actor:   # mean action tanh(obs[:, 0]); never sampled
        def deterministic(self, obs):
            return torch.tanh(obs[:, :1])

    def critic_target(obs, act):   # two critics: Q1 = obs_1 + a, Q2 = obs_1 + 2a
        return torch.stack([obs[:, 1] + act[:, 0], obs[:, 1] + 2 * act[:, 0]])

    next_obs = torch.tensor([[0.5, 1.0], [-0.5, 3.0]])
    got = mean_action_td_target(Actor(), critic_target, torch.tensor([1.0, -1.0]), torch.tensor([1.0, 0.0]),
                                next_obs, gamma=0.9)
    a0 = math.tanh(0.5)                      # min(1 + a0, 1 + 2 a0) = 1 + a0; row 2 is done
    assert got.tolist() == pytest.approx([1.0 + 0.9 * (1.0 + a0), -1.0], rel=1e-6)


def test_bc_losses_and_gaussian_log_prob_by_hand():
    pred, a = torch.tensor([[0.5, 0.0]]), torch.tensor([[0.0, 1.0]])
    assert float(bc_loss("deterministic", pred, a)) == pytest.approx((0.25 + 1.0) / 2)
    assert float(bc_loss("gaussian", torch.tensor([-1.0, -3.0]), a)) == pytest.approx(2.0)
    logits = torch.tensor([[0.0, math.log(3.0)]])
    assert float(bc_loss("discrete", logits, torch.tensor([1]))) == pytest.approx(-math.log(0.75))
    with pytest.raises(ValueError, match="unknown BC loss 'x'"):
        bc_loss("x", pred, a)
    pol = GaussianPolicy(3, 2, hidden=8)
    obs, act = torch.randn(4, 3), torch.rand(4, 2) * 2 - 1
    mean, log_std = pol(obs)
    want = torch.distributions.Normal(mean, log_std.exp()).log_prob(act).sum(-1)
    torch.testing.assert_close(pol.log_prob(obs, act), want)


# ---------------------------------------------------------------- the guide's path on every algorithm
@pytest.mark.parametrize("cls,kw", ALGOS, ids=lambda x: getattr(x, "__name__", str(x)))
def test_train_predict_save_load(cls, kw, tmp_path):
    buf = buffer()
    algo = cls(dataset=buf, obs_dim=3, act_dim=2, seed=1, **SMALL, **kw)
    m = algo.train(n_gradient_steps=20)
    assert m["timesteps"] == 20 and m["n_updates"] == 20
    for name in algo.metric_names:
        assert np.isfinite(m[name]) or name in ("actor_loss", "bc_loss", "lambda")
    obs = np.random.default_rng(2).normal(size=(5, 3)).astype(np.float32)
    act = algo.predict(obs, deterministic=True)
    assert act.shape == (5, 2) and np.all(np.abs(act) <= 1)
    assert algo.predict(obs[0], deterministic=True).shape == (2,)
    algo.save(tmp_path / "m.pt")
    back = cls.load(tmp_path / "m.pt")                      # no dataset: predict only
    np.testing.assert_array_equal(back.predict(obs, deterministic=True), act)
    with pytest.raises(ValueError, match="has no dataset to train on"):
        back.train(n_gradient_steps=5)


class _StopAfterFirst(Callback):
    def on_update(self, metrics):
        return False


@pytest.mark.parametrize("cls,kw", [(TD3BC, {}), (CQL, {"target_action_gap": 1.0}), (IQL, {})],
                         ids=["td3_bc", "cql", "iql"])
def test_resume_is_exact(cls, kw, tmp_path):
    buf = buffer()
    full = cls(dataset=buf, seed=3, **SMALL, **kw)
    full.train(n_gradient_steps=30)
    part = cls(dataset=buf, seed=3, callbacks=[_StopAfterFirst()], **SMALL, **kw)
    part.train(n_gradient_steps=30)
    assert part.num_timesteps == 10
    part.save(tmp_path / "half.pt")
    resumed = cls.load(tmp_path / "half.pt", dataset=buf)
    resumed.train(resume=True)
    assert resumed.num_timesteps == 30
    for name, module in full._modules().items():
        for a, b in zip(module.state_dict().values(), resumed._modules()[name].state_dict().values()):
            torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_observation_statistics_are_saved_and_applied(tmp_path):
    a = arrays(obs_dim=3)
    a["observations"] = a["observations"] * 10 + 50
    buf = OfflineDatasetBuffer(a["observations"], a["next_observations"] * 10 + 50, a["actions"], a["rewards"],
                               a["terminals"], a["timeouts"])
    algo = TD3BC(dataset=buf, **SMALL)                       # normalize_obs=True by default
    algo.train(n_gradient_steps=10)
    norm = algo.obs_normalizer()
    np.testing.assert_allclose(norm.mean, buf.obs_mean)
    np.testing.assert_allclose(norm.std, buf.obs_std)
    obs = a["observations"][:4]
    with torch.no_grad():
        want = algo.actor(torch.as_tensor((obs - buf.obs_mean) / buf.obs_std)).numpy()
    np.testing.assert_allclose(algo.predict(obs), want, rtol=1e-5, atol=1e-6)
    algo.save(tmp_path / "n.pt")
    np.testing.assert_array_equal(TD3BC.load(tmp_path / "n.pt").predict(obs), algo.predict(obs))
    # a dataset normalised by the buffer itself: its statistics are the model's
    pre = OfflineDatasetBuffer(a["observations"], a["next_observations"] * 10 + 50, a["actions"], a["rewards"],
                               a["terminals"], a["timeouts"], normalize=True)
    bc = BC(dataset=pre, **SMALL)
    np.testing.assert_allclose(bc.obs_normalizer().mean, pre.obs_mean)
    assert not bc._norm_in_batch


def test_action_bounds_from_the_env_and_from_the_data(pendulum_expert):
    algo = BC(dataset=pendulum_expert, env_id="Pendulum-v1", **SMALL)
    np.testing.assert_array_equal(algo.action_space.high, [2.0])
    batch = algo.sample_batch()
    assert float(batch.actions.abs().max()) <= 1.0 and float(batch.actions.abs().max()) > 0.5
    no_env = BC(dataset=pendulum_expert, **SMALL)            # bounds: the dataset's min and max
    assert no_env.action_space.high[0] == pytest.approx(2.0) and no_env.action_space.low[0] == pytest.approx(-2.0)


# ---------------------------------------------------------------- learning
def test_bc_and_td3_bc_learn_pendulum_from_an_expert_dataset(pendulum_expert):
    expert = pendulum_expert.stats()["mean_return"]
    assert expert > -200
    random_return = REFERENCE_SCORES["Pendulum-v1"][0]
    bc = BC(dataset=pendulum_expert, seed=0, hidden=64, batch_size=128, steps_per_iteration=500)
    bc.train(n_gradient_steps=1500)
    r_bc = evaluate_policy(bc, "Pendulum-v1", n_episodes=5, seed=100)["mean_reward"]
    td3bc = TD3BC(dataset=pendulum_expert, seed=0, hidden=64, batch_size=128, learning_rate=1e-3,
                  steps_per_iteration=500)
    td3bc.train(n_gradient_steps=2000)
    r_td3bc = evaluate_policy(td3bc, "Pendulum-v1", n_episodes=5, seed=100)["mean_reward"]
    # random actions score about -1200, the expert about -150
    assert r_bc > -350, (r_bc, expert, random_return)
    assert r_td3bc > -400, (r_td3bc, expert, random_return)
    assert normalized_score("Pendulum-v1", r_td3bc) > 70


def test_periodic_evaluation_through_the_harness(pendulum_expert, tmp_path):
    from rlox.logging import CSVLogger

    algo = BC(dataset=pendulum_expert, eval_env="Pendulum-v1", eval_freq=20, n_eval_episodes=1,
              logger=CSVLogger(tmp_path / "log.csv"), **SMALL)
    m = algo.train(n_gradient_steps=40)
    assert np.isfinite(m["eval_mean_reward"])
    assert "eval/mean_reward" in (tmp_path / "log.csv").read_text().splitlines()[0]
    ev = [cb for cb in algo.callbacks if type(cb).__name__ == "EvalCallback"][0]
    assert [e["step"] for e in ev.evaluations] == [20, 40]


def test_discrete_bc_and_cql():
    buf = collect_dataset(None, "CartPole-v1", 300, seed=0)  # random actions
    for cls in (BC, CQL):
        algo = cls(dataset=buf, env_id="CartPole-v1", **SMALL)
        m = algo.train(n_gradient_steps=20)
        assert all(np.isfinite(m[k]) for k in algo.metric_names)
        a = algo.predict(np.zeros(4, np.float32))
        assert isinstance(a, np.int64) and a in (0, 1)
    space_only = BC(dataset=buf, action_space=gym.spaces.Discrete(2), **SMALL)
    assert space_only.act_dim == 2
    with pytest.raises(ValueError, match="TD3BC learns continuous actions only.*use BC or CQL"):
        TD3BC(dataset=buf, env_id="CartPole-v1")
    with pytest.raises(ValueError, match=r"dataset action 1.0 at transition \d+ is not an integer in \[0, 1\)"):
        BC(dataset=buf, action_space=gym.spaces.Discrete(1))


# The shortest path on the deterministic 4x4 FrozenLake (0 left, 1 down, 2 right, 3 up).
FROZEN_PATH = {0: 1, 4: 1, 8: 2, 9: 2, 10: 1, 14: 2}


def test_discrete_and_tuple_observations_are_one_hot_encoded(tmp_path):
    # collect_dataset (and Minari) store a Discrete observation as one integer; with the env
    # given, the algorithms one-hot it, as the env boundary does in evaluation and predict.
    lake = lambda: gym.make("FrozenLake-v1", is_slippery=False)  # noqa: E731
    expert = lambda s: FROZEN_PATH.get(int(s), 0)  # noqa: E731
    path = tmp_path / "lake.npz"
    collect_dataset(expert, lake(), 1500, epsilon=0.3, seed=0, path=path)
    assert np.load(path)["observations"].shape == (1500, 1)
    bc = BC(dataset=str(path), env_id=lake(), seed=0, hidden=32, batch_size=64, steps_per_iteration=100)
    assert bc.obs_dim == 16 and bc.dataset.gather(np.arange(2))["obs"].sum(axis=1).tolist() == [1.0, 1.0]
    bc.train(n_gradient_steps=600)
    assert [int(bc.predict(s, deterministic=True)) for s in FROZEN_PATH] == list(FROZEN_PATH.values())
    np.testing.assert_array_equal(bc.predict(np.eye(16, dtype=np.float32)[[0, 14]], deterministic=True), [1, 2])
    assert evaluate_policy(bc, lake(), n_episodes=1)["mean_reward"] == 1.0
    bc.save(tmp_path / "bc.pt")
    assert int(BC.load(tmp_path / "bc.pt").predict(14, deterministic=True)) == 2
    # Tuple observations (Blackjack: sum, dealer card, usable ace) become 32 + 11 + 2 floats.
    jack = collect_dataset(None, "Blackjack-v1", 300, seed=0)
    assert jack.obs_dim == 3
    cql = CQL(dataset=jack, env_id="Blackjack-v1", **SMALL)
    assert cql.obs_dim == 45 and np.isfinite(cql.train(n_gradient_steps=20)["critic_loss"])
    assert cql.predict((14, 10, 0)) in (0, 1)
    with pytest.raises(ValueError, match=r"dataset observations: .*Discrete\(16\)"):
        BC(dataset=dict(observations=np.full((4, 1), 20.0), next_observations=np.zeros((4, 1)),
                        actions=np.zeros((4, 1)), rewards=np.zeros(4), terminals=np.ones(4, bool)), env_id=lake())
    with pytest.raises(ValueError, match=r"observations\[0\] = \[0.5\] is not an integer observation"):
        BC(dataset=dict(observations=np.full((4, 1), 0.5), next_observations=np.zeros((4, 1)),
                        actions=np.zeros((4, 1)), rewards=np.zeros(4), terminals=np.ones(4, bool)), env_id=lake())


# ---------------------------------------------------------------- datasets: making, files, Minari
def test_collect_dataset_npz_and_replay_buffer(tmp_path):
    buf = collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 250, noise=0.2, epsilon=0.1, seed=4,
                          path=tmp_path / "d.npz")
    st = buf.stats()
    assert st["n_transitions"] == 250 and st["n_episodes"] == 2      # 200 + a cut 50
    back = OfflineDatasetBuffer.from_npz(tmp_path / "d.npz")
    for k, v in buf.arrays().items():
        np.testing.assert_array_equal(back.arrays()[k], v)
    again = collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 250, noise=0.2, epsilon=0.1, seed=4)
    np.testing.assert_array_equal(again.arrays()["actions"], buf.arrays()["actions"])
    # a trained agent's replay buffer -> a dataset (D4RL's medium-replay), oldest first after wrap-around
    rb = rlox.ReplayBuffer(100, obs_dim=3, act_dim=1)
    a = buf.arrays()
    rb.push_batch(a["observations"][:130], a["actions"][:130], a["rewards"][:130], a["terminals"][:130],
                  a["timeouts"][:130], a["next_observations"][:130])
    ds = OfflineDatasetBuffer.from_replay_buffer(rb)
    np.testing.assert_array_equal(ds.arrays()["rewards"], a["rewards"][30:130])
    algo = IQL(dataset=rb, **SMALL)                            # a ReplayBuffer is a dataset= too
    assert len(algo.dataset) == 100
    with pytest.raises(ValueError, match="epsilon = 2 is out of range"):
        collect_dataset(None, "Pendulum-v1", 10, epsilon=2)
    with pytest.raises(ValueError, match="Discrete, use epsilon="):
        collect_dataset(None, "CartPole-v1", 10, noise=0.1)


def test_minari_round_trip(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari", reason="minari is in the dev and offline extras")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    buf = collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 300, noise=0.1, seed=1,
                          minari_id="rloxtest/pendulum-expert-v0")
    ds = minari.load_dataset("rloxtest/pendulum-expert-v0")
    assert ds.total_steps == 300 and ds.total_episodes == 2
    ep = next(iter(ds.iterate_episodes()))
    np.testing.assert_allclose(ep.actions, buf.arrays()["actions"][:200], rtol=1e-6)
    back = OfflineDatasetBuffer.from_minari("rloxtest/pendulum-expert-v0")
    for k in ("observations", "next_observations", "actions", "rewards", "terminals"):
        np.testing.assert_allclose(back.arrays()[k], buf.arrays()[k], rtol=1e-6, err_msg=k)
    algo = TD3BC(dataset="rloxtest/pendulum-expert-v0", env_id="Pendulum-v1", **SMALL)
    assert np.isfinite(algo.train(n_gradient_steps=10)["critic_loss"])
    with pytest.raises(ValueError, match="already exists"):
        collect_dataset(None, "Pendulum-v1", 10, minari_id="rloxtest/pendulum-expert-v0")
    with pytest.raises(ValueError, match=r"Minari dataset 'rloxtest/missing-v0' is not installed on this machine"
                                         r".*collect_dataset.*minari download rloxtest/missing-v0"):
        TD3BC(dataset="rloxtest/missing-v0")


def test_normalized_score():
    lo, hi, _ = REFERENCE_SCORES["Pendulum-v1"]
    assert normalized_score("Pendulum-v1", hi) == pytest.approx(100.0)
    np.testing.assert_allclose(normalized_score("Pendulum-v1", [lo, (lo + hi) / 2]), [0.0, 50.0])
    assert normalized_score("Foo-v0", 5.0, ref_min=0.0, ref_max=10.0) == pytest.approx(50.0)
    with pytest.raises(KeyError, match="no reference returns for 'Foo-v0'.*ref_min="):
        normalized_score("Foo-v0", 1.0)


# ---------------------------------------------------------------- bad input
def test_dimension_mismatches_name_both_values():
    buf = buffer(obs_dim=3, act_dim=2)
    with pytest.raises(ValueError, match=r"obs_dim=17, but the dataset's observations have 3 values each; "
                                         r"pass obs_dim=3"):
        TD3BC(dataset=buf, obs_dim=17, act_dim=2)
    with pytest.raises(ValueError, match=r"act_dim=6, but the dataset's actions have 2 values each"):
        IQL(dataset=buf, obs_dim=3, act_dim=6)
    with pytest.raises(ValueError, match=r"the dataset has obs_dim=4, but Pendulum-v1 observations have shape "
                                         r"\(3,\); evaluate in the env the data came from"):
        BC(dataset=buffer(obs_dim=4, act_dim=1), env_id="Pendulum-v1")
    with pytest.raises(ValueError, match="needs a dataset, or obs_dim and act_dim"):
        BC()


def test_missing_flags_non_finite_values_and_empty_datasets(tmp_path):
    a = arrays()
    np.savez(tmp_path / "noflags.npz", **{k: v for k, v in a.items() if k not in ("terminals", "timeouts")})
    with pytest.raises(ValueError, match="has no episode-end flags.*Add a boolean 'terminals' array"):
        TD3BC(dataset=str(tmp_path / "noflags.npz"))
    h5py = pytest.importorskip("h5py", reason="h5py is in the dev and offline extras")
    with h5py.File(tmp_path / "noflags.hdf5", "w") as f:
        for k in ("observations", "actions", "rewards"):
            f[k] = a[k]
    with pytest.raises(ValueError, match="has no episode-end flags"):
        IQL(dataset=tmp_path / "noflags.hdf5")
    bad = dict(a)
    bad["observations"] = a["observations"].copy()
    bad["observations"][17, 2] = np.inf
    with pytest.raises(ValueError, match=r"obs holds a non-finite value \(inf\) at transition 17, column 2"):
        BC(dataset=bad)
    bad = dict(a, rewards=a["rewards"].copy())
    bad["rewards"][5] = np.nan
    with pytest.raises(ValueError, match=r"rewards holds a non-finite value \(nan\) at transition 5"):
        CQL(dataset=bad)
    np.savez(tmp_path / "empty.npz", **{k: v[:0] for k, v in a.items()})
    with pytest.raises(ValueError, match="the dataset is empty"):
        BC(dataset=tmp_path / "empty.npz")
    with pytest.raises(ValueError, match="the replay buffer is empty"):
        BC(dataset=rlox.ReplayBuffer(10, obs_dim=3, act_dim=2))
    with pytest.raises(TypeError, match="dataset must be an OfflineDatasetBuffer"):
        BC(dataset=42)
    with pytest.raises(ValueError, match="CQLConfig.cql_alpha = -1"):
        CQL(dataset=a, cql_alpha=-1)
    with pytest.raises(ValueError, match="CQLConfig.backup = 'max' is not allowed; expected one of 'soft', 'mean'"):
        CQL(dataset=a, backup="max")


# ---------------------------------------------------------------- Trainer and CLI
def test_trainer_and_cli(tmp_path, capsys):
    from rlox import Trainer
    from rlox.cli import main

    collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 300, seed=0, path=tmp_path / "p.npz")
    trainer = Trainer("iql", dataset=str(tmp_path / "p.npz"), env="Pendulum-v1", **SMALL)
    m = trainer.train(total_timesteps=20)
    assert m["timesteps"] == 20
    assert trainer.predict(np.zeros(3, np.float32)).shape == (1,)
    rc = main(["train", "--algo", "bc", "--dataset", str(tmp_path / "p.npz"), "--env", "Pendulum-v1",
               "--timesteps", "30", "--save", str(tmp_path / "bc.pt"), "--eval-episodes", "1"])
    out = capsys.readouterr().out
    assert rc == 0 and "trained bc" in out and "30 gradient steps" in out and "eval:" in out
    assert BC.load(tmp_path / "bc.pt").predict(np.zeros(3, np.float32)).shape == (1,)


def test_exported_actor_matches_predict(tmp_path):
    """The artifacts (actor.safetensors + normaliser) rebuilt with torch alone act like predict."""
    from rlox import Trainer
    from rlox.inference import InferencePolicy

    collect_dataset(pendulum_swingup_policy, "Pendulum-v1", 300, seed=0, path=tmp_path / "p.npz")
    obs = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32) * 3
    for algo in ("td3_bc", "cql"):
        t = Trainer(algo, dataset=str(tmp_path / "p.npz"), env="Pendulum-v1", artifacts_dir=tmp_path / algo,
                    eval_freq=20, eval_episodes=1, **SMALL)     # one evaluation: at the end
        t.train(total_timesteps=20)
        pol = InferencePolicy.load(tmp_path / algo)
        np.testing.assert_allclose(np.stack([pol.act(o) for o in obs]).reshape(6, 1),
                                   t.algo.predict(obs, deterministic=True), rtol=1e-5, atol=1e-5)
