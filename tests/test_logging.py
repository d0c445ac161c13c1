"""rlox.logging: console lines, TensorBoard event files read back by TensorBoard, wandb offline, CSV."""
import csv
import io
import re
import sys

import numpy as np
import pytest

from rlox.algorithms.ppo import PPO
from rlox.callbacks import EvalCallback
from rlox.dashboard import MetricsCollector
from rlox.logging import ConsoleLogger, CSVLogger, LoggerCallback, TensorBoardLogger, WandbLogger, scalar_metrics

SMALL = dict(n_envs=8, n_steps=32, n_epochs=2, batch_size=128)


def ppo(**kw):
    return PPO("CartPole-v1", seed=0, **{**SMALL, **kw})


def test_console_logger_lines():
    out = io.StringIO()
    algo = ppo(logger=ConsoleLogger(log_interval=500, stream=out))
    algo.train(2048)
    lines = out.getvalue().splitlines()
    steps = [int(re.match(r"step=(\d+) ", line).group(1)) for line in lines]
    assert steps == [512, 1024, 1536, 2048]          # first iteration reaching each multiple of 500
    for line in lines:
        assert re.fullmatch(r"step=\d+ \| SPS=\d+ \| reward=(-|-?\d+\.\d\d)", line), line


def test_console_logger_shows_evaluations():
    out = io.StringIO()
    algo = PPO("CartPole-v1", seed=0, callbacks=[EvalCallback(eval_freq=512, n_eval_episodes=1)],
               logger=ConsoleLogger(log_interval=512, stream=out), **SMALL)
    algo.train(1024)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all(re.search(r" \| eval=\d+\.\d\d$", line) for line in lines)
    with pytest.raises(ValueError, match="log_interval must be an int >= 1"):
        ConsoleLogger(log_interval=0)


def test_tensorboard_event_files_read_back(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is in the dev extra; needed to read event files back")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    collector = MetricsCollector()
    tb = TensorBoardLogger(log_dir=tmp_path / "tb")
    algo = PPO("CartPole-v1", seed=0, callbacks=[collector, EvalCallback(eval_freq=1024, n_eval_episodes=1)],
               logger=tb, **SMALL)
    algo.train(2048)
    files = list((tmp_path / "tb").glob("events.out.tfevents.*"))
    assert len(files) == 1
    acc = EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    assert {"train/mean_reward", "loss/policy_loss", "loss/value_loss", "loss/entropy", "loss/approx_kl",
            "train/learning_rate", "time/sps", "eval/mean_reward"} <= tags
    for tag in ("loss/policy_loss", "train/learning_rate", "time/sps"):
        events = acc.Scalars(tag)
        steps, values = collector.series(tag)
        assert [e.step for e in events] == list(steps)
        np.testing.assert_allclose([e.value for e in events], values.astype(np.float32), rtol=1e-6)
    assert [e.step for e in acc.Scalars("eval/mean_reward")] == [1024, 2048]


def test_wandb_offline(tmp_path, monkeypatch):
    pytest.importorskip("wandb", reason="wandb is in the dev extra; WandbLogger is tested in offline mode")
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    logger = WandbLogger(project="rlox-tests", name="ppo-cartpole", dir=str(tmp_path))
    algo = ppo(logger=logger)
    algo.train(512)
    assert logger.run is None                       # finished when training ended
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and any(runs[0].rglob("*.wandb"))


def test_wandb_missing_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    with pytest.raises(ImportError, match=r"WandbLogger needs the wandb package.*pip install 'rlox\[logging\]'"):
        WandbLogger(project="x")


def test_csv_logger_adds_columns(tmp_path):
    path = tmp_path / "logs" / "metrics.csv"
    log = CSVLogger(path)
    log.on_train_step(10, {"train/mean_reward": 1.5, "loss/policy_loss": 0.25, "note": "text"})
    log.on_train_step(20, {"train/mean_reward": 2.5, "loss/policy_loss": 0.5, "eval/mean_reward": 9.0})
    log.close()
    rows = list(csv.DictReader(open(path)))
    assert list(rows[0]) == ["step", "train/mean_reward", "loss/policy_loss", "eval/mean_reward"]
    assert rows[0]["eval/mean_reward"] == "" and rows[1]["eval/mean_reward"] == "9.0"
    assert [r["step"] for r in rows] == ["10", "20"]


def test_custom_logger_fed_once_per_iteration_either_way():
    class Mine(LoggerCallback):
        def __init__(self):
            super().__init__()
            self.steps, self.started, self.flushed = [], 0, 0

        def on_train_step(self, step, metrics):
            self.steps.append(step)

        def on_training_start(self):
            self.started += 1

        def flush(self):
            self.flushed += 1

    as_logger, as_callback, plain = Mine(), Mine(), type("Plain", (), {"seen": []})()
    plain.on_train_step = lambda step, metrics: plain.seen.append(step)
    algo = PPO("CartPole-v1", seed=0, callbacks=[as_callback], logger=[as_logger, plain], **SMALL)
    algo.train(768)
    assert as_logger.steps == as_callback.steps == plain.seen == [256, 512, 768]
    assert as_logger.started == as_callback.started == 1
    assert as_logger.flushed == as_callback.flushed == 1
    with pytest.raises(TypeError, match="has no on_train_step"):
        PPO("CartPole-v1", seed=0, logger=object(), **SMALL).train(256)


def test_scalar_metrics_filters_non_numbers():
    import torch

    out = scalar_metrics({"a": 1, "b": np.float32(2.5), "c": torch.tensor(3.0), "d": "x", "e": [1, 2],
                          "f": np.array([4.0]), "g": True})
    assert out == {"a": 1.0, "b": 2.5, "c": 3.0, "f": 4.0, "g": 1.0}


def test_log_interval_thins_records_but_keeps_evaluations(tmp_path):
    path = tmp_path / "m.csv"
    log = CSVLogger(path, log_interval=100)
    for step in range(40, 441, 40):
        metrics = {"train/mean_reward": float(step)}
        if step == 280:
            metrics["eval/mean_reward"] = 1.0
        log.on_train_step(step, metrics)
    log.close()
    steps = [int(r["step"]) for r in csv.DictReader(open(path))]
    assert steps == [120, 200, 280, 320, 400]
    with pytest.raises(ValueError, match="log_interval must be None or an int >= 1"):
        TensorBoardLogger(tmp_path, log_interval=0)


def test_event_file_holds_one_event_per_step_with_every_tag(tmp_path):
    pytest.importorskip("tensorboard", reason="tensorboard is in the dev extra")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlox.logging import EventFileWriter

    w = EventFileWriter(tmp_path, flush_secs=1e9, max_queue=1000)
    for step in (1, 2, 3):
        w.add_scalars(step, {"a": float(step), "b/c": -step / 2})
    w.add_scalars(4, {})                                # nothing to write: no event
    w.close()
    with pytest.raises(ValueError, match="is closed"):
        w.add_scalars(5, {"a": 1.0})
    acc = EventAccumulator(str(w.path))
    acc.Reload()
    assert sorted(acc.Tags()["scalars"]) == ["a", "b/c"]
    assert [(e.step, e.value) for e in acc.Scalars("b/c")] == [(1, -0.5), (2, -1.0), (3, -1.5)]
