"""An unregistered gymnasium env instance (no spec) trains, saves, loads and evaluates, as in SB3;
a device this torch cannot use is a clear error."""
import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlox.algorithms import PPO, SAC
from rlox.callbacks import EvalCallback
from rlox.checkpointing import CheckpointError
from rlox.envs import make_vec_env


class Corridor(gym.Env):
    """Reward 1 for action 1, 10 steps; never registered with gymnasium."""

    observation_space = spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(2, self.t / 10, np.float32), float(action), False, self.t >= 10, {}


class Slider(Corridor):
    action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def step(self, action):
        obs, _, term, trunc, info = super().step(1)
        return obs, -float(np.square(action).sum()), term, trunc, info


@pytest.mark.parametrize("n_envs", [1, 3])
def test_unregistered_instance_trains_saves_loads_and_evaluates(tmp_path, n_envs):
    env = Corridor()
    assert env.spec is None
    evals = EvalCallback(eval_freq=16 * n_envs, n_eval_episodes=2)
    model = PPO(env, n_envs=n_envs, n_steps=16, callbacks=[evals])
    model.train(32 * n_envs)
    # The last evaluation ran the final policy on copies of the instance: deterministic policy and
    # env, so its mean is this one episode's return.
    probe, total, done = Corridor(), 0.0, False
    obs, _ = probe.reset()
    while not done:
        obs, reward, term, trunc, _ = probe.step(int(model.predict(obs, deterministic=True)))
        total, done = total + reward, term or trunc
    assert evals.last_mean_reward == pytest.approx(total)
    path = tmp_path / "corridor.pt"
    model.save(path)
    assert torch.load(path, weights_only=True)["env_id"] == "Corridor"
    with pytest.raises(CheckpointError, match=r"trained on 'Corridor', which is neither a gymnasium id.*"
                                              r"PPO.load\(path, env_id=Corridor\(...\)\)"):
        PPO.load(path)
    loaded = PPO.load(path, env_id=Corridor())
    obs = np.random.default_rng(0).uniform(-1, 1, (4, 2)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True),
                                  model.predict(obs, deterministic=True))


def test_instances_are_copied_per_env():
    env = Corridor()
    venv = make_vec_env(env, 3, seed=0)
    inner = [e.unwrapped for e in venv.envs.envs]
    assert inner[0] is env and len({id(e) for e in inner}) == 3


def test_an_instance_that_cannot_be_copied_says_what_to_pass():
    env = Corridor()
    env.lock = __import__("threading").Lock()
    assert make_vec_env(env, 1).num_envs == 1          # one env: the instance itself, no copy
    with pytest.raises(ValueError, match=r"n_envs = 2 needs 2 copies of the Corridor instance.*"
                                         r"\[lambda: Corridor\(...\) for _ in range\(2\)\]"):
        make_vec_env(env, 2)


def test_factories_get_a_real_label_and_evaluate():
    model = PPO([Corridor, Corridor], n_envs=2, n_steps=8,
                callbacks=[EvalCallback(eval_freq=16, n_eval_episodes=1)])
    model.train(16)
    assert model.env_name == "Corridor" and repr(model) == "PPO(env_id='Corridor', seed=0)"


def test_off_policy_takes_an_unregistered_instance(tmp_path):
    model = SAC(Slider(), learning_starts=8, batch_size=8, buffer_size=64, hidden=16)
    model.train(24)
    model.save(tmp_path / "s.pt")
    assert SAC.load(tmp_path / "s.pt", env_id=Slider()).num_timesteps == model.num_timesteps


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match=r"device='cuda' but this torch .* sees no CUDA device; pass "
                                         r"device='cpu'"):
        PPO("CartPole-v1", device="cuda")


def test_unknown_device_is_a_clear_error():
    with pytest.raises(ValueError, match=r"device='gpu0' is not a torch device"):
        PPO("CartPole-v1", device="gpu0")


def _corridor_factory():
    return gym.wrappers.TimeLimit(Corridor(), 10)


