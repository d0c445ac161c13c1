"""The user guide's off-policy samples, run as written with small budgets (issue 7).

One test per sample; budgets are swapped small where noted (``# guide: ...``). To be merged into
tests/test_guide.py.
"""
import numpy as np
import pytest


# ---------------------------------------------------------------- CLI Quick Start (the sac line)
def test_guide_cli_train_sac(tmp_path):
    import subprocess
    import sys

    # python -m rlox train --algo sac --env Pendulum-v1 --timesteps 50000 --save model.pt  (budget: 300)
    subprocess.run([sys.executable, "-m", "rlox", "train", "--algo", "sac", "--env", "Pendulum-v1",
                    "--timesteps", "300", "--save", "model.pt"], check=True, cwd=tmp_path)
    assert (tmp_path / "model.pt").is_file()
    out = subprocess.run([sys.executable, "-m", "rlox", "eval", "--algo", "sac", "--checkpoint", "model.pt",
                          "--env", "Pendulum-v1", "--episodes", "2"],
                         check=True, cwd=tmp_path, capture_output=True, text=True)
    assert "mean_reward" in out.stdout


# ---------------------------------------------------------------- Available Trainers
def test_guide_available_trainers_sac():
    from rlox import Trainer, SACTrainer  # noqa: F401

    trainer = SACTrainer(
        env="Pendulum-v1",
        config={"learning_rate": 3e-4, "buffer_size": 100_000},
        seed=42,
    )
    assert trainer.algo.config.learning_rate == 3e-4 and trainer.algo.config.buffer_size == 100_000
    metrics = trainer.train(total_timesteps=300)
    assert metrics["timesteps"] == 300


def test_guide_available_trainers_dqn():
    from rlox import Trainer, DQNTrainer  # noqa: F401

    trainer = DQNTrainer(
        env="CartPole-v1",
        config={"double_dqn": True, "dueling": True},
        seed=42,
    )
    cfg = trainer.algo.config
    assert cfg.double_dqn and cfg.dueling and cfg.train_freq == 256       # the zoo preset underneath
    metrics = trainer.train(total_timesteps=1_500)
    assert metrics["timesteps"] == 1_500


def test_guide_available_trainers_td3():
    from rlox import Trainer, TD3Trainer  # noqa: F401

    trainer = TD3Trainer(
        env="Pendulum-v1",
        config={"policy_delay": 2, "target_noise": 0.2},
        seed=42,
    )
    assert trainer.algo.config.learning_starts == 10_000                  # the zoo preset underneath
    assert Trainer("td3", env="Pendulum-v1").algo.name == "td3"


# ---------------------------------------------------------------- Mid-Level: Off-Policy (SAC, TD3, DQN)
def test_guide_off_policy_algorithms():
    from rlox.algorithms import SAC, TD3, DQN

    # SAC with automatic entropy tuning
    sac = SAC(
        env_id="Pendulum-v1",
        buffer_size=1_000_000,
        learning_rate=3e-4,
        tau=0.005,
        gamma=0.99,
        auto_entropy=True,
    )
    metrics = sac.train(total_timesteps=300)          # guide: 20_000
    assert np.isfinite(metrics["critic_loss"])

    # TD3 with delayed policy updates
    td3 = TD3(
        env_id="Pendulum-v1",
        policy_delay=2,
        target_noise=0.2,
        noise_clip=0.5,
        exploration_noise=0.1,
    )
    metrics = td3.train(total_timesteps=300)          # guide: 20_000
    assert np.isfinite(metrics["actor_loss"])

    # DQN with Rainbow extensions
    dqn = DQN(
        env_id="CartPole-v1",
        double_dqn=True,
        dueling=True,
        n_step=3,
        prioritized=True,
        alpha=0.6,
        beta_start=0.4,
    )
    metrics = dqn.train(total_timesteps=1_000)        # guide: 50_000
    assert metrics["timesteps"] == 1_000 and np.isfinite(metrics["loss"])


# ---------------------------------------------------------------- Multi-Environment Collection
def test_guide_multi_env_automatic():
    from rlox.algorithms import SAC, TD3, DQN

    # Automatic: pass n_envs to any off-policy algorithm
    sac = SAC(env_id="Pendulum-v1", n_envs=4, learning_starts=5000)
    sac.train(total_timesteps=5_400)  # guide: 100_000
    assert sac.num_timesteps == 5_400 and sac._n_updates == 100

    td3 = TD3(env_id="Pendulum-v1", n_envs=4, learning_starts=5000)
    dqn = DQN(env_id="CartPole-v1", n_envs=8, learning_starts=1000)
    assert td3.n_envs == 4 and dqn.n_envs == 8


def test_guide_multi_env_manual_collector():
    import rlox
    from rlox.algorithms import SAC

    # Manual: create and inject your own collector
    from rlox.off_policy_collector import OffPolicyCollector
    from rlox.exploration import GaussianNoise

    buf = rlox.ReplayBuffer(1_000_000, obs_dim=3, act_dim=1)
    collector = OffPolicyCollector(
        env_id="Pendulum-v1",
        n_envs=4,
        buffer=buf,
        exploration=GaussianNoise(sigma=0.1),
    )
    sac = SAC(env_id="Pendulum-v1", buffer=buf, collector=collector)
    sac.train(total_timesteps=600)                    # guide: 100_000
    assert len(buf) == 600 and sac.collector is collector


