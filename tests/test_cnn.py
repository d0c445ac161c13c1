"""CNN feature extractors (rlox.cnn) and image observations in PPO, A2C and DQN (SAC and TD3:
tests/test_off_policy_pixels.py): shapes,
channel layouts, uint8 scaling inside the network, uint8 replay, Atari through Trainer, errors."""
import numpy as np
import pytest
import torch

import gymnasium as gym
from gymnasium import spaces

from rlox.cnn import CnnQNetwork, ImpalaCNN, NatureCNN, check_image_policy, make_feature_extractor
from rlox.policies import DiscretePolicy, make_policy


class Squares(gym.Env):
    """36x36 uint8 frames showing a bright square left or right; reward 1 for the matching action."""

    def __init__(self, channels_last: bool = False):
        shape = (36, 36, 1) if channels_last else (1, 36, 36)
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.Discrete(2)
        self.channels_last = channels_last

    def _obs(self):
        img = np.zeros((36, 36), np.uint8)
        if self.side:
            img[10:26, 20:36] = 255
        else:
            img[10:26, 0:16] = 255
        return img[..., None] if self.channels_last else img[None]

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.side = 0, int(self.np_random.integers(2))
        return self._obs(), {}

    def step(self, action):
        reward = float(int(action) == self.side)
        self.t += 1
        self.side = int(self.np_random.integers(2))
        return self._obs(), reward, False, self.t >= 16, {}


gym.register("RloxTestSquares-v0", entry_point=lambda: Squares())
gym.register("RloxTestSquaresHWC-v0", entry_point=lambda: Squares(channels_last=True))


@pytest.mark.parametrize("layout,shape", [("chw", (4, 84, 84)), ("hwc", (84, 84, 3)), ("hw", (84, 84))])
def test_image_input_scales_in_float32_channels_last(layout, shape):
    # ImageInput changes the layout on the input's own dtype, then scales once: the values must
    # equal float conversion, channel-first layout and x / 255 done one by one, for uint8,
    # float32/float64 and flat rows, and stay float32 whatever torch's default dtype.
    from rlox.inference import ImageInput

    m = ImageInput(shape, layout)
    x = torch.randint(0, 256, (3, *shape), dtype=torch.uint8)
    ref = x.float()
    raw = ref.unsqueeze(1) if layout == "hw" else ref.movedim(-1, 1) if layout == "hwc" else ref
    ref = raw * (1.0 / 255.0)
    for inp in (x, x.float(), x.double(), x.reshape(3, -1)):
        y = m(inp)
        assert y.dtype == torch.float32 and y.shape == (3, *m.chw)
        assert y.is_contiguous(memory_format=torch.channels_last)
        assert torch.equal(y, ref), inp.dtype
    assert torch.equal(ImageInput(shape, layout, scale=False)(x), raw)
    default = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        assert m(x).dtype == torch.float32
    finally:
        torch.set_default_dtype(default)


@pytest.mark.parametrize("shape", [(4, 84, 84), (84, 84, 4), (84, 84), (64, 64, 3)])
def test_nature_cnn_layouts_and_uint8_scaling(shape):
    space = spaces.Box(0, 255, shape, np.uint8)
    net = NatureCNN(space)
    x = torch.randint(0, 256, (5, *shape), dtype=torch.uint8)
    out = net(x)
    assert out.shape == (5, 512)
    torch.testing.assert_close(net(x.float()), out)                   # uint8 and float 0..255 agree
    torch.testing.assert_close(net(x.reshape(5, -1)), out)            # flat replay rows too
    if len(shape) == 3 and shape[-1] < shape[0]:                       # channel-last: permuted inside
        chw = spaces.Box(0, 255, (shape[2], shape[0], shape[1]), np.uint8)
        twin = NatureCNN(chw)
        twin.load_state_dict(net.state_dict())
        torch.testing.assert_close(twin(x.permute(0, 3, 1, 2)), out)


def test_impala_cnn_and_q_network():
    space = spaces.Box(0, 255, (3, 64, 64), np.uint8)
    assert ImpalaCNN(space)(torch.zeros(2, 3, 64, 64, dtype=torch.uint8)).shape == (2, 256)
    q = CnnQNetwork(spaces.Box(0, 255, (4, 84, 84), np.uint8), n_actions=6)
    assert q(torch.zeros(3, 4, 84, 84, dtype=torch.uint8)).shape == (3, 6)
    with pytest.raises(ValueError, match="at least 36x36"):
        NatureCNN(spaces.Box(0, 255, (3, 16, 16), np.uint8))
    with pytest.raises(ValueError, match="features_extractor must be one of"):
        make_feature_extractor(space, "resnet")