def test_one_env_factory_trains_saves_loads_and_evaluates(tmp_path):
    """``Trainer("ppo", env=lambda: ...)``, as SB3's make_vec_env takes one factory: it is called
    once per env, evaluation calls it too, and the checkpoint is labelled with the env it makes."""
    from rlox import Trainer
    from rlox.evaluation import evaluate_policy

    calls = []

    def factory():
        calls.append(1)
        return _corridor_factory()

    venv = make_vec_env(factory, 3, seed=0)
    assert venv.num_envs == 3 and len(calls) == 3
    assert len({id(e.unwrapped) for e in venv.envs.envs}) == 3
    trainer = Trainer("ppo", env=_corridor_factory, n_envs=2, config={"n_steps": 16}, seed=0)
    trainer.train(64)
    result = evaluate_policy(trainer, _corridor_factory, n_episodes=2)
    assert len(result["episode_rewards"]) == 2 and 0.0 <= result["mean_reward"] <= 10.0
    path = tmp_path / "f.pt"
    trainer.save(path)
    assert torch.load(path, weights_only=True)["env_id"] == "Corridor"
    loaded = PPO.load(path, env_id=_corridor_factory)
    obs = np.random.default_rng(0).uniform(-1, 1, (4, 2)).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict(obs, deterministic=True),
                                  trainer.predict(obs, deterministic=True))
    sac = SAC(lambda: gym.make("Pendulum-v1"), learning_starts=8, batch_size=8, buffer_size=64, hidden=16)
    sac.train(16)
    assert sac.env_name == "Pendulum-v1"


def test_a_factory_that_returns_no_env_and_kwargs_beside_a_factory_are_clear_errors():
    from rlox.envs import GymVecEnv
    from rlox.evaluation import evaluate_policy

    with pytest.raises(ValueError, match=r"env kwargs \['g'\] were given with an env factory; pass them "
                                         r"to the factory itself"):
        GymVecEnv(lambda: gym.make("Pendulum-v1"), 2, g=9.0)
    for algo in (PPO, SAC):
        with pytest.raises(TypeError, match=r"expected a gymnasium env, got int \(no observation_space, "
                                            r"action_space, reset, step\); an env factory must return an env"):
            algo(lambda: 3)
    model = PPO(Corridor(), n_steps=8)
    with pytest.raises(TypeError, match=r"the env factory 'not_an_env' returned int, expected a "
                                        r"gymnasium.Env"):
        def not_an_env():
            return 3
        evaluate_policy(model, not_an_env, n_episodes=1)


class SignGrid(gym.Env):
    """A (3, 4) float observation that is not an image; reward 1 when the action is the sign of
    obs[1, 2] (a one-step contextual bandit, 8 steps an episode)."""

    observation_space = spaces.Box(-1.0, 1.0, (3, 4), np.float32)
    action_space = spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self.obs = self.np_random.uniform(-1, 1, (3, 4)).astype(np.float32)
        return self.obs, {}

    def step(self, action):
        reward = float(int(action) == int(self.obs[1, 2] > 0))
        self.t += 1
        self.obs = self.np_random.uniform(-1, 1, (3, 4)).astype(np.float32)
        return self.obs, reward, False, self.t >= 8, {}


@pytest.mark.parametrize("algo,compiled", [("ppo", True), ("ppo", False), ("a2c", None), ("trpo", None)])
def test_multi_dimensional_box_observations_are_flattened_by_the_mlp(tmp_path, algo, compiled):
    """A (3, 4) float Box that is not an image trains (the MLPs start with nn.Flatten, as SB3's
    FlattenExtractor), predicts single and batched observations, and exports."""
    from rlox import Trainer
    from rlox.artifacts import export_inference
    from rlox.evaluation import evaluate_policy
    from rlox.inference import InferencePolicy

    config = {"n_steps": 64, "learning_rate": 3e-3} if algo != "trpo" else {"n_steps": 256}
    if compiled is not None:
        config["compiled_update"] = compiled
    trainer = Trainer(algo, env=SignGrid, n_envs=4, config=config, seed=0)
    if compiled is not None:
        assert trainer.algo.compiled_update is compiled
    trainer.train(6144)
    assert evaluate_policy(trainer, SignGrid, n_episodes=8)["mean_reward"] >= 6.5     # random: 4
    obs = np.random.default_rng(1).uniform(-1, 1, (16, 3, 4)).astype(np.float32)
    batch = trainer.predict(obs, deterministic=True)
    assert batch.shape == (16,) and trainer.predict(obs[0], deterministic=True) == batch[0]
    export_inference(trainer.algo, tmp_path / "art")
    np.testing.assert_array_equal(InferencePolicy.load(tmp_path / "art").act(obs), batch)
