"""benchmarks/bench_suite.py: one tiny rlox run into a temporary runs file, the cache skipping it
the second time, and the table, page and learning-curve plot written from the stored runs."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")
BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_suite  # noqa: E402


def test_tiny_run_is_cached_and_reported(tmp_path, monkeypatch):
    runs, page = tmp_path / "runs.json", tmp_path / "docs" / "results.md"
    args = ["--algos", "ppo", "--envs", "CartPole-v1", "--libs", "rlox", "--seeds", "0",
            "--budget", "2048", "--runs", str(runs), "--page", str(page)]
    bench_suite.main(args)
    stored = json.loads(runs.read_text())
    assert len(stored) == 1
    run = stored[0]
    assert (run["algo"], run["env"], run["lib"], run["seed"], run["budget"]) == ("ppo", "CartPole-v1", "rlox", 0, 2048)
    steps = [p[0] for p in run["curve"]]
    assert len(steps) >= 5 and steps == sorted(steps) and steps[-1] == 2048
    assert run["curve"][-1][1] == run["final"] and 8 <= run["final"] <= 500

    # The second call finds the run stored and trains nothing.
    monkeypatch.setattr(bench_suite, "run_one", lambda *a, **k: pytest.fail("a stored run was trained again"))
    bench_suite.main(args)
    assert json.loads(runs.read_text()) == stored

    png = tmp_path / "suite" / "ppo_CartPole-v1_2k.png"
    assert png.is_file() and png.read_bytes()[:4] == b"\x89PNG"
    text = page.read_text()
    assert f"| PPO | CartPole-v1 | 2k | rlox | 1 | {run['final']:.1f} |" in text
    assert "../suite/ppo_CartPole-v1_2k.png" in text
    # Rows without runs at their own budget are listed as missing, with the seeds they lack.
    assert "- ppo CartPole-v1 100k rlox: no runs" in text and "- ppo LunarLander-v3 1M sb3: no runs" in text
    table = json.loads((tmp_path / "suite.json").read_text())
    assert [(r["lib"], r["budget"], r["seeds"]) for r in table["rows"]] == [("rlox", 2048, [0])]

    # --report alone rebuilds from the cache.
    png.unlink()
    bench_suite.main(["--report", "--runs", str(runs), "--page", str(page)])
    assert png.is_file()


def test_versus_sb3_verdict():
    """yes at or above SB3's IQM; within CI below it but inside SB3's CI; NO below the CI or where
    SB3 has one seed (no CI)."""
    nan = float("nan")
    assert bench_suite._versus((-140.0, -150.0, -130.0), (-142.0, -160.0, -135.0)) == "yes"
    assert bench_suite._versus((-145.0, -150.0, -130.0), (-142.0, -160.0, -135.0)) == "within CI"
    assert bench_suite._versus((-161.0, -170.0, -150.0), (-142.0, -160.0, -135.0)) == "NO"
    assert bench_suite._versus((90.0, 80.0, 95.0), (100.0, nan, nan)) == "NO"
    assert bench_suite._versus((100.0, 80.0, 95.0), (100.0, nan, nan)) == "yes"


def test_unknown_names_are_refused():
    with pytest.raises(SystemExit, match="unknown env.*CartPole-v0"):
        bench_suite.select(["ppo"], ["CartPole-v0"])
    with pytest.raises(SystemExit, match="no row"):
        bench_suite.select(["dqn"], ["Pendulum-v1"])


def test_every_row_has_a_preset():
    from rlox.presets import get_preset

    for spec in bench_suite.SPECS:
        assert get_preset(spec.algo, spec.env), (spec.algo, spec.env)
        # a curve point every 20th of the budget; Atari every 5th (whole sampled games cost more)
        assert spec.eval_freq * (20 if bench_suite._deterministic(spec.env) else 5) == spec.budget, spec


def test_sb3_twins_of_a2c_and_trpo_carry_the_preset():
    """SB3's A2C and sb3-contrib's TRPO get the preset's values (schedules, gSDE, init, the halved
    value coefficient, VecNormalize), not their own defaults."""
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("sb3_contrib")
    from stable_baselines3.common.vec_env import VecNormalize

    model, env = bench_suite._sb3_model("a2c", "Pendulum-v1", 0)
    assert isinstance(env, VecNormalize) and env.num_envs == 8 and model.n_steps == 8
    assert model.use_sde and model.vf_coef == pytest.approx(0.4) and model.gamma == 0.9
    assert model.lr_schedule(1.0) == pytest.approx(7e-4) and model.lr_schedule(0.5) == pytest.approx(3.5e-4)
    assert model.policy.ortho_init is False and not model.normalize_advantage
    assert float(model.policy.log_std.detach().mean()) == pytest.approx(-2.0)

    model, env = bench_suite._sb3_model("trpo", "CartPole-v1", 0)
    assert not isinstance(env, VecNormalize) and env.num_envs == 2
    assert (model.n_steps, model.batch_size, model.cg_damping, model.n_critic_updates, model.gae_lambda) == \
        (512, 512, 1e-3, 20, 0.98)
    _, env = bench_suite._sb3_model("trpo", "Acrobot-v1", 0)
    assert isinstance(env, VecNormalize)
    with pytest.raises(ValueError, match="no entropy bonus"):
        bench_suite.sb3_trpo("CartPole-v1", 0, {"ent_coef": 0.01, "max_grad_norm": 0.0})
    # rlox's kl_reduction "sum" over Hopper's 3 action components is sb3-contrib's per-component
    # mean with the trust region and damping divided by 3; "mean" (the default) passes through.
    model, _ = bench_suite.sb3_trpo("Hopper-v5", 0, {"kl_reduction": "sum", "max_kl": 0.03, "cg_damping": 0.3,
                                                     "max_grad_norm": 0.0})
    assert (model.target_kl, model.cg_damping) == (pytest.approx(0.01), pytest.approx(0.1))
    model, _ = bench_suite.sb3_trpo("Hopper-v5", 0, {"max_kl": 0.03, "cg_damping": 0.3, "max_grad_norm": 0.0})
    assert (model.target_kl, model.cg_damping) == (pytest.approx(0.03), pytest.approx(0.3))


def test_no_verdict_below_the_seed_count(tmp_path):
    """A row graded against SB3 needs min_seeds runs on both sides; with fewer it says so."""
    runs, page = tmp_path / "runs.json", tmp_path / "results.md"

    def run(lib, seed, final):
        return dict(algo="ppo", env="CartPole-v1", lib=lib, seed=seed, budget=2048, final=final, curve=None,
                    protocol=bench_suite.PROTOCOL, commit="t", when="")

    stored = [run("rlox", 0, 400.0), run("sb3", 0, 100.0)]
    runs.write_text(json.dumps(stored))
    bench_suite.report(runs, page, tmp_path / "plots")
    row = next(l for l in page.read_text().splitlines() if l.startswith("| PPO | CartPole-v1 | 2k | rlox |"))
    assert row.split(" | ")[8] == "too few seeds"

    stored += [run(lib, s, f) for s in (1, 2) for lib, f in (("rlox", 400.0), ("sb3", 100.0))]
    runs.write_text(json.dumps(stored))
    bench_suite.report(runs, page, tmp_path / "plots")
    row = next(l for l in page.read_text().splitlines() if l.startswith("| PPO | CartPole-v1 | 2k | rlox |"))
    assert row.split(" | ")[4:6] == ["3", "400.0 [400.0, 400.0]"] and row.split(" | ")[8] == "yes"
