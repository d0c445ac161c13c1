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


def test_main_interleaves_and_keeps_other_seeds(tmp_path, monkeypatch):
    """Per seed sheeprl then rlox; with --keep the saved runs of other seeds (and of the side not
    run) stay, and the table puts both sides' returns and train walls side by side."""
    import json

    monkeypatch.setattr(bench_dreamer, "RESULTS", tmp_path)
    monkeypatch.setattr(bench_dreamer.Table, "finish", lambda self: (tmp_path / "rows.json").write_text(
        json.dumps([[r.case, r.rlox, r.peer, r.ratio] for r in self.rows])))
    monkeypatch.setattr(bench_dreamer, "venv_python", lambda *a: (Path("python"), ""))
    order = []

    def fake(side, ret, wall):
        def run(py_or_seed, *args):
            seed = args[0] if side == "sheeprl" else py_or_seed
            on_eval = args[-1]
            order.append((side, seed))
            on_eval({"seed": seed, "curve": [[1000, ret + seed, wall, 2.0]], "wall": wall})
        return run

    monkeypatch.setattr(bench_dreamer, "run_sheeprl", fake("sheeprl", -300.0, 20.0))
    monkeypatch.setattr(bench_dreamer, "run_rlox", fake("rlox", -150.0, 10.0))
    config = {"size": "XS", "train_ratio": 96.0}
    (tmp_path / "dreamer_runs.json").write_text(json.dumps([{"config": config, "runs": [
        {"seed": 0, "curve": [[1000, -100.0, 12.0]], "wall": 12.0}]}]))
    argv = ["bench_dreamer.py", "--keep", "--steps", "1000", "--train-ratio", "96", "--first-seed", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    bench_dreamer.main()
    assert order == [("sheeprl", 1), ("rlox", 1)]
    saved = json.loads((tmp_path / "dreamer_runs.json").read_text())
    assert [r["seed"] for r in saved[0]["runs"]] == [0, 1] and [r["seed"] for r in saved[0]["peer_runs"]] == [1]
    (ret_case, rlox_ret, peer_ret, ret_ratio), (wall_case, rlox_wall, peer_wall, wall_ratio) = \
        json.loads((tmp_path / "rows.json").read_text())
    assert ret_case.startswith("Pendulum return at 1000 steps") and wall_case.startswith("Train wall to 1000")
    assert (rlox_ret, peer_ret) == (-124.5, -299.0) and ret_ratio == pytest.approx(299 / 124.5)
    assert (rlox_wall, peer_wall) == (11.0, 20.0) and wall_ratio == pytest.approx(20 / 11)


def test_wall_notes_name_each_runs_date():
    """The train-wall rows list the day of each seed's run (walls of different days differ on a
    shared machine); runs stored before dates were kept read 'not kept'."""
    runs = [{"seed": 0, "date": "2026-12-07"}, {"seed": 1}]
    assert bench_dreamer._dates(runs, {0: None, 1: None, 2: None}) == "['2026-12-07', 'not kept', 'not kept']"
