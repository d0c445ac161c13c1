"""SAC and TD3 from pixels: the CNN encoder (rlox.cnn) owned by the critics, uint8 replay,
the encoder trained by the critic loss only (or by each network's own loss with
share_encoder=False), learning on a tiny image task, save/load/resume and the inference export."""
import numpy as np
import pytest
import torch

import gymnasium as gym
from gymnasium import spaces

from rlox.cnn import ImpalaCNN, NatureCNN


class BarPosition(gym.Env):
    """A vertical bar 4 pixels wide at a random column of a ``size`` x ``size`` uint8 frame; its
    column maps to a target x in [-1, 1]. One continuous action, reward ``-|a - x|``, a new bar
    every step: a policy scores well only by reading the image (a constant action averages
    ``|a - x|`` >= 0.5, a uniform random one 0.67)."""

    def __init__(self, size: int = 36, channels_last: bool = False, horizon: int = 8):
        self.size, self.channels_last, self.horizon = size, channels_last, horizon
        shape = (size, size, 1) if channels_last else (1, size, size)
        self.observation_space = spaces.Box(0, 255, shape, np.uint8)
        self.action_space = spaces.Box(-1.0, 1.0, (1,), np.float32)

    def _obs(self):
        img = np.zeros((self.size, self.size), np.uint8)
        img[:, self.col:self.col + 4] = 255
        return img[..., None] if self.channels_last else img[None]

    def _new_bar(self):
        self.col = int(self.np_random.integers(0, self.size - 3))
        self.x = 2.0 * self.col / (self.size - 4) - 1.0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        self._new_bar()
        return self._obs(), {}

    def step(self, action):
        reward = -abs(float(np.asarray(action).reshape(-1)[0]) - self.x)
        self.t += 1
        self._new_bar()
        return self._obs(), reward, False, self.t >= self.horizon, {}


gym.register("RloxTestBar-v0", entry_point=lambda: BarPosition())
gym.register("RloxTestBarHWC-v0", entry_point=lambda: BarPosition(channels_last=True))
gym.register("RloxTestBar16-v0", entry_point=lambda: BarPosition(size=16))

# Small, fast settings: gamma 0 makes the task a bandit (Q(s, a) = -|a - x|).
FAST = dict(gamma=0.0, learning_starts=100, batch_size=32, buffer_size=2_000, steps_per_iteration=200,
            learning_rate=1e-3, hidden=64)


def _make(algo, env="RloxTestBar-v0", **kw):
    from rlox import Trainer

    extra = {"ent_coef": 0.05} if algo == "sac" else {}
    return Trainer(algo, env=env, seed=0, **{**FAST, **extra, **kw})


def _policy_error(trainer, n=120, seed=123, **env_kw):
    """Mean |a - x| of the deterministic policy on a fresh env."""
    env = BarPosition(**env_kw)
    obs, _ = env.reset(seed=seed)
    errs = []
    for _ in range(n):
        a = trainer.predict(obs, deterministic=True)
        errs.append(abs(float(np.asarray(a).reshape(-1)[0]) - env.x))
        obs, *_ = env.step(a)
    return float(np.mean(errs))


def _fill(algo, n=256, seed=0):
    """Push n random image transitions into the algorithm's buffer."""
    rng = np.random.default_rng(seed)
    shape = algo.observation_space.shape
    obs = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    nxt = rng.integers(0, 256, (n, *shape), dtype=np.uint8)
    algo.buffer.push_batch(obs, rng.uniform(-1, 1, (n, 1)).astype(np.float32),
                           rng.normal(size=n).astype(np.float32), np.zeros(n, np.float32),
                           np.zeros(n, np.float32), nxt)


def _params(module):
    return [p.detach().clone() for p in module.parameters()]


def _changed(before, module):
    return any(not torch.equal(a, b) for a, b in zip(before, module.parameters()))


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_image_networks_and_uint8_replay(algo):
    t = _make(algo)
    a = t.algo
    assert isinstance(a.encoder, NatureCNN) and isinstance(a.encoder_target, NatureCNN)
    assert a.actor_encoder is None                                     # share_encoder=True
    assert a.critic.obs_dim == 512 and a.actor.obs_dim == 512          # the heads read CNN features
    assert a.buffer.obs_dtype == np.uint8 and a.buffer.obs_shape == (1, 36, 36)
    metrics = t.train(total_timesteps=160)
    assert np.isfinite(metrics["critic_loss"]) and a._n_updates > 0
    sample = a.buffer.sample(8, seed=0)
    assert sample["obs"].dtype == np.uint8 and sample["next_obs"].dtype == np.uint8
    assert set(np.unique(sample["obs"])) <= {0, 255}
    # predict: one frame or a batch, channel-first as the env gives it; a wrong shape is refused.
    action = t.predict(np.zeros((1, 36, 36), np.uint8), deterministic=True)
    assert np.asarray(action).shape == (1,) and -1.0 <= float(action[0]) <= 1.0
    assert np.asarray(t.predict(np.zeros((5, 1, 36, 36), np.uint8))).shape == (5, 1)
    with pytest.raises(ValueError, match=r"expected \(1, 36, 36\)"):
        t.predict(np.zeros((36, 36, 1), np.uint8))


