"""Inference artifacts of DreamerV3 on image observations (file version 3).

The artifact's encoder (``image_input`` for the env's layout, ``rescale`` to [-0.5, 0.5],
conv2d / channel_layer_norm / silu stages, ``flatten``) must compute ``ConvEncoder``'s embedding exactly,
and the artifact must act as the trained algorithm's deterministic ``predict`` step by step over
whole episodes and resets, on channel-last and channel-first frames, uint8 or float. Broken
files fail with an error naming the file; the folder loads without rlox's training code.
"""
import gymnasium as gym
import numpy as np
import pytest
import torch
import yaml
from gymnasium import spaces

from rlox import Trainer
from rlox.algorithms.dreamer_v3 import DreamerV3
from rlox.artifacts import export_inference
from rlox.evaluation import evaluate_policy
from rlox.inference import ArtifactError, ChannelLayerNorm, InferencePolicy, RecurrentInferencePolicy, _build_layer
from tests._artifacts import copy_of, run_python

# A model small enough for tests on 2 busy cores (cnn_depth=4: two conv stages of 4 and 8 channels).
TINY = dict(size="XS", deter=32, hidden=32, layers=1, groups=4, classes=4, cnn_depth=4, batch_size=4,
            batch_length=8, imagination_horizon=5, n_bins=41, learning_starts=48, train_ratio=8, n_envs=1)


class Spot(gym.Env):
    """16x16 noisy uint8 frames with a bright 4x4 square in one colour channel at a random place;
    reward for telling which half the square is in (Discrete(2), or the sign of a Box action).
    Episodes are truncated after 15 steps. ``chw`` gives channel-first frames."""

    def __init__(self, chw=False, box=False):
        self.chw = chw
        self.observation_space = spaces.Box(0, 255, (3, 16, 16) if chw else (16, 16, 3), np.uint8)
        self.action_space = spaces.Box(-2.0, 2.0, (1,), np.float32) if box else spaces.Discrete(2)

    def _frame(self):
        f = self.np_random.integers(0, 40, (16, 16, 3), dtype=np.uint8)
        r, c = self.np_random.integers(0, 12, 2)
        f[r:r + 4, c:c + 4, self.np_random.integers(3)] = 255
        self.side = int(c >= 6)
        return np.ascontiguousarray(f.transpose(2, 0, 1)) if self.chw else f

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._frame(), {}

    def step(self, action):
        if isinstance(self.action_space, spaces.Discrete):
            reward = float(int(action) == self.side)
        else:
            reward = float((float(np.asarray(action).reshape(-1)[0]) > 0) == bool(self.side))
        self.t += 1
        return self._frame(), reward, False, self.t >= 15, {}


ENVS = {"RloxTestSpotHWC-v0": dict(chw=False, box=False), "RloxTestSpotCHW-v0": dict(chw=True, box=True)}
for _id, _kw in ENVS.items():
    if _id not in gym.registry:
        gym.register(_id, entry_point=Spot, kwargs=_kw)


@pytest.fixture(autouse=True)
def one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """env id -> (algorithm, artifacts folder), each trained ~100 steps (a dozen updates, so the
    channel LayerNorm weights are no longer their ones / zeros init)."""
    torch.set_num_threads(1)
    out = {}
    for env_id in ENVS:
        algo = DreamerV3(env_id, seed=0, **TINY)
        algo.train(96)
        assert algo.updates > 0
        path = tmp_path_factory.mktemp(env_id.split("-")[0])
        export_inference(algo, path)
        out[env_id] = (algo, path)
    return out


def frames(env_id, n, seed=0):
    env = gym.make(env_id)
    return np.stack([env.reset(seed=seed + i)[0] for i in range(n)])


@pytest.mark.parametrize("env_id", list(ENVS))
def test_encoder_computes_the_conv_encoders_embedding_exactly(trained, env_id):
    algo, path = trained[env_id]
    policy = InferencePolicy.load(path)
    encoder = algo.world_model["encoder"]
    gn = encoder.net[1]
    assert not torch.equal(gn.weight, torch.ones_like(gn.weight))       # trained, not the init
    obs = frames(env_id, 6)
    with torch.inference_mode():
        theirs = encoder(algo._obs_tensor(obs))
        for batch in (obs, obs.astype(np.float32)):                     # uint8, or floats 0..255
            ours = policy.networks["encoder"](torch.from_numpy(policy.normalize(batch)))
            assert torch.equal(ours, theirs)
        # one frame (a batch of one: oneDNN's sums can differ in the last bit from a batch of 6's)
        one = policy.networks["encoder"](torch.from_numpy(policy.normalize(obs[2:3])))
        assert torch.equal(one, encoder(algo._obs_tensor(obs[2:3])))
        torch.testing.assert_close(one, theirs[2:3])


