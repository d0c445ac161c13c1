"""The benchmarks' shared runs store (``benchmarks/_harness.store_run``) and the RecurrentPPO
bench's report built from it."""
from __future__ import annotations

import json
import multiprocessing as mp
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

from _harness import store_run  # noqa: E402


def _same(a, b):
    return a["case"] == b["case"]


def _writer(path: str, worker: int, n: int) -> None:
    for i in range(n):
        store_run({"case": f"w{worker}-{i}", "value": i}, Path(path), _same)


def test_store_run_replaces_the_same_case_and_keeps_the_others(tmp_path):
    path = tmp_path / "runs.json"
    store_run({"case": "a", "value": 1}, path, _same)
    store_run({"case": "b", "value": 2}, path, _same)
    store_run({"case": "a", "value": 3}, path, _same)
    runs = json.loads(path.read_text())
    assert sorted((r["case"], r["value"]) for r in runs) == [("a", 3), ("b", 2)]
    assert not list(tmp_path.glob("*.tmp"))


def test_store_run_from_processes_side_by_side_loses_nothing(tmp_path):
    path = tmp_path / "runs.json"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 10)) for w in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cases = {r["case"] for r in json.loads(path.read_text())}
    assert cases == {f"w{w}-{i}" for w in range(6) for i in range(10)}


def test_recurrent_report_groups_by_env_budget_and_settings(tmp_path, monkeypatch):
    pytest.importorskip("gymnasium")
    import bench_recurrent

    runs = tmp_path / "recurrent_runs.json"
    monkeypatch.setattr(bench_recurrent, "RUNS", runs)
    for lib, ret, sps in (("rlox", -200.0, 1000.0), ("sb3c", -250.0, 250.0), ("ppo", -1100.0, 3000.0)):
        for seed in range(3):
            store_run({"env": "PendulumNoVel-v1", "lib": lib, "seed": seed, "budget": 100_000, "settings": "zoo",
                       "return": ret + seed, "sps": sps}, runs, bench_recurrent._same)
    store_run({"env": "CartPoleNoVel-v1", "lib": "rlox", "seed": 0, "budget": 20_000, "settings": "zoo-v0",
               "return": 300.0, "sps": 400.0}, runs, bench_recurrent._same)
    text = bench_recurrent.report()
    rows = [line for line in text.splitlines() if line.startswith("| PendulumNoVel")]
    assert len(rows) == 3
    assert "| rlox RecurrentPPO | 3 | -200, -199, -198 | -199.0 | 1000 | 4.00x |" in rows[0]
    assert "| sb3-contrib RecurrentPPO | 3 |" in rows[1] and "1.00x" in rows[1]
    # A block without a sb3-contrib run has no ratio, and the older settings stay a block of their own.
    cart = [line for line in text.splitlines() if line.startswith("| CartPoleNoVel")]
    assert cart == ["| CartPoleNoVel-v1 | 20k | zoo-v0 | rlox RecurrentPPO | 1 | 300 | 300.0 | 400 | - |"]
