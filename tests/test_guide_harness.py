"""The user guide's samples for the training harness, as written, with small budgets.

Sections: Callbacks, Logging (and LoggerCallback), Config-Driven Training, VecNormalize,
Diagnostics Dashboard, Statistical Evaluation, Checkpoint Security, Model Zoo. Changes from
the guide's text are marked ``# guide: ...``; the guide uses ``PPOTrainer`` without importing
it, so each sample imports it first. (To be merged into tests/test_guide.py.)
"""
import numpy as np
import pytest


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


# ---------------------------------------------------------------- Callbacks
def test_guide_callbacks(in_tmp, capsys):
    from rlox import PPOTrainer   # (the guide omits this import)
    from rlox.callbacks import (
        EarlyStoppingCallback,
        ProgressBarCallback,
        TimingCallback,
    )

    trainer = PPOTrainer(
        env="CartPole-v1",
        callbacks=[
            EarlyStoppingCallback(patience=20, min_delta=1.0),
            ProgressBarCallback(),   # tqdm progress bar
            TimingCallback(),         # phase-level profiling
        ],
    )
    metrics = trainer.train(total_timesteps=2_000)   # guide: 100_000

    # After training, see where time was spent
    timing = trainer.callbacks[2]  # TimingCallback
    print(timing.summary())
    # {'env_step': 42.1, 'gae_compute': 8.3, 'gradient_update': 49.6}
    summary = timing.summary()
    assert isinstance(timing, TimingCallback)
    assert {"env_step", "gae_compute", "gradient_update"} <= set(summary)
    assert abs(sum(summary.values()) - 100) < 0.6
    assert metrics["timesteps"] >= 2_000
    assert "reward=" in capsys.readouterr().err          # the progress bar's live reward


# ---------------------------------------------------------------- Logging
def test_guide_logging(in_tmp, monkeypatch, capsys):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    pytest.importorskip("wandb", reason="wandb is in the dev extra")
    from rlox.logging import ConsoleLogger, WandbLogger, TensorBoardLogger
    from rlox import Trainer

    # Simple console output (no dependencies)
    logger = ConsoleLogger(log_interval=500)
    # Prints: step=500 | SPS=1234 | reward=45.20
    Trainer("ppo", env="CartPole-v1", logger=logger).train(total_timesteps=1_000)   # (shows the console line)
    assert "step=512 | SPS=" in capsys.readouterr().out

    # Weights & Biases
    logger = WandbLogger(project="rlox-experiments", name="ppo-cartpole")

    # TensorBoard
    logger = TensorBoardLogger(log_dir="runs/ppo-cartpole")

    trainer = Trainer("ppo", env="CartPole-v1", logger=logger)
    trainer.train(total_timesteps=2_000)   # guide: 100_000
    assert list((in_tmp / "runs" / "ppo-cartpole").glob("events.out.tfevents.*"))


def test_guide_logger_callback(in_tmp):
    from rlox.logging import LoggerCallback

    class CSVLogger(LoggerCallback):
        def on_train_step(self, step, metrics):
            # Write metrics to CSV
            with open("metrics.csv", "a") as f:   # (the guide leaves the body to the user)
                f.write(f"{step},{metrics['train/mean_reward']}\n")

    from rlox import Trainer
    Trainer("ppo", env="CartPole-v1", logger=CSVLogger()).train(total_timesteps=512)
    lines = (in_tmp / "metrics.csv").read_text().splitlines()
    assert [int(line.split(",")[0]) for line in lines] == [256, 512]


# ---------------------------------------------------------------- Config-Driven Training
EXPERIMENT_YAML = """\
# experiment.yaml
algorithm: ppo
env: CartPole-v1
total_timesteps: 2_000
seed: 42
config:
  n_envs: 16
  learning_rate: 3e-4
  n_steps: 128
  n_epochs: 4
logger:
  type: wandb
  project: rlox-experiments
"""   # guide: total_timesteps: 100_000


def test_guide_config_driven_training(in_tmp, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(in_tmp))
    pytest.importorskip("wandb", reason="wandb is in the dev extra")
    (in_tmp / "experiment.yaml").write_text(EXPERIMENT_YAML)

    from rlox.runner import train_from_config
    from rlox.config import TrainingConfig

    # From a YAML file
    metrics = train_from_config("experiment.yaml")
    assert metrics["timesteps"] == 2_048 and metrics["learning_rate"] == 3e-4   # 3e-4 read as a number

    # Or build programmatically
    cfg = TrainingConfig(
        algorithm="ppo",
        env="CartPole-v1",
        total_timesteps=2_000,   # guide: 100_000
        seed=42,
        config={"n_envs": 16, "learning_rate": 3e-4},
    )
    metrics = train_from_config(cfg)
    assert metrics["timesteps"] == 2_048


