"""benchmarks/bench_dreamer.py's sheeprl peer, without sheeprl: rlox's config in the terms of the
worker's job and of sheeprl's hydra overrides (size preset, replay ratio), and the ratio the
table prints for negative returns."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import _sheeprl_worker  # noqa: E402
import bench_dreamer  # noqa: E402
from _harness import Row  # noqa: E402


def test_job_and_overrides_match_rlox_config():
    config = {"size": "XS", "train_ratio": 96.0, "model_lr": 3e-4, "actor_lr": 8e-5, "critic_lr": 8e-5}
    job = bench_dreamer.sheeprl_job(1, 20_000, 5_000, config, 10)
    assert (job["deter"], job["hidden"], job["layers"], job["groups"], job["classes"]) == (128, 128, 1, 8, 8)
    assert (job["batch_size"], job["batch_length"], job["learning_starts"]) == (16, 64, 1024)
    assert (job["model_lr"], job["actor_lr"], job["critic_lr"], job["seed"]) == (3e-4, 8e-5, 8e-5, 1)
    over = _sheeprl_worker.overrides(job, "/tmp/logs")
    # 96 replayed steps per env step / (16 x 64 steps per update) = 0.09375 updates per env step
    assert "algo.replay_ratio=0.09375" in over
    assert "algo.world_model.recurrent_model.recurrent_state_size=128" in over
    assert "algo.world_model.stochastic_size=8" in over and "algo.world_model.discrete_size=8" in over
    assert "algo.dense_units=128" in over and "algo.mlp_layers=1" in over
    assert "algo.world_model.optimizer.lr=0.0003" in over and "algo.actor.optimizer.lr=8e-05" in over

    # an explicit field overrides the preset's, as in rlox
    assert bench_dreamer.sheeprl_job(0, 1000, 500, {**config, "hidden": 64}, 2)["hidden"] == 64
    with pytest.raises(SystemExit, match="1 env"):
        bench_dreamer.sheeprl_job(0, 1000, 500, {**config, "n_envs": 2}, 2)


def test_ratio_of_negative_returns():
    # Pendulum returns are costs: |peer| / |rlox|, > 1 when rlox's return is higher
    assert Row("r", -112.0, -150.0, "sheeprl", None, unit="return").ratio == pytest.approx(150 / 112)
    assert Row("r", -300.0, -150.0, "sheeprl", None, unit="return").ratio == pytest.approx(0.5)
    assert Row("r", 400.0, 200.0, "peer", None, unit="return").ratio == pytest.approx(2.0)
    assert Row("t", 2.0, 3.0, "peer", None).ratio == pytest.approx(1.5)           # times: peer / rlox
