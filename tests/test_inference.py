"""rlox.inference: the policy rebuilt from artifacts alone, the runner, and errors that name the file."""
import ast
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from rlox import Trainer
from rlox.inference import ArtifactError, InferencePolicy, InferenceRunner
from tests._artifacts import copy_of, run_python

SMALL = {"n_envs": 8, "n_steps": 32, "n_epochs": 2, "batch_size": 128}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("artifacts") / "cartpole"
    trainer = Trainer("ppo", env="CartPole-v1", seed=0, config=SMALL, artifacts_dir=path, eval_freq=10**9,
                      eval_episodes=2)
    trainer.train(2048)
    return path


def test_module_imports_no_rlox_code():
    src = Path(__file__).resolve().parents[1] / "rlox" / "inference.py"
    for node in ast.walk(ast.parse(src.read_text())):
        if isinstance(node, ast.Import):
            assert not any(a.name.split(".")[0] == "rlox" for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0 and (node.module or "").split(".")[0] != "rlox", node.module


def test_loads_in_a_process_without_training_code(run_dir):
    code = (
        "import sys, numpy as np\n"
        "from rlox.inference import InferencePolicy, InferenceRunner\n"
        f"p = InferencePolicy.load({str(run_dir)!r})\n"
        "a = p.act(np.zeros(4, np.float32))\n"
        f"r = InferenceRunner.load({str(run_dir)!r}).run_episode(seed=0)\n"
        "bad = [m for m in ('rlox.algorithms', 'rlox.trainer', 'rlox.callbacks', 'rlox.collectors', "
        "'rlox.policies', 'rlox.artifacts') if m in sys.modules]\n"
        "print(int(a), r['length'], bad)\n")
    stdout = run_python(code)
    action, length, bad = stdout.split(maxsplit=2)
    assert action in ("0", "1") and int(length) >= 1 and bad.strip() == "[]"


def test_runner_step_and_episodes(run_dir):
    import gymnasium as gym

    runner = InferenceRunner.load(run_dir, env=gym.make("CartPole-v1"))
    obs, reward, terminated, truncated, info = runner.step()        # resets first
    assert obs.shape == (4,) and reward == 1.0 and runner.episode_length == 1
    res = runner.run_episode(seed=3)
    assert res["length"] == res["return"] >= 8
    again = runner.run_episode(seed=3)
    assert again == res                                                 # deterministic
    capped = runner.run_episode(seed=3, max_steps=5)
    assert capped["length"] == min(5, res["length"])
    # A control loop without an env: start from a raw observation, ask for actions.
    loop = InferenceRunner(InferencePolicy.load(run_dir), env=None, obs=np.zeros(4, np.float32))
    assert loop.act() in (0, 1)
    with pytest.raises(RuntimeError, match="has no env"):
        loop.step()
    runner.close()


def test_batches_stochastic_and_bad_obs(run_dir):
    p = InferencePolicy.load(run_dir, seed=5)
    obs = np.random.default_rng(0).normal(size=(64, 4)).astype(np.float32)
    acts = p.act(obs, deterministic=False)
    assert acts.shape == (64,) and acts.dtype == np.int64
    np.testing.assert_array_equal(InferencePolicy.load(run_dir, seed=5).act(obs, deterministic=False), acts)
    with pytest.raises(ValueError, match=r"obs has shape \(3,\), expected \(4,\)"):
        p.act(np.zeros(3))
    with pytest.raises(TypeError, match="obs must hold numbers"):
        p.act(np.array(["a"] * 4))


def test_missing_files_are_named(run_dir, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        InferencePolicy.load(tmp_path / "nowhere")
    d = copy_of(run_dir, tmp_path)
    (d / "actor.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"actor\.safetensors' \(policy weights\) is missing"):
        InferencePolicy.load(d)
    (d / "inference.yaml").unlink()
    with pytest.raises(FileNotFoundError, match=r"inference\.yaml' is missing"):
        InferencePolicy.load(d)


def test_corrupt_files_are_named(run_dir, tmp_path):
    d = copy_of(run_dir, tmp_path)
    (d / "actor.safetensors").write_bytes(b"\x00garbage" * 10)
    with pytest.raises(ArtifactError, match=r"actor\.safetensors' \(policy weights\) is corrupt"):
        InferencePolicy.load(d)
    shutil.copy(run_dir / "actor.safetensors", d / "actor.safetensors")
    good = (d / "inference.yaml").read_text()
    (d / "inference.yaml").write_text("format: [unclosed\n")
    with pytest.raises(ArtifactError, match=r"inference\.yaml' is not valid YAML"):
        InferencePolicy.load(d)
    (d / "inference.yaml").write_text("just: text\n")
    with pytest.raises(ArtifactError, match="is not an rlox inference file"):
        InferencePolicy.load(d)
    spec = yaml.safe_load(good)
    spec["policy"]["networks"]["actor"][0]["out_features"] = 32       # no longer matches the weights
    (d / "inference.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ArtifactError, match=r"tensor 'actor\.0\.weight' has shape \(64, 4\)"):
        InferencePolicy.load(d)
    spec = yaml.safe_load(good)
    spec["policy"]["networks"]["actor"].append({"type": "linear", "in_features": 2, "out_features": 2})
    (d / "inference.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ArtifactError, match=r"lacks tensor 'actor\.5\.weight'"):
        InferencePolicy.load(d)
    spec = yaml.safe_load(good)
    spec["policy"]["networks"]["actor"][1]["type"] = "swish9"
    (d / "inference.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(ArtifactError, match="unknown layer type 'swish9'"):
        InferencePolicy.load(d)
    spec = yaml.safe_load(good)
    spec["observation_normalization"] = {"enabled": True, "file": "normalizer.safetensors", "clip": 10.0}
    (d / "inference.yaml").write_text(yaml.safe_dump(spec))
    with pytest.raises(FileNotFoundError, match=r"normalizer\.safetensors' \(observation statistics\) is missing"):
        InferencePolicy.load(d)


def test_squashed_gaussian_and_greedy_specs(tmp_path):
    """Off-policy shapes of the export contract: SAC-like two-head actor, DQN-like Q network."""
    import torch
    from safetensors.torch import save_file
    from torch import nn

    from rlox.artifacts import describe_network

    torch.manual_seed(0)
    trunk, mu, log_std = nn.Sequential(nn.Linear(3, 8), nn.ReLU()), nn.Sequential(nn.Linear(8, 1)), \
        nn.Sequential(nn.Linear(8, 1))
    nets = {"trunk": trunk, "mu": mu, "log_std": log_std}
    layers, tensors = {}, {}
    for name, m in nets.items():
        layers[name], t = describe_network(name, m)
        tensors.update({k: v.detach().clone() for k, v in t.items()})
    save_file(tensors, str(tmp_path / "actor.safetensors"))
    spec = {"format": "rlox-inference", "version": 1, "env_id": "Pendulum-v1",
            "observation_space": {"type": "box", "shape": [3]},
            "action_space": {"type": "box", "shape": [1], "low": [-2.0], "high": [2.0]},
            "policy": {"distribution": "squashed_gaussian", "networks": layers,
                       "outputs": {"mean": ["trunk", "mu"], "log_std": ["trunk", "log_std"]}, "tensors": []},
            "observation_normalization": {"enabled": False}}
    (tmp_path / "inference.yaml").write_text(yaml.safe_dump(spec))
    p = InferencePolicy.load(tmp_path)
    obs = np.random.default_rng(0).normal(size=(16, 3)).astype(np.float32)
    with torch.no_grad():
        expected = 2.0 * torch.tanh(mu(trunk(torch.from_numpy(obs)))).numpy()
    np.testing.assert_allclose(p.act(obs), expected, rtol=1e-5, atol=1e-6)
    assert np.all(np.abs(p.act(obs, deterministic=False)) <= 2.0)
    # TD3-like: the actor MLP without its final tanh; tanh and the bounds are applied on load.
    spec["policy"] = {"distribution": "squashed_deterministic", "networks": layers,
                      "outputs": {"action": ["trunk", "mu"]}}
    (tmp_path / "inference.yaml").write_text(yaml.safe_dump(spec))
    np.testing.assert_allclose(InferencePolicy.load(tmp_path).act(obs), expected, rtol=1e-5, atol=1e-6)
    # DQN-like: argmax of Q-values.
    q = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    layers, t = describe_network("q", q)
    save_file({k: v.detach().clone() for k, v in t.items()}, str(tmp_path / "actor.safetensors"))
    spec.update(observation_space={"type": "box", "shape": [4]}, action_space={"type": "discrete", "n": 3},
                policy={"distribution": "greedy", "networks": {"q": layers}, "outputs": {"q_values": ["q"]}})
    (tmp_path / "inference.yaml").write_text(yaml.safe_dump(spec))
    p = InferencePolicy.load(tmp_path)
    obs = np.random.default_rng(1).normal(size=(32, 4)).astype(np.float32)
    with torch.no_grad():
        np.testing.assert_array_equal(p.act(obs), q(torch.from_numpy(obs)).argmax(-1).numpy())
