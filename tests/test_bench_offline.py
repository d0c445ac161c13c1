"""benchmarks/bench_offline.py's tables, written from stored rows and curves (no training, no
d3rlpy): budgets and a CQL variant side by side, one curve table per set of evaluation points,
and TD3+BC's Q sign from the logged losses checked by hand."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_offline  # noqa: E402


def row(algo, steps, rlox, variant=""):
    return dict(dataset="pendulum-medium", env="Pendulum-v1", algo=algo, variant=variant, behaviour=83.3,
                behaviour_eval=87.1, seeds=5, steps=steps, hidden=64, rlox=rlox, rlox_lo=rlox - 5, rlox_hi=rlox + 5,
                d3rlpy=80.0, d3rlpy_lo=75.0, d3rlpy_hi=85.0)


def test_rows_curves_and_q_sign(tmp_path, monkeypatch):
    monkeypatch.setattr(bench_offline, "RESULTS", tmp_path)
    old = [row("td3_bc", 12000, 75.7), row("cql", 5000, 57.3)]
    new = [row("td3_bc", 2000, 86.7), row("cql", 5000, 20.0, variant="fixed"), row("td3_bc", 12000, 76.0)]
    rows = bench_offline.merge_rows(old, new)
    # a budget run again replaces its row; other budgets and the variant stand beside it
    assert [(r["algo"], r["steps"], r["variant"], r["rlox"]) for r in rows] == [
        ("td3_bc", 2000, "", 86.7), ("td3_bc", 12000, "", 76.0), ("cql", 5000, "", 57.3),
        ("cql", 5000, "fixed", 20.0)]

    # TD3+BC logs actor loss = -2.5 mean Q / mean|Q| + BC loss: (2.6 - 0.1) -> Q sign -1.00, (1.7 - 0.1) -> -0.64
    td3 = [{"actor_loss": 2.6, "bc_loss": 0.1}, {"actor_loss": 1.7, "bc_loss": 0.1}]
    cql_rlox = [{"cql_penalty": 3.0, "cql_alpha": 1.5}]
    cql_d3 = [{"alpha": 0.3, "conservative_loss": 2 * 1.5 * (3.0 - 10.0)}]   # sum over 2 critics of 1.5 (p - 10)
    curves = [dict(dataset="pendulum-medium", algo="td3_bc", variant="", seed=0, steps=[2000, 4000],
                   rlox=[89.1, 81.9], d3rlpy=[89.3, 69.7], rlox_metrics=td3, d3rlpy_metrics=td3),
              dict(dataset="pendulum-expert", algo="cql", variant="", seed=0, steps=[2500],
                   rlox=[-15.0], d3rlpy=[-14.6], rlox_metrics=cql_rlox, d3rlpy_metrics=cql_d3)]
    args = argparse.Namespace(rounds=2, episodes=5, sac_steps=3000, mujoco="", mujoco_sac_steps=40000,
                              mujoco_transitions=50000)
    bench_offline.write([], rows, args, [["--only", "learning"], ["--only", "curve"]], curves)
    text = (tmp_path / "offline.md").read_text()
    assert "| pendulum-medium | td3_bc | 2000 | 5 |" in text and "| pendulum-medium | td3_bc | 12000 | 5 |" in text
    assert "| pendulum-medium | cql (fixed weight 5) | 5000 | 5 |" in text
    assert "| pendulum-medium | td3_bc | 0 | rlox | 89.1 | 81.9 | Q sign -1.00 -> -0.64 |" in text
    assert "| pendulum-expert | cql | 0 | d3rlpy | -14.6 | penalty 3.00, weight 1.50 |" in text
    assert text.count("| dataset | algorithm | seed | library |") == 2   # one table per set of points
