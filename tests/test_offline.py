"""OfflineDatasetBuffer (rlox/offline.py) and its loaders, on small datasets made here."""
import warnings

import numpy as np
import pytest

import rlox
from tests.reference import buffers as ref


def dataset(n=50, obs_dim=5, act_dim=2, seed=0):
    """Episodes of 10 steps: ends alternate terminated / truncated; the last one is unfinished."""
    rng = np.random.default_rng(seed)
    obs = rng.standard_normal((n, obs_dim)).astype(np.float32) * 3 + 1
    next_obs = rng.standard_normal((n, obs_dim)).astype(np.float32)
    actions = rng.uniform(-1, 1, (n, act_dim)).astype(np.float32)
    rewards = rng.standard_normal(n)
    step = np.arange(n)
    terminated = (step % 10 == 9) & (step % 20 == 9)
    truncated = (step % 10 == 9) & (step % 20 == 19)
    terminated[-1] = truncated[-1] = False
    return obs, next_obs, actions, rewards, terminated, truncated


def test_guide_call_flattened_arrays():
    obs, next_obs, actions, rewards, terminated, truncated = dataset()
    buf = rlox.OfflineDatasetBuffer(obs.ravel(), next_obs.ravel(), actions.ravel(), rewards,
                                    terminated, truncated, normalize=True)
    assert (len(buf), buf.obs_dim, buf.act_dim) == (50, 5, 2)
    st = buf.stats()
    assert {"n_transitions", "n_episodes", "mean_return", "std_return", "min_return",
            "max_return", "obs_mean", "obs_std"} <= set(st)
    returns = ref.episode_returns(rewards, terminated, truncated)
    assert st["n_transitions"] == 50 and st["n_episodes"] == len(returns) == 5
    for key, fn in [("mean_return", np.mean), ("std_return", np.std), ("min_return", np.min),
                    ("max_return", np.max)]:
        assert st[key] == pytest.approx(fn(returns))
    np.testing.assert_allclose(st["obs_mean"], obs.mean(0), rtol=1e-5)
    np.testing.assert_allclose(st["obs_std"], obs.std(0) + 1e-3, rtol=1e-5)


def test_sample_normalized_and_raw():
    obs, next_obs, actions, rewards, terminated, truncated = dataset()
    raw = rlox.OfflineDatasetBuffer(obs, next_obs, actions, rewards, terminated, truncated)
    norm = rlox.OfflineDatasetBuffer(obs, next_obs, actions, rewards, terminated, truncated,
                                     normalize=True)
    a, b = raw.sample(64, seed=1), norm.sample(64, seed=1)
    i = a["indices"]
    np.testing.assert_array_equal(i, b["indices"])
    np.testing.assert_array_equal(a["obs"], obs[i])
    np.testing.assert_array_equal(a["next_obs"], next_obs[i])
    np.testing.assert_array_equal(a["actions"], actions[i])
    np.testing.assert_array_equal(a["rewards"], rewards[i].astype(np.float32))
    np.testing.assert_array_equal(a["terminated"], terminated[i])
    mean, std = obs.mean(0), obs.std(0) + 1e-3
    np.testing.assert_allclose(b["obs"], (obs[i] - mean) / std, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b["next_obs"], (next_obs[i] - mean) / std, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.normalize_obs(obs[:3]), (obs[:3] - mean) / std, rtol=1e-5,
                               atol=1e-5)
    np.testing.assert_allclose(norm.sample(10_000, seed=0)["obs"].mean(0), 0, atol=0.15)
    for k, v in raw.sample(32, seed=5).items():
        np.testing.assert_array_equal(v, raw.sample(32, seed=5)[k])


def test_shapes_that_do_not_divide():
    obs, next_obs, actions, rewards, terminated, truncated = dataset(n=10)
    with pytest.raises(ValueError, match="obs has 49 values, which is not a whole multiple of "
                                         "the 10 transitions"):
        rlox.OfflineDatasetBuffer(obs.ravel()[:49], next_obs, actions, rewards, terminated,
                                  truncated)
    with pytest.raises(ValueError, match="actions has 21 values"):
        rlox.OfflineDatasetBuffer(obs, next_obs, np.zeros(21), rewards, terminated, truncated)
    with pytest.raises(ValueError, match="next_obs has 40 values, obs has 50"):
        rlox.OfflineDatasetBuffer(obs, next_obs[:8], actions, rewards, terminated, truncated)
    with pytest.raises(ValueError, match="terminated has 9 entries, expected 10"):
        rlox.OfflineDatasetBuffer(obs, next_obs, actions, rewards, terminated[:9], truncated)
    with pytest.raises(ValueError, match="at least one transition"):
        rlox.OfflineDatasetBuffer([], [], [], [], [], [])
    with pytest.raises(ValueError, match=r"rewards holds a non-finite value \(nan\) at transition 0 "
                                         r"\(10 transitions affected\)"):
        rlox.OfflineDatasetBuffer(obs, next_obs, actions, np.full(10, np.nan), terminated,
                                  truncated)


def test_from_npz(tmp_path):
    obs, next_obs, actions, rewards, terminated, truncated = dataset()
    np.savez(tmp_path / "a.npz", obs=obs, next_obs=next_obs, actions=actions, rewards=rewards,
             terminated=terminated, truncated=truncated)
    np.savez(tmp_path / "b.npz", observations=obs, next_observations=next_obs, actions=actions,
             rewards=rewards, terminals=terminated)            # D4RL names, no timeouts
    a = rlox.OfflineDatasetBuffer.from_npz(tmp_path / "a.npz")
    b = rlox.OfflineDatasetBuffer.from_npz(tmp_path / "b.npz", normalize=True)
    assert a.stats()["n_episodes"] == 5 and b.stats()["n_episodes"] == 3
    np.testing.assert_array_equal(a.gather(np.arange(50))["obs"], obs)
    assert b.normalize
    np.savez(tmp_path / "c.npz", obs=obs)
    with pytest.raises(KeyError, match="none of the keys"):
        rlox.OfflineDatasetBuffer.from_npz(tmp_path / "c.npz")
    with pytest.raises(FileNotFoundError):
        rlox.OfflineDatasetBuffer.from_npz(tmp_path / "missing.npz")


