"""Discrete, MultiDiscrete, MultiBinary and Tuple observations (rlox.multi_input.ObsLayout):
one-hot at the env boundary, raw observations accepted by predict, as SB3's preprocess_obs."""
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from rlox.multi_input import FlattenStructuredObservation, ObsLayout, flatten_structured
from rlox.trainer import Trainer


def test_layout_matches_hand_one_hot():
    lay = ObsLayout(spaces.Discrete(4, start=1))
    np.testing.assert_array_equal(lay.flatten(3), [0, 0, 1, 0])
    np.testing.assert_array_equal(lay.flatten(np.array([1, 4])), [[1, 0, 0, 0], [0, 0, 0, 1]])
    md = ObsLayout(spaces.MultiDiscrete([2, 3]))
    np.testing.assert_array_equal(md.flatten(np.array([1, 2])), [0, 1, 0, 0, 1])
    np.testing.assert_array_equal(md.flatten(np.array([[0, 0], [1, 1]])), [[1, 0, 1, 0, 0], [0, 1, 0, 1, 0]])
    mb = ObsLayout(spaces.MultiBinary(3))
    assert mb.flatten(np.array([1, 0, 1], np.int8)).dtype == np.float32
    tup = ObsLayout(spaces.Tuple((spaces.Discrete(3), spaces.Box(-1, 1, (2,)), spaces.Discrete(2))))
    np.testing.assert_array_equal(tup.flatten((2, np.array([0.5, -0.5]), 1)), [0, 0, 1, 0.5, -0.5, 0, 1])
    batch = tup.flatten((np.array([0, 1]), np.zeros((2, 2)), np.array([1, 0])))
    np.testing.assert_array_equal(batch, [[1, 0, 0, 0, 0, 0, 1], [0, 1, 0, 0, 0, 1, 0]])
    assert tup.flat_space.shape == (7,) and tup.flat_space.dtype == np.float32
    np.testing.assert_array_equal(tup.flat_space.low, [0, 0, 0, -1, -1, 0, 0])
    # gymnasium's own flattening agrees
    space = spaces.Tuple((spaces.Discrete(3), spaces.MultiDiscrete([2, 2])))
    value = (1, np.array([1, 0]))
    np.testing.assert_array_equal(ObsLayout(space).flatten(value), spaces.flatten(space, value))


def test_layout_bad_input():
    lay = ObsLayout(spaces.Discrete(4))
    with pytest.raises(ValueError, match=r"outside Discrete\(4\)"):
        lay.flatten(4)
    with pytest.raises(ValueError, match=r"outside MultiDiscrete"):
        ObsLayout(spaces.MultiDiscrete([2, 3])).flatten(np.array([0, 3]))
    tup = ObsLayout(spaces.Tuple((spaces.Discrete(3), spaces.Discrete(2))))
    with pytest.raises(ValueError, match="tuple of 2 parts"):
        tup.flatten((1,))
    with pytest.raises(ValueError, match="Tuple observations may hold"):
        ObsLayout(spaces.Tuple((spaces.Discrete(2), spaces.Text(5))))
    with pytest.raises(TypeError, match="ObsLayout needs"):
        ObsLayout(spaces.Box(0, 1, (2,)))


def test_flatten_structured_wraps_only_non_box():
    box_env = gym.make("CartPole-v1")
    assert flatten_structured(box_env) is box_env
    fl = flatten_structured(gym.make("FrozenLake-v1"))
    assert isinstance(fl, FlattenStructuredObservation) and fl.observation_space.shape == (16,)
    obs, _ = fl.reset(seed=0)
    np.testing.assert_array_equal(obs, np.eye(16, dtype=np.float32)[0])
    assert isinstance(fl.raw_observation_space, spaces.Discrete)


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_frozen_lake_learns_and_predicts_raw_obs(algo):
    """On the deterministic 4x4 lake the greedy policy reaches the goal (return 1) after a short
    run; predict takes the raw state index, a batch of them, or the one-hot vector alike."""
    make = lambda: gym.make("FrozenLake-v1", is_slippery=False)  # noqa: E731
    cfg = (dict(n_envs=4, n_steps=64, batch_size=64, n_epochs=4, ent_coef=0.01, learning_rate=1e-3)
           if algo == "ppo" else dict(learning_starts=500, exploration_fraction=0.5, train_freq=1,
                                      target_update_interval=250, learning_rate=1e-3, batch_size=64))
    tr = Trainer(algo, env=make(), seed=0, config=cfg, preset=False)
    tr.train(total_timesteps=10_000 if algo == "ppo" else 8_000)
    from rlox.evaluation import evaluate_policy

    res = evaluate_policy(tr, make(), n_episodes=3)   # a raw FrozenLake env: flattened as in training
    assert res["mean_reward"] == 1.0
    a_int = tr.predict(0, deterministic=True)
    assert isinstance(a_int, np.int64)
    assert a_int == tr.predict(np.eye(16, dtype=np.float32)[0], deterministic=True)
    batch = tr.predict(np.array([0, 4, 14]), deterministic=True)
    assert batch.shape == (3,) and batch[0] == a_int
    with pytest.raises(ValueError, match="outside Discrete"):
        tr.predict(16)


def test_tuple_obs_save_load_round_trip(tmp_path):
    tr = Trainer("ppo", env="Blackjack-v1", seed=1, config=dict(n_envs=2, n_steps=32, batch_size=32, n_epochs=1))
    tr.train(total_timesteps=128)
    obs = (14, 10, 0)
    a = tr.predict(obs, deterministic=True)
    path = tmp_path / "bj.pt"
    tr.save(path)
    loaded = Trainer.from_checkpoint(path)
    assert loaded.predict(obs, deterministic=True) == a
    batch = (np.array([14, 20]), np.array([10, 3]), np.array([0, 1]))
    np.testing.assert_array_equal(loaded.predict(batch, deterministic=True), tr.predict(batch, deterministic=True))
    res = loaded.evaluate(n_episodes=2)
    assert res["n_episodes"] == 2