@pytest.mark.parametrize("env_id", list(ENVS))
@pytest.mark.parametrize("n_envs", [1, 2])
def test_artifact_acts_as_the_algorithm_across_episodes(trained, env_id, n_envs):
    """``n_envs`` envs side by side for 40 steps (episodes of 15: resets of each env in between),
    uint8 frames as the env gives them (one env: one frame per call, no batch axis): the
    artifact's ``act`` equals ``DreamerV3.predict``, and so does the explicit ``predict`` form
    fed float frames."""
    algo, path = trained[env_id]
    policy = InferencePolicy.load(path)
    assert isinstance(policy, RecurrentInferencePolicy)
    envs = [gym.make(env_id) for _ in range(n_envs)]
    obs = np.stack([env.reset(seed=10 + i)[0] for i, env in enumerate(envs)])
    assert obs.dtype == np.uint8
    algo.reset_state()
    state, starts, ends = None, np.ones(n_envs, bool), 0
    for t in range(40):
        frame = obs[0] if n_envs == 1 else obs
        want = algo.predict(frame, deterministic=True)
        got = policy.act(frame)
        assert type(got) is type(want) and np.asarray(got).dtype == np.asarray(want).dtype
        np.testing.assert_array_equal(got, want, err_msg=f"step {t}")
        again, state = policy.predict(frame.astype(np.float32), state=state, episode_start=starts)
        np.testing.assert_array_equal(again, want, err_msg=f"step {t}")
        if n_envs == 1:
            want = np.asarray([want])
        starts[:] = False
        for i, env in enumerate(envs):
            o, _, terminated, truncated, _ = env.step(want[i])
            if terminated or truncated:
                o, _ = env.reset(seed=100 + t + i)
                starts[i] = True
                ends += 1
                policy.reset_state([i])
                algo.reset_state([i])
            obs[i] = o
    assert ends >= 2 * n_envs


def test_file_format_and_versions(trained, tmp_path, monkeypatch):
    spec = yaml.safe_load((trained["RloxTestSpotHWC-v0"][1] / "inference.yaml").read_text())
    assert spec["version"] == 3
    assert spec["observation_space"]["shape"] == [16, 16, 3] and spec["observation_space"]["dtype"] == "uint8"
    enc = spec["policy"]["networks"]["encoder"]
    assert [layer["type"] for layer in enc] == ["image_input", "rescale", "conv2d", "channel_layer_norm", "silu",
                                                "conv2d", "channel_layer_norm", "silu", "flatten"]
    assert enc[0] == {"type": "image_input", "obs_shape": [16, 16, 3], "layout": "hwc", "scale": False}
    assert enc[1] == {"type": "rescale", "divisor": 255.0, "offset": -0.5}
    assert enc[2]["kernel_size"] == [4, 4] and enc[2]["stride"] == [2, 2] and enc[2]["padding"] == [1, 1]
    assert enc[3] == {"type": "channel_layer_norm", "num_channels": 4, "eps": 1e-3, "affine": True}
    assert spec["policy"]["distribution"] == "unimix_categorical"
    chw = yaml.safe_load((trained["RloxTestSpotCHW-v0"][1] / "inference.yaml").read_text())
    assert chw["policy"]["networks"]["encoder"][0]["layout"] == "chw"
    assert chw["policy"]["distribution"] == "bounded_normal"
    # Vector DreamerV3 stays version 2 (no new layers), and this reader still loads it.
    export_inference(DreamerV3("Pendulum-v1", seed=0, **TINY), tmp_path / "vector")
    assert yaml.safe_load((tmp_path / "vector" / "inference.yaml").read_text())["version"] == 2
    assert isinstance(InferencePolicy.load(tmp_path / "vector"), RecurrentInferencePolicy)
    # A reader from before version 3 refuses the image artifact, saying to upgrade.
    import rlox.inference

    monkeypatch.setattr(rlox.inference, "INFERENCE_VERSION", 2)
    with pytest.raises(ArtifactError, match=r"has version 3, newer than this reader \(2\); upgrade rlox"):
        InferencePolicy.load(trained["RloxTestSpotHWC-v0"][1])


def test_wrong_frame_shape_is_a_clear_error(trained):
    policy = InferencePolicy.load(trained["RloxTestSpotHWC-v0"][1])
    chw = frames("RloxTestSpotCHW-v0", 2)
    with pytest.raises(ValueError, match=r"obs has shape \(3, 16, 16\), expected \(16, 16, 3\).*laid out as the "
                                         r"env gives them"):
        policy.act(chw[0])
    with pytest.raises(ValueError, match=r"obs has shape \(2, 3, 16, 16\), expected \(16, 16, 3\) \(one "
                                         r"observation\) or \(B, 16, 16, 3\)"):
        policy.predict(chw)
    with pytest.raises(ValueError, match=r"obs has shape \(16, 16, 4\), expected \(16, 16, 3\)"):
        policy.act(np.zeros((16, 16, 4), np.uint8))
    with pytest.raises(ValueError, match=r"obs has shape \(16, 16\), expected"):
        policy.act(np.zeros((16, 16), np.uint8))