def test_from_d4rl_hdf5(tmp_path):
    h5py = pytest.importorskip("h5py", reason="h5py is in the dev and offline extras")
    obs, next_obs, actions, rewards, terminated, truncated = dataset()
    with h5py.File(tmp_path / "with_next.hdf5", "w") as f:
        f["observations"], f["next_observations"], f["actions"] = obs, next_obs, actions
        f["rewards"], f["terminals"], f["timeouts"] = rewards, terminated, truncated
    buf = rlox.OfflineDatasetBuffer.from_d4rl_hdf5(tmp_path / "with_next.hdf5")
    g = buf.gather(np.arange(50))
    np.testing.assert_array_equal(g["obs"], obs)
    np.testing.assert_array_equal(g["next_obs"], next_obs)
    np.testing.assert_array_equal(g["truncated"], truncated)
    assert buf.stats()["n_episodes"] == 5

    # without next_observations: next row's observation; timeout steps and the last row dropped
    # (their successor is unknown), and the step before a dropped timeout becomes truncated
    T = 12
    o = np.arange(T * 2, dtype=np.float32).reshape(T, 2)
    timeouts = np.zeros(T, bool)
    timeouts[5] = True
    terms = np.zeros(T, bool)
    terms[8] = True
    with h5py.File(tmp_path / "old.hdf5", "w") as f:
        f["observations"], f["actions"] = o, np.zeros((T, 1), np.float32)
        f["rewards"], f["terminals"], f["timeouts"] = np.arange(T, dtype=np.float32), terms, timeouts
    old = rlox.OfflineDatasetBuffer.from_d4rl_hdf5(tmp_path / "old.hdf5")
    kept = [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]
    g = old.gather(np.arange(len(old)))
    assert len(old) == len(kept)
    np.testing.assert_array_equal(g["rewards"], kept)
    np.testing.assert_array_equal(g["obs"], o[kept])
    np.testing.assert_array_equal(g["next_obs"], o[np.array(kept) + 1])
    np.testing.assert_array_equal(g["truncated"], [0, 0, 0, 0, 1, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(g["terminated"], [0, 0, 0, 0, 0, 0, 0, 1, 0, 0])
    assert old.stats()["n_episodes"] == 3
    with h5py.File(tmp_path / "bad.hdf5", "w") as f:
        f["observations"] = o
    with pytest.raises(KeyError, match="lacks the D4RL keys"):
        rlox.OfflineDatasetBuffer.from_d4rl_hdf5(tmp_path / "bad.hdf5")


def test_from_minari(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari", reason="minari is in the dev and offline extras")
    import gymnasium as gym
    from minari.data_collector import EpisodeBuffer
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    rng = np.random.default_rng(0)
    episodes = []
    for k, (T, terminal) in enumerate([(5, True), (7, False), (3, True)]):
        episodes.append(EpisodeBuffer(
            id=k, observations=rng.standard_normal((T + 1, 3)).astype(np.float32),
            actions=rng.uniform(-2, 2, (T, 1)).astype(np.float32), rewards=rng.standard_normal(T),
            terminations=np.arange(T) == T - 1 if terminal else np.zeros(T, bool),
            truncations=np.zeros(T, bool) if terminal else np.arange(T) == T - 1, infos={}))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # Minari's advice on authorship metadata
        ds = minari.create_dataset_from_buffers(
            "rloxtest/pendulum-random-v0", episodes, env=gym.make("Pendulum-v1"),
            algorithm_name="random", author="rlox tests", author_email="tests@rlox.invalid",
            code_permalink="tests/test_offline.py", description="rlox loader test")
    by_id = rlox.OfflineDatasetBuffer.from_minari("rloxtest/pendulum-random-v0")
    by_obj = rlox.OfflineDatasetBuffer.from_minari(ds, normalize=True)
    assert len(by_id) == len(by_obj) == 15 and (by_id.obs_dim, by_id.act_dim) == (3, 1)
    g = by_id.gather(np.arange(15))
    np.testing.assert_array_equal(g["obs"], np.concatenate([e.observations[:-1] for e in episodes]))
    np.testing.assert_array_equal(g["next_obs"], np.concatenate([e.observations[1:] for e in episodes]))
    np.testing.assert_array_equal(g["actions"], np.concatenate([e.actions for e in episodes]))
    st = by_id.stats()
    assert st["n_episodes"] == 3
    assert st["mean_return"] == pytest.approx(np.mean([e.rewards.sum() for e in episodes]), rel=1e-5)
    np.testing.assert_array_equal(g["terminated"].nonzero()[0], [4, 14])
    np.testing.assert_array_equal(g["truncated"].nonzero()[0], [11])


def test_uint8_observations_kept_without_normalize():
    obs = np.arange(40, dtype=np.uint8).reshape(10, 4)
    buf = rlox.OfflineDatasetBuffer(obs, obs + 1, np.zeros(10), np.zeros(10), np.zeros(10),
                                    np.zeros(10))
    assert buf.sample(4, seed=0)["obs"].dtype == np.uint8
    norm = rlox.OfflineDatasetBuffer(obs, obs + 1, np.zeros(10), np.zeros(10), np.zeros(10),
                                     np.zeros(10), normalize=True)
    assert norm.sample(4, seed=0)["obs"].dtype == np.float32
