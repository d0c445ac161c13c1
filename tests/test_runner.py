"""rlox.runner / rlox.config.TrainingConfig: experiment files, names of loggers and callbacks, errors."""
import subprocess
import sys
from pathlib import Path

import pytest

from rlox.config import TrainingConfig
from rlox.runner import CALLBACKS, LOGGERS, WRAPPERS, build_trainer, load_config, load_yaml, train_from_config

ROOT = Path(__file__).resolve().parents[1]


def test_yaml_numbers(tmp_path):
    p = tmp_path / "e.yaml"
    p.write_text("a: 100_000\nb: 3e-4\nc: 1.5e3\nd: -2E+2\ne: '3e-4'\nf: 2.5\ng: v1e5\nh: 1_0.5\n")
    data = load_yaml(p)
    assert data["a"] == 100_000 and isinstance(data["a"], int)
    assert data["b"] == 3e-4 and data["c"] == 1500.0 and data["d"] == -200.0
    assert data["e"] == "3e-4" and data["f"] == 2.5 and data["g"] == "v1e5"


def test_guide_experiment_file_parses(tmp_path):
    p = tmp_path / "experiment.yaml"
    p.write_text("algorithm: ppo\nenv: CartPole-v1\ntotal_timesteps: 100_000\nseed: 42\nconfig:\n  n_envs: 16\n"
                 "  learning_rate: 3e-4\n  n_steps: 128\n  n_epochs: 4\nlogger:\n  type: wandb\n"
                 "  project: rlox-experiments\n")
    cfg = load_config(p)
    assert (cfg.algorithm, cfg.env, cfg.total_timesteps, cfg.seed) == ("ppo", "CartPole-v1", 100_000, 42)
    assert cfg.config == {"n_envs": 16, "learning_rate": 3e-4, "n_steps": 128, "n_epochs": 4}
    assert cfg.logger == {"type": "wandb", "project": "rlox-experiments"}
    assert load_config(cfg) is cfg
    assert load_config(cfg.to_dict()) == cfg