def test_impala_channel_last_and_separate_encoders():
    t = _make("td3", env="RloxTestBarHWC-v0", features_extractor="impala", share_encoder=False)
    a = t.algo
    assert isinstance(a.encoder, ImpalaCNN) and isinstance(a.actor_encoder, ImpalaCNN)
    assert isinstance(a.actor_encoder_target, ImpalaCNN)
    t.train(total_timesteps=120)
    assert np.asarray(t.predict(np.zeros((36, 36, 1), np.uint8))).shape == (1,)


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_encoder_is_trained_by_the_critic_loss_only(algo):
    """share_encoder=True: the critic step moves the encoder, the actor step does not (its loss
    reads the features detached); the actor's optimiser does not hold the encoder."""
    t = _make(algo, policy_delay=1) if algo == "td3" else _make(algo)
    a = t.algo
    _fill(a)
    enc_ids = {id(p) for p in a.encoder.parameters()}
    actor_opt_ids = {id(p) for g in a.actor_optimizer.param_groups for p in g["params"]}
    critic_opt_ids = {id(p) for g in a.critic_optimizer.param_groups for p in g["params"]}
    assert not enc_ids & actor_opt_ids and enc_ids <= critic_opt_ids

    # 1. The critic optimiser frozen: the actor learns, the encoder stays, and the actor loss left
    #    no gradient on it.
    enc0, actor0 = _params(a.encoder), _params(a.actor)
    step = a.critic_optimizer.step
    a.critic_optimizer.step = lambda *args, **kw: None
    a.encoder.zero_grad(set_to_none=True)
    try:
        a._train_step()
    finally:
        a.critic_optimizer.step = step
    assert _changed(actor0, a.actor)
    assert not _changed(enc0, a.encoder)
    # 2. A normal step: the critic loss moves the encoder.
    a._train_step()
    assert _changed(enc0, a.encoder)


def test_separate_encoders_each_trained_by_their_own_loss():
    """share_encoder=False (SB3's default): the actor's CNN moves with the actor loss even when
    the critic step is frozen, and the critics' CNN stays then."""
    t = _make("sac", share_encoder=False)
    a = t.algo
    _fill(a)
    assert {id(p) for p in a.actor_encoder.parameters()} <= {
        id(p) for g in a.actor_optimizer.param_groups for p in g["params"]}
    enc0, actor_enc0 = _params(a.encoder), _params(a.actor_encoder)
    step = a.critic_optimizer.step
    a.critic_optimizer.step = lambda *args, **kw: None
    try:
        a._train_step()
    finally:
        a.critic_optimizer.step = step
    assert _changed(actor_enc0, a.actor_encoder) and not _changed(enc0, a.encoder)


def test_sac_learns_from_pixels():
    """SAC reads the bar's position from the image: mean |a - x| well below the 0.5 of the best
    blind (constant) policy, within 500 env steps (seeds 0, 1, 2 reach 0.06, 0.04, 0.11)."""
    t = _make("sac")
    before = _policy_error(t)
    t.train(total_timesteps=500)
    after = _policy_error(t)
    assert after < 0.25, (before, after)