def test_policy_picks_cnn_and_errors():
    img = spaces.Box(0, 255, (4, 84, 84), np.uint8)
    pol = make_policy(img, spaces.Discrete(6))
    assert isinstance(pol, DiscretePolicy) and isinstance(pol.features.net, NatureCNN)
    assert pol.hidden == [512]
    vec = spaces.Box(-1, 1, (8,), np.float32)
    assert make_policy(vec, spaces.Discrete(2)).features is None
    with pytest.raises(ValueError, match="features_extractor='mlp' would flatten 28224 pixels.*'nature'"):
        make_policy(img, spaces.Discrete(6), features_extractor="mlp")
    with pytest.raises(ValueError, match="needs uint8 image observations"):
        check_image_policy(vec, "nature", "PPO")
    assert isinstance(make_policy(img, spaces.Box(-1, 1, (2,)), features_extractor="impala").features.net, ImpalaCNN)


def test_shared_features_run_once_per_input():
    pol = make_policy(spaces.Box(0, 255, (1, 36, 36), np.uint8), spaces.Discrete(2))
    calls = []
    pol.features.net.register_forward_hook(lambda *a: calls.append(1))
    obs = torch.randint(0, 256, (4, 1, 36, 36)).float()
    pol.act(obs)
    assert len(calls) == 1                       # actor and critic share one CNN pass
    log_probs, entropy, values = pol.evaluate_actions(obs, torch.zeros(4, dtype=torch.long))
    assert len(calls) == 1                       # same input, same weights: the same graph
    (log_probs.sum() + values.sum()).backward()  # one backward through both heads ...
    pol.get_value(obs).sum().backward()          # ... then a fresh graph (never a freed one)
    assert len(calls) == 2
    with torch.no_grad():
        pol.get_value(obs)
        pol.get_value(obs)
        assert len(calls) == 3
        for p in pol.features.net.parameters():
            p.add_(0.01)                          # changed weights: computed again
        pol.get_value(obs)
    assert len(calls) == 4


def test_ppo_learns_from_pixels():
    from rlox import Trainer

    t = Trainer("ppo", env="RloxTestSquares-v0", seed=0, n_envs=4, n_steps=16, learning_rate=2e-3)
    assert t.algo.policy.features is not None
    assert not t.algo.compiled_update        # the compiled update is for MLPs
    before = t.evaluate(n_episodes=4)["mean_reward"]
    t.train(total_timesteps=1_500)
    after = t.evaluate(n_episodes=4)["mean_reward"]
    assert after >= 14.0 and after > before, (before, after)   # 16 is perfect, random ~8


@pytest.mark.parametrize("algo", ["a2c", "vpg", "trpo"])
def test_onpolicy_channel_last_pixels_smoke(algo):
    from rlox import Trainer

    t = Trainer(algo, env="RloxTestSquaresHWC-v0", seed=0, n_envs=2, n_steps=8)
    assert t.algo.policy.features.net.inp.channels_last
    metrics = t.train(total_timesteps=64)
    assert np.isfinite(metrics["policy_loss"])
    assert t.predict(np.zeros((36, 36, 1), np.uint8)) in (0, 1)
    with pytest.raises(ValueError, match=r"expected \(36, 36, 1\)"):
        t.predict(np.zeros((1, 36, 36), np.uint8))


def test_dqn_images_uint8_replay():
    from rlox import Trainer

    t = Trainer("dqn", env="RloxTestSquares-v0", seed=0, buffer_size=2_000, learning_starts=100,
                steps_per_iteration=100, target_update_interval=100, learning_rate=5e-4)
    assert isinstance(t.algo.q_net, CnnQNetwork)
    assert t.algo.buffer.obs_dtype == np.uint8 and t.algo.buffer.obs_shape == (1, 36, 36)
    metrics = t.train(total_timesteps=300)
    assert np.isfinite(metrics["loss"]) and t.algo._n_updates > 0
    sample = t.algo.buffer.sample(8, seed=0)
    assert sample["obs"].dtype == np.uint8 and set(np.unique(sample["obs"])) <= {0, 255}
    with pytest.raises(ValueError, match="dueling=True is for MLP"):
        Trainer("dqn", env="RloxTestSquares-v0", dueling=True)