def test_broken_files_are_named(trained, tmp_path):
    from safetensors.torch import load_file, save_file

    d = copy_of(trained["RloxTestSpotHWC-v0"][1], tmp_path)
    tensors = load_file(str(d / "actor.safetensors"))
    assert "encoder.2.weight" in tensors and "encoder.3.weight" in tensors      # conv, channel norm
    save_file({k: v for k, v in tensors.items() if k != "encoder.2.weight"}, str(d / "actor.safetensors"))
    with pytest.raises(ArtifactError, match=r"actor\.safetensors' lacks tensor 'encoder\.2\.weight'"):
        InferencePolicy.load(d)
    save_file({**tensors, "encoder.5.weight": torch.zeros(8, 4, 3, 3)}, str(d / "actor.safetensors"))
    with pytest.raises(ArtifactError, match=r"actor\.safetensors': tensor 'encoder\.5\.weight' has shape "
                                            r"\(8, 4, 3, 3\), inference\.yaml describes \(8, 4, 4, 4\)"):
        InferencePolicy.load(d)
    save_file({**tensors, "encoder.3.bias": torch.zeros(3)}, str(d / "actor.safetensors"))
    with pytest.raises(ArtifactError, match=r"tensor 'encoder\.3\.bias' has shape \(3,\)"):
        InferencePolicy.load(d)
    save_file(tensors, str(d / "actor.safetensors"))
    assert isinstance(InferencePolicy.load(d), RecurrentInferencePolicy)
    good = yaml.safe_load((d / "inference.yaml").read_text())
    for index, change, message in [
        (3, {"num_channels": 0}, "channel_layer_norm needs 'num_channels' as a positive int, got 0"),
        (3, {"num_channels": 5}, r"tensor 'encoder\.3\.weight' has shape \(4,\), inference\.yaml describes \(5,\)"),
        (3, {"eps": -1.0}, "channel_layer_norm needs 'eps' as a positive number"),
        (3, {"affine": "yes"}, "channel_layer_norm needs 'eps' as a positive number and 'affine' as true or false"),
        (1, {"divisor": 0.0}, "Rescale needs a finite, non-zero divisor"),
        (1, {"offset": "half"}, "rescale needs 'divisor' and 'offset' as numbers"),
        (0, {"scale": "no"}, "image_input 'scale' must be true or false"),
        (0, {"obs_shape": [16, 3, 16]}, r"image_input reads frames of shape \(16, 3, 16\), the observation "
                                        r"space has \(16, 16, 3\)"),
        (2, {"in_channels": 4}, r"tensor 'encoder\.2\.weight' has shape \(4, 3, 4, 4\), inference\.yaml "
                                r"describes \(4, 4, 4, 4\)"),
    ]:
        spec = yaml.safe_load(yaml.safe_dump(good))
        spec["policy"]["networks"]["encoder"][index].update(change)
        (d / "inference.yaml").write_text(yaml.safe_dump(spec))
        with pytest.raises(ArtifactError, match=message) as err:
            InferencePolicy.load(d)
        assert str(d) in str(err.value)
    (d / "inference.yaml").write_text(yaml.safe_dump(good))
    (d / "actor.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"actor\.safetensors' \(policy weights\) is missing"):
        InferencePolicy.load(d)


def test_loads_and_acts_without_training_code(trained):
    algo, path = trained["RloxTestSpotHWC-v0"]
    obs = frames("RloxTestSpotHWC-v0", 3, seed=5)
    algo.reset_state()
    want = [int(algo.predict(o, deterministic=True)) for o in obs]
    code = (
        "import sys, numpy as np\n"
        "from rlox.inference import InferencePolicy\n"
        f"policy = InferencePolicy.load({str(path)!r})\n"
        f"obs = np.frombuffer(bytes.fromhex({obs.tobytes().hex()!r}), np.uint8).reshape(3, 16, 16, 3)\n"
        "actions = [int(policy.act(o)) for o in obs]\n"
        "bad = [m for m in ('rlox.algorithms', 'rlox.world_models', 'rlox.trainer', 'rlox.artifacts') "
        "if m in sys.modules]\n"
        "print(actions, bad)\n")
    stdout = run_python(code)
    assert stdout.strip() == f"{want} []"


def test_training_artifacts_write_an_image_policy(tmp_path):
    env_id = "RloxTestSpotHWC-v0"
    config = {k: v for k, v in TINY.items()}
    trainer = Trainer("dreamer", env=env_id, seed=0, preset=False, config=config, artifacts_dir=tmp_path / "run",
                      eval_freq=48, eval_episodes=2)
    trainer.train(96)
    spec = yaml.safe_load((tmp_path / "run" / "inference.yaml").read_text())
    assert spec["version"] == 3 and spec["algorithm"] == "dreamer" and spec["policy"]["recurrent"]["type"] == "rssm"
    policy = InferencePolicy.load(tmp_path / "run")
    assert isinstance(policy, RecurrentInferencePolicy)
    # The folder holds the policy at its best evaluation: evaluated the same way (2 episodes side
    # by side, seeds 0 and 1, the state reset per env), it scores what was recorded.
    res = evaluate_policy(policy, env_id, n_episodes=2, seed=0, n_envs=2)
    assert res["mean_reward"] == pytest.approx(spec["best"]["mean_reward"], rel=1e-6)


def test_channel_layer_norm_normalises_each_pixels_channels():
    """``ChannelLayerNorm``: per pixel, the channels have mean 0 and variance 1 (then scale and
    shift), by hand in NumPy; channels-last and channel-first inputs give the same values; a
    wrong channel count is a clear error."""
    torch.manual_seed(0)
    norm = ChannelLayerNorm(3, eps=1e-3)
    with torch.no_grad():
        norm.weight.copy_(torch.tensor([1.0, 2.0, 0.5]))
        norm.bias.copy_(torch.tensor([0.0, -1.0, 3.0]))
    x = torch.randn(2, 3, 4, 5) * 3 + 1
    a = x.numpy().astype(np.float64)
    mean, var = a.mean(1, keepdims=True), a.var(1, keepdims=True)
    want = (a - mean) / np.sqrt(var + 1e-3) * np.array([1.0, 2.0, 0.5])[:, None, None] \
        + np.array([0.0, -1.0, 3.0])[:, None, None]
    np.testing.assert_allclose(norm(x).detach().numpy(), want, rtol=1e-5, atol=1e-5)
    cl = norm(x.contiguous(memory_format=torch.channels_last))
    assert cl.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(cl, norm(x))
    # not GroupNorm(1, C), which normalises channels and pixels together
    assert not torch.allclose(norm(x), torch.nn.functional.group_norm(x, 1, norm.weight, norm.bias, 1e-3), atol=1e-3)
    with pytest.raises(ValueError, match=r"expects images \[\.\.\., 3, H, W\], got shape \(2, 4, 4, 5\)"):
        norm(torch.zeros(2, 4, 4, 5))
    with pytest.raises(ValueError, match="num_channels as a positive int"):
        ChannelLayerNorm(0)


def test_group_norm_files_still_load():
    """Version-3 files written before the encoder's norm became ``channel_layer_norm`` hold
    ``group_norm`` layers; the reader still rebuilds them (and refuses a bad one)."""
    gn = _build_layer({"type": "group_norm", "num_groups": 1, "num_channels": 4, "eps": 1e-3, "affine": True}, "l")
    assert isinstance(gn, torch.nn.GroupNorm) and (gn.num_groups, gn.num_channels, gn.eps) == (1, 4, 1e-3)
    with pytest.raises(ArtifactError, match="group_norm needs 'num_groups' and 'num_channels' as positive ints"):
        _build_layer({"type": "group_norm", "num_groups": 3, "num_channels": 4}, "l")


def test_checkpoint_round_trip_and_old_group_norm_checkpoints_are_refused(trained, tmp_path):
    """An image DreamerV3 checkpoint loads back with equal encoder weights; one saved before the
    encoder's norm became the channel LayerNorm (no ``conv_norm`` mark: GroupNorm(1, C) weights
    of the same names and shapes) is refused with a clear error instead of loading silently."""
    from rlox.checkpointing import CheckpointError

    algo, _ = trained["RloxTestSpotHWC-v0"]
    path = tmp_path / "dreamer.pt"
    algo.save(path)
    loaded = DreamerV3.load(path)
    for (name, a), b in zip(algo.world_model["encoder"].state_dict().items(),
                            loaded.world_model["encoder"].state_dict().values()):
        assert torch.equal(a, b), name
    ckpt = torch.load(path, weights_only=False)
    assert ckpt["state"]["conv_norm"] == "channel_layer_norm"
    del ckpt["state"]["conv_norm"]
    torch.save(ckpt, tmp_path / "old.pt")
    with pytest.raises(CheckpointError, match=r"trained with GroupNorm\(1, C\).*retrain the model"):
        DreamerV3.load(tmp_path / "old.pt")