# ---------------------------------------------------------------- VecNormalize
def test_guide_vec_normalize():
    from rlox import PPOTrainer   # (the guide omits this import)
    from rlox import Trainer
    from rlox.wrappers import VecNormalize

    trainer = PPOTrainer(
        env="CartPole-v1",
        wrappers=[VecNormalize(norm_obs=True, norm_reward=True, clip_obs=10.0)],
        seed=42,
    )
    metrics = trainer.train(total_timesteps=2_000)   # guide: 100_000
    norm = trainer.algo.obs_normalizer()
    assert isinstance(norm, VecNormalize) and norm.obs_rms.count() > 2_000
    assert np.isfinite(metrics["mean_reward"]) and Trainer is not None


# ---------------------------------------------------------------- Diagnostics Dashboard
def test_guide_dashboard(in_tmp):
    from rlox import PPOTrainer   # (the guide omits this import)
    from rlox.dashboard import MetricsCollector, HTMLReport, TerminalDashboard

    # Collect metrics during training
    collector = MetricsCollector()

    from rlox import Trainer
    trainer = PPOTrainer(
        env="CartPole-v1",
        callbacks=[collector],
        seed=42,
    )
    trainer.train(total_timesteps=2_000)   # guide: 50_000

    # Generate a static HTML report
    report = HTMLReport(collector)
    report.save("training_report.html")

    # Or use the live terminal dashboard (Rich-based)
    # Pass TerminalDashboard as a callback for real-time display:
    from rlox import Trainer
    trainer = PPOTrainer(
        env="CartPole-v1",
        callbacks=[TerminalDashboard()],
        seed=42,
    )
    trainer.train(total_timesteps=2_000)   # guide: 50_000
    html = (in_tmp / "training_report.html").read_text()
    assert "<canvas" in html and "Episode reward" in html and len(collector) == 8


# ---------------------------------------------------------------- Statistical Evaluation
def test_guide_statistical_evaluation():
    from rlox.evaluation import interquartile_mean, performance_profiles, stratified_bootstrap_ci

    # IQM: robust central tendency (discards top/bottom 25%)
    scores = [450, 480, 500, 200, 490]
    iqm = interquartile_mean(scores)

    # Bootstrap confidence interval
    lower, upper = stratified_bootstrap_ci(scores, n_bootstrap=1_000, ci=0.95)   # guide: 10_000

    # Performance profiles: fraction of runs above threshold
    profiles = performance_profiles(
        {"rlox": [450, 480, 500], "baseline": [300, 350, 400]},
        thresholds=[100, 200, 300, 400, 500],
    )
    assert iqm == pytest.approx((450 + 480 + 490) / 3)
    assert lower <= iqm <= upper
    np.testing.assert_allclose(profiles["baseline"], [1, 1, 2 / 3, 0, 0])


# ---------------------------------------------------------------- Checkpoint Security
def test_guide_checkpoint_security(in_tmp):
    from rlox import Trainer

    Trainer("ppo", env="CartPole-v1", seed=0).train(total_timesteps=256)   # (something to load)
    Trainer("ppo", env="CartPole-v1", seed=0).save("model.pt")

    from rlox.checkpointing import safe_torch_load

    # Safe by default — only loads tensor data, not arbitrary Python objects
    state_dict = safe_torch_load("model.pt")

    # All Trainer.from_checkpoint() and algorithm.load() calls use safe_torch_load internally
    trainer = Trainer.from_checkpoint("model.pt", algorithm="ppo", env="CartPole-v1")
    assert state_dict["format"] == "rlox-checkpoint" and trainer.algorithm_name == "ppo"


# ---------------------------------------------------------------- Model Zoo
def test_guide_model_zoo(in_tmp, monkeypatch):
    monkeypatch.setenv("RLOX_MODEL_ZOO", str(in_tmp / "zoo"))   # (keep the test out of the user's zoo)
    from rlox import Trainer
    (in_tmp / "checkpoints").mkdir()
    Trainer("ppo", env="CartPole-v1", seed=0).save("checkpoints/ppo_cartpole.pt")   # (the model to register)
    obs = np.zeros(4, dtype=np.float32)

    from rlox.model_zoo import ModelZoo, ModelCard

    # Register a trained model
    card = ModelCard(
        name="ppo-cartpole-v1",
        algorithm="ppo",
        env="CartPole-v1",
        mean_reward=500.0,
        description="PPO agent trained to solve CartPole-v1",
    )
    ModelZoo.register(card, checkpoint_path="checkpoints/ppo_cartpole.pt")

    # List available models
    for card in ModelZoo.list():
        print(f"{card.name}: {card.mean_reward:.1f}")

    # Load a pretrained model
    trainer = ModelZoo.load("ppo-cartpole-v1")
    action = trainer.predict(obs, deterministic=True)
    assert action in (0, 1) and (in_tmp / "zoo" / "ppo-cartpole-v1" / "card.json").is_file()