def test_image_env_refused_by_mlp_settings():
    from rlox import Trainer

    # SAC and TD3 take images (tests/test_off_policy_pixels.py); a discrete image env is refused for
    # its action space, not its pixels.
    with pytest.raises(ValueError, match="SAC needs a continuous"):
        Trainer("sac", env="RloxTestSquares-v0")
    with pytest.raises(ValueError, match="features_extractor='mlp'"):
        Trainer("ppo", env="RloxTestSquares-v0", features_extractor="mlp")


def test_trainer_atari_ids_get_atari_wrapper_and_presets():
    pytest.importorskip("ale_py", reason="needs ale-py (pip install 'rlox[atari]')")
    from rlox import Trainer

    t = Trainer("ppo", env="ALE/Pong-v5", seed=0, n_envs=2)
    assert t.algo.observation_space == spaces.Box(0, 255, (4, 84, 84), np.uint8)
    assert t.config["n_steps"] == 128 and t.config["clip_eps"] == 0.1     # RL Zoo's Atari preset
    assert isinstance(t.algo.policy.features.net, NatureCNN)
    d = Trainer("dqn", env="ALE/Breakout-v5", seed=0, buffer_size=1_000)
    assert d.config["learning_starts"] == 100_000 and d.algo.buffer.obs_dtype == np.uint8
    from rlox.wrappers.visual import make_atari

    with pytest.raises(ValueError, match="did you mean"):
        make_atari("ALE/Pongg-v5")


@pytest.mark.parametrize("algo,env,kw", [
    ("ppo", "RloxTestSquares-v0", {"features_extractor": "nature"}),
    ("ppo", "RloxTestSquaresHWC-v0", {"features_extractor": "impala"}),
    ("dqn", "RloxTestSquares-v0", {"learning_starts": 50, "buffer_size": 500}),
])
def test_cnn_policies_export_inference_artifacts(tmp_path, algo, env, kw):
    """A CNN policy written by rlox.artifacts and rebuilt by rlox.inference (torch only) acts
    exactly as the trained algorithm; the yaml carries conv2d / image_input (/ residual) layers."""
    import yaml

    from rlox import Trainer
    from rlox.artifacts import export_inference
    from rlox.inference import InferencePolicy

    t = Trainer(algo, env=env, seed=0, **kw)
    t.train(total_timesteps=96)
    export_inference(t.algo, tmp_path)
    spec = yaml.safe_load((tmp_path / "inference.yaml").read_text())
    layers = next(iter(spec["policy"]["networks"].values()))
    kinds = [layer["type"] for layer in layers]
    assert kinds[0] == "image_input" and "conv2d" in kinds
    # CNN policies scale in their image_input (no 'scale: false', DreamerV3's): still version 1.
    assert spec["version"] == 1 and "scale" not in layers[0]
    if kw.get("features_extractor") == "impala":
        assert kinds.count("residual") == 6 and kinds.count("max_pool2d") == 3
    policy = InferencePolicy.load(tmp_path)
    shape = t.algo.observation_space.shape
    obs = np.random.default_rng(0).integers(0, 256, size=(16, *shape), dtype=np.uint8)
    np.testing.assert_array_equal(policy.act(obs), np.asarray(t.predict(obs, deterministic=True)))
    # The rebuilt network computes the trained one's outputs, not merely the same argmax.
    x = torch.as_tensor(obs)
    with torch.no_grad():
        ours = (t.algo.q_net(x) if algo == "dqn" else t.algo.policy.actor(x)).numpy()
        name = "q_values" if algo == "dqn" else "logits"
        theirs = policy._outputs(torch.from_numpy(obs.astype(np.float32)), (name,))[name].numpy()
    np.testing.assert_allclose(theirs, ours, rtol=1e-5, atol=1e-5)


def test_inference_rejects_bad_cnn_layers(tmp_path):
    from rlox.inference import ArtifactError, _build_layer

    with pytest.raises(ArtifactError, match="conv2d needs 'kernel_size' as 2 non-negative ints"):
        _build_layer({"type": "conv2d", "in_channels": 1, "out_channels": 2, "kernel_size": "3"}, "x")
    with pytest.raises(ArtifactError, match="conv2d needs 'in_channels' as a positive int"):
        _build_layer({"type": "conv2d", "in_channels": 0, "out_channels": 2, "kernel_size": 3}, "x")
    with pytest.raises(ArtifactError, match="layout in"):
        _build_layer({"type": "image_input", "obs_shape": [1, 36, 36], "layout": "cwh"}, "x")
    with pytest.raises(ArtifactError, match="residual needs 'layers'"):
        _build_layer({"type": "residual", "layers": []}, "x")