def test_unknown_top_level_keys_listed(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("algorithm: ppo\nenv: CartPole-v1\ntotal_timesteps: 10\nlogr: console\n")
    with pytest.raises(ValueError, match=r"config file '.*bad\.yaml' has unknown top-level keys \['logr'\] "
                                         r"\(did you mean 'logr' -> 'logger'\?\); allowed: \['algorithm', 'env'"):
        load_config(p)


def test_yaml_errors(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("algorithm: ppo\nconfig: [1, 2\n")
    with pytest.raises(ValueError, match=r"broken\.yaml' is not valid YAML: .*line 3"):
        load_config(broken)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    with pytest.raises(ValueError, match="must hold a mapping"):
        load_config(listed)
    neg = tmp_path / "neg.yaml"
    neg.write_text("algorithm: ppo\ntotal_timesteps: -5\n")
    with pytest.raises(ValueError, match=r"neg\.yaml'.*total_timesteps = -5 is out of range; expected >= 1"):
        load_config(neg)
    with pytest.raises(ValueError, match=r"callbacks\[0\] = 5 is not understood"):
        TrainingConfig(algorithm="ppo", env="CartPole-v1", total_timesteps=10, callbacks=[5])
    with pytest.raises(ValueError, match="TrainingConfig.config must be a mapping"):
        TrainingConfig(algorithm="ppo", env="CartPole-v1", total_timesteps=10, config=[1])
    with pytest.raises(TypeError, match="expected a YAML path, a mapping or a TrainingConfig"):
        load_config(42)


def test_names_resolve_in_any_spelling():
    from rlox.callbacks import EarlyStoppingCallback, ProgressBarCallback
    from rlox.logging import TensorBoardLogger

    assert CALLBACKS.get("early_stopping") is EarlyStoppingCallback
    assert CALLBACKS.get("EarlyStoppingCallback") is EarlyStoppingCallback
    assert CALLBACKS.get("progress-bar") is ProgressBarCallback
    assert LOGGERS.get("TensorBoardLogger") is TensorBoardLogger and "csv" in LOGGERS
    with pytest.raises(KeyError, match="unknown callback 'earlystop'; did you mean 'early_stopping'"):
        CALLBACKS.get("earlystop")


def test_harness_registries_are_plugin_registries_fed_by_entry_points():
    import importlib.metadata as md

    from rlox.plugins import CALLBACK_REGISTRY, LOGGER_REGISTRY, WRAPPER_REGISTRY, Registry

    assert LOGGERS is LOGGER_REGISTRY and CALLBACKS is CALLBACK_REGISTRY and isinstance(WRAPPERS, Registry)
    for registry, group in ((LOGGERS, "rlox.loggers"), (CALLBACKS, "rlox.callbacks"), (WRAPPERS, "rlox.wrappers")):
        declared = {ep.name for ep in md.entry_points(group=group)}
        assert declared and declared <= set(registry.list()), group
    assert {"console", "tensorboard", "wandb", "csv"} <= set(LOGGERS.list())
    assert "vec_normalize" in WRAPPERS.list() and "metrics_collector" in CALLBACKS.list()


def test_a_registered_callback_is_usable_from_an_experiment(tmp_path):
    from rlox.callbacks import Callback

    class StopAfter(Callback):
        def __init__(self, updates: int = 1):
            super().__init__()
            self.updates, self.seen = updates, 0

        def on_update(self, metrics):
            self.seen += 1
            return self.seen < self.updates

    CALLBACKS.register("stop_after", StopAfter)
    try:
        metrics, trainer = train_from_config(
            {"algorithm": "a2c", "total_timesteps": 10_000, "config": {"n_envs": 2, "n_steps": 8},
             "callbacks": [{"type": "StopAfter", "updates": 3}]}, return_trainer=True)
    finally:
        CALLBACKS.unregister("stop_after")
    assert trainer.callbacks[0].seen == 3 and metrics["timesteps"] == 3 * 2 * 8


def test_plugin_logger_from_its_entry_point(tmp_path):
    pytest.importorskip("rlox_example_plugin", reason="make test installs plugins/rlox-example-plugin")
    import json

    metrics, trainer = train_from_config(
        {"algorithm": "a2c", "total_timesteps": 64, "config": {"n_envs": 2, "n_steps": 8},
         "logger": {"type": "jsonl", "path": str(tmp_path / "m.jsonl")}}, return_trainer=True)
    assert type(trainer.logger).__module__ == "rlox_example_plugin.logger"
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [16, 32, 48, 64] and "train/mean_reward" in rows[0]


def test_build_trainer_from_names(tmp_path):
    cfg = TrainingConfig(
        algorithm="ppo", env="CartPole-v1", total_timesteps=512, seed=3,
        config={"n_envs": 8, "n_steps": 32, "n_epochs": 2, "batch_size": 128},
        logger=[{"type": "csv", "path": str(tmp_path / "m.csv")}, {"console": {"log_interval": 256}}],
        callbacks=["timing", {"type": "early_stopping", "patience": 50},
                   {"metrics_collector": {"report_path": str(tmp_path / "r.html")}}],
        wrappers=[{"type": "vec_normalize", "norm_obs": True, "norm_reward": False}],
        artifacts_dir=str(tmp_path / "art"), eval_freq=256, eval_episodes=1, save_path=str(tmp_path / "m" / "f.pt"))
    metrics, trainer = train_from_config(cfg, return_trainer=True)
    assert metrics["timesteps"] == 512 and trainer.algo.seed == 3
    assert [type(c).__name__ for c in trainer.callbacks] == ["TimingCallback", "EarlyStoppingCallback",
                                                             "MetricsCollector"]
    assert [type(lg).__name__ for lg in trainer.logger] == ["CSVLogger", "ConsoleLogger"]
    norm = trainer.algo.obs_normalizer()           # the wrapper from the file, fed by the run
    assert type(norm).__name__ == "VecNormalize" and norm.norm_obs and not norm.norm_reward
    assert norm.obs_rms.count() >= 512
    for f in ("m.csv", "r.html", "art/actor.safetensors", "art/normalizer.safetensors", "m/f.pt"):
        assert (tmp_path / f).is_file(), f


def test_bad_entry_arguments_are_named():
    with pytest.raises(TypeError, match=r"callbacks\[0\]: EarlyStoppingCallback does not take \['patiense'\]; "
                                        r"its arguments are \['patience', 'min_delta', 'metric', 'mode'\]"):
        build_trainer({"algorithm": "ppo", "total_timesteps": 10, "callbacks": [{"early_stopping": {"patiense": 3}}]})
    with pytest.raises(ValueError, match="logger: unknown logger 'mlflow'; registered: console, csv, .*tensorboard, wandb"):
        build_trainer({"algorithm": "ppo", "total_timesteps": 10, "logger": "mlflow"})


def test_cli_train_config(tmp_path):
    exp = tmp_path / "experiment.yaml"
    exp.write_text("algorithm: a2c\nenv: CartPole-v1\ntotal_timesteps: 1_000\nseed: 1\nconfig:\n  n_envs: 4\n"
                   "  learning_rate: 7e-4\ncallbacks:\n  - timing\nartifacts_dir: art\n")
    out = subprocess.run([sys.executable, "-m", "rlox", "train", "--config", str(exp), "--timesteps", "400"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "trained a2c on CartPole-v1: 400 steps" in out.stdout and "wrote training artifacts to art" in out.stdout
    assert (tmp_path / "art" / "inference.yaml").is_file()
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithm: a2c\nloger: console\n")
    out = subprocess.run([sys.executable, "-m", "rlox", "train", "--config", str(bad)], capture_output=True,
                         text=True, cwd=tmp_path, timeout=300)
    assert out.returncode == 1 and "unknown top-level keys ['loger']" in out.stderr and "allowed:" in out.stderr