# ---------------------------------------------------------------- Inference with predict()
def test_guide_predict_off_policy():
    from rlox.algorithms import SAC, TD3, DQN

    sac, td3 = SAC(env_id="Pendulum-v1"), TD3(env_id="Pendulum-v1")
    dqn = DQN(env_id="CartPole-v1")
    obs = np.array([1.0, 0.0, 0.5], dtype=np.float32)

    # SAC/TD3: returns numpy action array (scaled to env range)
    action = sac.predict(obs, deterministic=True)
    assert isinstance(action, np.ndarray) and action.shape == (1,) and abs(action[0]) <= 2.0
    action = td3.predict(obs, deterministic=True)
    assert isinstance(action, np.ndarray) and abs(action[0]) <= 2.0

    obs = np.zeros(4, dtype=np.float32)
    # DQN: returns int action
    action = dqn.predict(obs)
    assert isinstance(action, (int, np.integer)) and action in (0, 1)


# ---------------------------------------------------------------- Custom Environments
def test_guide_custom_environments():
    from rlox.algorithms import SAC

    import gymnasium as gym

    env = gym.make("Pendulum-v1", g=5.0)  # custom gravity
    sac = SAC(env_id=env, learning_starts=1000)
    sac.train(total_timesteps=1_100)      # guide: 50_000
    assert sac.num_timesteps == 1_100 and sac.collector.env.env is env


# ---------------------------------------------------------------- Custom Policies: Continuous Actions (SAC/TD3)
def test_guide_continuous_action_networks():
    import torch

    from rlox.networks import SquashedGaussianPolicy, DeterministicPolicy, QNetwork

    obs_tensor = torch.randn(8, 3)

    # SAC: squashed Gaussian policy
    actor = SquashedGaussianPolicy(obs_dim=3, act_dim=1, hidden=256)
    action, log_prob = actor.sample(obs_tensor)       # reparameterised
    det_action = actor.deterministic(obs_tensor)       # mean through tanh
    assert action.shape == (8, 1) and log_prob.shape == (8,) and det_action.shape == (8, 1)

    # TD3: deterministic policy
    actor = DeterministicPolicy(obs_dim=3, act_dim=1, hidden=256, max_action=2.0)
    action = actor(obs_tensor)  # scaled by max_action
    assert bool((action.abs() <= 2.0).all())

    # Shared Q-network for SAC/TD3
    critic = QNetwork(obs_dim=3, act_dim=1, hidden=256)
    action_tensor = action
    q_value = critic(obs_tensor, action_tensor)  # scalar
    assert q_value.shape == (8,)


# ---------------------------------------------------------------- Custom Policies: Discrete Q-Networks (DQN)
def test_guide_discrete_q_networks():
    import torch

    from rlox.networks import SimpleQNetwork, DuelingQNetwork

    obs_tensor = torch.randn(5, 4)

    # Standard DQN
    q_net = SimpleQNetwork(obs_dim=4, act_dim=2, hidden=256)
    q_values = q_net(obs_tensor)  # (B, n_actions)
    assert q_values.shape == (5, 2)

    # Dueling architecture: V(s) + A(s,a) - mean(A)
    q_net = DuelingQNetwork(obs_dim=4, act_dim=2, hidden=256)
    q_values = q_net(obs_tensor)  # same interface
    assert q_values.shape == (5, 2)


# ---------------------------------------------------------------- Configuration (SACConfig, DQNConfig)
def test_guide_configuration_off_policy():
    from rlox.config import PPOConfig, SACConfig, DQNConfig  # noqa: F401

    # The guide's calls, on the off-policy configs.
    for cls in (SACConfig, DQNConfig):
        cfg = cls()
        with pytest.warns(UserWarning, match="unknown_key"):
            cfg = cls.from_dict({"n_envs": 4, "gamma": 0.98, "unknown_key": 42})
        cfg2 = cfg.merge({"learning_rate": 1e-3})
        d = cfg.to_dict()
        try:
            cls(learning_rate=-1)  # raises ValueError
        except ValueError as e:
            print(e)
        else:
            pytest.fail(f"{cls.__name__}(learning_rate=-1) must raise ValueError")
        assert cfg.n_envs == 4 and cfg2.learning_rate == 1e-3 and d["gamma"] == 0.98


# ---------------------------------------------------------------- torch.compile
@pytest.mark.slow
def test_guide_torch_compile():
    from rlox.algorithms import SAC, PPO
    from rlox.compile import compile_policy, compiled_methods

    sac = SAC(env_id="Pendulum-v1")
    compile_policy(sac)  # compiles actor, critic1, critic2
    sac.train(total_timesteps=150)    # guide: 50_000

    # For on-policy policies (PPO/A2C), individual methods are compiled:
    # get_action_and_logprob, get_value, get_logprob_and_entropy
    ppo = PPO(env_id="CartPole-v1")
    compile_policy(ppo)
    # A CompileWarning (the fallback) would fail this test: torch.compile must work here.
    assert {"actor.sample", "critic.forward", "critic_target.forward"} <= set(compiled_methods(sac))
    assert compiled_methods(ppo)
    assert np.isfinite(sac.last_metrics["loss/critic_loss"])
