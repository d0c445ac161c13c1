"""python -m rlox train|eval|list, and its one-line errors."""
import subprocess
import sys

import importlib.util

import pytest

from rlox.cli import main

HAVE_ALGOS = all(importlib.util.find_spec(m) is not None for m in ("rlox.plugins", "rlox.algorithms"))
real = pytest.mark.skipif(not HAVE_ALGOS, reason="rlox.plugins / rlox.algorithms not built yet")


@pytest.fixture
def fake(monkeypatch):
    """Trainer resolves every built-in name to tests._fake_algo.FakeAlgo."""
    import rlox.trainer as tr
    from tests._fake_algo import FakeAlgo

    def resolve(name):
        if name.lower() not in ("ppo", "a2c", "vpg", "trpo"):
            raise KeyError(f"unknown algorithm {name!r}; did you mean 'ppo'?")
        return FakeAlgo

    monkeypatch.setattr(tr, "resolve_algorithm", resolve)
    return FakeAlgo


def test_fake_train_save_eval(fake, tmp_path, capsys):
    ckpt = tmp_path / "m.pt"
    code = main(["train", "--algo", "ppo", "--env", "CartPole-v1", "--timesteps", "50", "--save", str(ckpt)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "trained ppo on CartPole-v1: 50 steps, 3 episodes, mean_reward 9.50" in out and ckpt.is_file()
    code = main(["eval", "--algo", "ppo", "--checkpoint", str(ckpt), "--env", "CartPole-v1", "--episodes", "3"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "mean_reward" in out and "+-" in out and "over 3 episodes" in out


def test_fake_experiment_file(fake, tmp_path, capsys):
    exp = tmp_path / "exp.yaml"
    exp.write_text("algorithm: a2c\nenv: Pendulum-v1\ntotal_timesteps: 1_000\nseed: 3\n"
                   "config:\n  n_envs: 2\n  learning_rate: 3e-4\n")
    code = main(["train", "--config", str(exp)])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "trained a2c on Pendulum-v1: 1000 steps" in out
    algo = fake.instances[-1]
    assert algo.config.n_envs == 2 and algo.config.learning_rate == 3e-4 and algo.seed == 3


def test_fake_error_paths(fake, tmp_path, capsys):
    def one_line(argv, match):
        code = main(argv)
        _, err = capsys.readouterr()
        _one_line_error(code, err, match)

    one_line(["train", "--env", "CartPoel-v1", "--timesteps", "10"],
             "unknown env 'CartPoel-v1'; did you mean 'CartPole-v1'")
    one_line(["train", "--algo", "ppoo", "--timesteps", "10"], "unknown algorithm 'ppoo'; did you mean 'ppo'?")
    one_line(["eval", "--algo", "ppo", "--checkpoint", str(tmp_path / "none.pt"), "--env", "CartPole-v1"],
             "does not exist")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"this is not a checkpoint")
    one_line(["eval", "--algo", "ppo", "--checkpoint", str(junk), "--env", "CartPole-v1"],
             f"cannot load checkpoint {str(junk)!r} as ppo")
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithm: ppo\nenv: CartPole-v1\nlogr: x\n")
    one_line(["train", "--config", str(bad)], "unknown top-level keys ['logr']")
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1, 2\n")
    one_line(["train", "--config", str(broken)], "is not valid YAML")
    one_line(["train", "--config", str(tmp_path / "missing.yaml")], "does not exist")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("learning_rate: -1\n")
    one_line(["train", "--timesteps", "10", "--config", str(invalid)], "learning_rate must be > 0")
    one_line(["train", "--timesteps", "0"], "--timesteps must be >= 1, got 0")
    one_line(["eval", "--algo", "ppo", "--checkpoint", str(junk), "--episodes", "0"], "--episodes must be >= 1")


def _run(argv, capsys):
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@real
def test_module_entry_point_lists(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "rlox", "list"], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ppo" in proc.stdout and "CartPole-v1" in proc.stdout and "presets:" in proc.stdout
    lines = dict(line.split(": ", 1) for line in proc.stdout.splitlines() if ": " in line)
    assert {"console", "csv", "tensorboard", "wandb"} <= set(lines["loggers (experiment files)"].split(", "))
    assert "early_stopping" in lines["callbacks (experiment files)"].split(", ")
    assert lines["wrappers (experiment files)"].split(", ") == ["vec_normalize"]


@real
def test_train_save_eval_round_trip(tmp_path, capsys):
    ckpt = tmp_path / "model.pt"
    code, out, err = _run(["train", "--algo", "ppo", "--env", "CartPole-v1", "--timesteps", "256",
                           "--seed", "1", "--save", str(ckpt)], capsys)
    assert code == 0, err
    assert "trained ppo on CartPole-v1" in out and ckpt.is_file()
    code, out, err = _run(["eval", "--algo", "ppo", "--checkpoint", str(ckpt), "--env", "CartPole-v1",
                           "--episodes", "2"], capsys)
    assert code == 0, err
    assert "mean_reward" in out and "+-" in out and "over 2 episodes" in out
    # --algo and --env default to what the checkpoint records
    code, out, err = _run(["eval", "--checkpoint", str(ckpt), "--episodes", "1"], capsys)
    assert code == 0, err
    assert out.startswith("ppo on CartPole-v1: mean_reward") and "over 1 episodes" in out


@real
def test_train_with_yaml_config_files(tmp_path, capsys):
    flat = tmp_path / "flat.yaml"
    flat.write_text("n_envs: 2\nn_steps: 16\nlearning_rate: 3e-4\n")
    code, out, err = _run(["train", "--env", "CartPole-v1", "--timesteps", "64", "--config", str(flat)], capsys)
    assert code == 0, err
    exp = tmp_path / "exp.yaml"
    exp.write_text("algorithm: ppo\nenv: CartPole-v1\ntotal_timesteps: 1_000\nseed: 3\n"
                   "config:\n  n_envs: 2\n  n_steps: 16\n")
    code, out, err = _run(["train", "--config", str(exp), "--timesteps", "64"], capsys)
    assert code == 0, err
    assert "trained ppo on CartPole-v1" in out


def _one_line_error(code, err, match):
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err and lines[0].startswith("rlox: error:")
    assert match in lines[0], lines[0]


@real
def test_unknown_env_one_line(capsys):
    code, out, err = _run(["train", "--algo", "ppo", "--env", "CartPoel-v1", "--timesteps", "10"], capsys)
    _one_line_error(code, err, "unknown env 'CartPoel-v1'; did you mean 'CartPole-v1'")


@real
def test_unknown_algorithm_one_line(capsys):
    code, out, err = _run(["train", "--algo", "ppoo", "--env", "CartPole-v1", "--timesteps", "10"], capsys)
    _one_line_error(code, err, "ppoo")


@real
def test_bad_checkpoints_one_line(tmp_path, capsys):
    code, out, err = _run(["eval", "--algo", "ppo", "--checkpoint", str(tmp_path / "none.pt"),
                           "--env", "CartPole-v1"], capsys)
    _one_line_error(code, err, "does not exist")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"this is not a checkpoint")
    code, out, err = _run(["eval", "--algo", "ppo", "--checkpoint", str(junk), "--env", "CartPole-v1"], capsys)
    _one_line_error(code, err, f"cannot load checkpoint {str(junk)!r} as ppo")


@real
def test_bad_config_files_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text("algorithm: ppo\nenv: CartPole-v1\nlogr: x\n")
    code, out, err = _run(["train", "--config", str(bad)], capsys)
    _one_line_error(code, err, "unknown top-level keys ['logr']")
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [1, 2\n")
    code, out, err = _run(["train", "--config", str(broken)], capsys)
    _one_line_error(code, err, "is not valid YAML")
    code, out, err = _run(["train", "--config", str(tmp_path / "missing.yaml")], capsys)
    _one_line_error(code, err, "does not exist")
    invalid = tmp_path / "invalid.yaml"
    invalid.write_text("learning_rate: -1\n")
    code, out, err = _run(["train", "--timesteps", "10", "--config", str(invalid)], capsys)
    _one_line_error(code, err, "learning_rate")


@real
def test_bad_numbers_one_line(capsys):
    code, out, err = _run(["train", "--timesteps", "0"], capsys)
    _one_line_error(code, err, "--timesteps must be >= 1, got 0")


def test_usage_errors_exit_nonzero(capsys):
    with pytest.raises(SystemExit) as info:
        main([])
    assert info.value.code != 0
    with pytest.raises(SystemExit) as info:
        main(["eval", "--algo", "ppo"])  # --checkpoint missing
    assert info.value.code != 0