@pytest.mark.slow
def test_td3_learns_from_channel_last_pixels():
    t = _make("td3", env="RloxTestBarHWC-v0")
    t.train(total_timesteps=800)
    assert _policy_error(t, channels_last=True) < 0.2


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_save_load_resume_with_image_replay(tmp_path, algo):
    from rlox.algorithms import SAC, TD3

    cls = SAC if algo == "sac" else TD3
    t = _make(algo)
    t.train(total_timesteps=160)
    a = t.algo
    path = tmp_path / "model.pt"
    a.save(path, include_buffer=True)
    b = cls.load(path)
    assert b.buffer.obs_dtype == np.uint8 and len(b.buffer) == len(a.buffer)
    for name in ("encoder", "encoder_target"):
        for k, v in getattr(a, name).state_dict().items():
            torch.testing.assert_close(getattr(b, name).state_dict()[k], v)
    obs = np.random.default_rng(1).integers(0, 256, (6, 1, 36, 36), dtype=np.uint8)
    np.testing.assert_array_equal(b.predict(obs, deterministic=True), a.predict(obs, deterministic=True))
    b.train(total_timesteps=64)                                   # resumes from the restored state
    assert b.num_timesteps == a.num_timesteps + 64
    # A model saved with separate encoders is rebuilt with them.
    c = _make(algo, share_encoder=False).algo
    c.save(tmp_path / "sep.pt")
    d = cls.load(tmp_path / "sep.pt")
    assert d.actor_encoder is not None
    np.testing.assert_array_equal(d.predict(obs, deterministic=True), c.predict(obs, deterministic=True))


@pytest.mark.parametrize("algo", ["sac", "td3"])
def test_image_policy_inference_export(tmp_path, algo):
    """The artifact holds the encoder's conv layers in front of the actor's MLP, and
    rlox.inference (torch only) acts exactly as the trained model."""
    import yaml

    from rlox.artifacts import export_inference
    from rlox.inference import InferencePolicy

    t = _make(algo)
    t.train(total_timesteps=120)
    export_inference(t.algo, tmp_path)
    spec = yaml.safe_load((tmp_path / "inference.yaml").read_text())
    first = next(iter(spec["policy"]["networks"].values()))
    kinds = [layer["type"] for layer in first]
    assert kinds[0] == "image_input" and kinds.count("conv2d") == 3
    policy = InferencePolicy.load(tmp_path)
    obs = np.random.default_rng(0).integers(0, 256, size=(16, 1, 36, 36), dtype=np.uint8)
    np.testing.assert_allclose(policy.act(obs), np.asarray(t.predict(obs, deterministic=True)), rtol=1e-5, atol=1e-5)


def test_image_settings_errors():
    from rlox import Trainer

    with pytest.raises(ValueError, match="features_extractor='mlp' would flatten 1296 pixels"):
        Trainer("sac", env="RloxTestBar-v0", features_extractor="mlp")
    with pytest.raises(ValueError, match="NatureCNN needs images of at least 36x36.*ImpalaCNN"):
        Trainer("td3", env="RloxTestBar16-v0")
    with pytest.raises(ValueError, match="needs uint8 image observations"):
        Trainer("sac", env="Pendulum-v1", features_extractor="impala")
    # An off-policy algorithm without image support still refuses images, naming the ones that take them.
    from rlox.algorithms import SAC

    class VectorOnlySAC(SAC):
        supports_images = False

    with pytest.raises(ValueError, match="VectorOnlySAC does not take image observations.*SAC, TD3, DQN"):
        VectorOnlySAC("RloxTestBar-v0")


def test_uint8_replay_bytes_per_transition():
    """A 3x64x64 image transition costs 2 x 12,288 B of uint8 pixels (obs and next_obs) plus a
    few bytes of action, reward and flags; float32 would be 4x that."""
    import tracemalloc

    from rlox.buffers import ReplayBuffer

    cap = 500
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        buf = ReplayBuffer(cap, act_dim=1, obs_shape=(3, 64, 64), obs_dtype=np.uint8, seed=0)
        per = (tracemalloc.get_traced_memory()[0] - base) / cap
    finally:
        tracemalloc.stop()
    assert 2 * 3 * 64 * 64 <= per <= 2 * 3 * 64 * 64 + 64, per
    assert buf.capacity == cap


def test_sac_images_with_mmap_replay_buffer(tmp_path):
    """Image SAC on MmapReplayBuffer (newest transitions in memory, older ones in a file): uint8
    rows spill to the file and are sampled from it."""
    from rlox import Trainer
    from rlox.buffers import MmapReplayBuffer

    buf = MmapReplayBuffer(64, 400, act_dim=1, cold_path=str(tmp_path / "cold.bin"), obs_shape=(1, 36, 36),
                           obs_dtype=np.uint8, seed=0)
    t = Trainer("sac", env="RloxTestBar-v0", seed=0, buffer=buf, **{**FAST, "ent_coef": 0.05})
    assert t.algo.buffer is buf
    t.train(total_timesteps=160)
    assert len(buf) == 160 and t.algo._n_updates > 0
    sample = buf.sample(32, seed=0)
    assert sample["obs"].dtype == np.uint8 and sample["obs"].shape == (32, 1, 36, 36)
    assert (sample["indices"] >= 64).any()                      # some rows came from the cold file
    buf.close()
