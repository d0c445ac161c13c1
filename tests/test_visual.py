"""Visual wrappers (rlox.wrappers.visual): spaces, uint8 handling, AtariWrapper against
gymnasium's AtariPreprocessing + FrameStackObservation step by step, DeepMind Control."""
import numpy as np
import pytest

import gymnasium as gym
from gymnasium import spaces

from rlox.wrappers.visual import (AtariWrapper, DMControlWrapper, FrameStack, ImagePreprocess, image_layout,
                                  is_image_space, make_atari)

ale_py = pytest.importorskip("ale_py", reason="Atari tests need ale-py (pip install 'rlox[atari]')")
pytest.importorskip("cv2", reason="image resizing needs opencv-python-headless (pip install 'rlox[atari]')")
gym.register_envs(ale_py)


class _Images(gym.Env):
    """A tiny image env: frame t is filled with the value t (so stacks are easy to read)."""

    def __init__(self, shape=(32, 24, 3)):
        self.observation_space = spaces.Box(0, 255, shape, dtype=np.uint8)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def _obs(self):
        return np.full(self.observation_space.shape, self.t, dtype=np.uint8)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, False, False, {}


def test_image_layout():
    assert image_layout((84, 84)) == "hw"
    assert image_layout((4, 84, 84)) == "chw"
    assert image_layout((84, 84, 12)) == "hwc"
    assert image_layout((210, 160, 3)) == "hwc"
    assert image_layout((17,)) is None
    assert image_layout((3, 4, 5)) is None
    assert is_image_space(spaces.Box(0, 255, (4, 84, 84), np.uint8))
    assert not is_image_space(spaces.Box(0, 1, (4, 84, 84), np.float32))


@pytest.mark.parametrize("shape,expected", [((32, 24, 3), (32, 24, 12)), ((3, 32, 24), (12, 32, 24)),
                                            ((32, 24), (4, 32, 24))])
def test_frame_stack_channel_axis(shape, expected):
    env = FrameStack(_Images(shape), n_frames=4)
    assert env.observation_space.shape == expected and env.observation_space.dtype == np.uint8
    obs, _ = env.reset(seed=0)
    assert obs.shape == expected and (obs == 0).all()       # padded with the first frame
    for _ in range(2):
        obs, *_ = env.step(0)
    assert env.observation_space.contains(obs)
    axis = {"hwc": -1, "chw": 0, "hw": 0}[env.layout]
    per = 1 if len(shape) == 2 else 3
    firsts = np.take(obs, np.arange(0, 4 * per, per), axis=axis)   # first channel of each frame
    assert [int(np.unique(f)[0]) for f in np.moveaxis(firsts, axis, 0)] == [0, 0, 1, 2]   # oldest first


def test_image_preprocess_gray_groups_and_uint8():
    env = ImagePreprocess(FrameStack(_Images((40, 30, 3)), n_frames=2), width=16, height=20, grayscale=True)
    assert env.observation_space == spaces.Box(0, 255, (20, 16, 2), np.uint8)
    env.reset(seed=0)
    obs, *_ = env.step(0)
    assert obs.dtype == np.uint8 and obs.shape == (20, 16, 2)
    assert (obs[..., 0] == 0).all() and (obs[..., 1] == 1).all()
    colour = ImagePreprocess(_Images((3, 40, 30)), width=10, height=12, grayscale=False)
    assert colour.observation_space.shape == (3, 12, 10)
    assert colour.reset(seed=0)[0].shape == (3, 12, 10)


def test_image_preprocess_rgb_to_gray_weights():
    env = _Images((16, 16, 3))
    wrapped = ImagePreprocess(env, width=8, height=8, grayscale=True)
    rgb = np.zeros((16, 16, 3), np.uint8)
    rgb[..., 0] = 200                                      # pure red: 0.299 * 200 = 59.8
    assert int(np.round(wrapped.observation(rgb).mean())) == 60


def test_visual_bad_input():
    with pytest.raises(ValueError, match="image observation space"):
        ImagePreprocess(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="groups of 3"):
        ImagePreprocess(_Images((32, 32, 4)), grayscale=True)
    with pytest.raises(ValueError, match="n_frames must be an int >= 1"):
        FrameStack(_Images(), n_frames=0)
    with pytest.raises(TypeError, match="needs an ALE env"):
        AtariWrapper(_Images())
    with pytest.raises(ValueError, match="did you mean 'ALE/Breakout-v5'"):
        make_atari("ALE/Breakout-v9")


def _pair(game: str):
    """rlox's AtariWrapper and gymnasium's AtariPreprocessing + FrameStackObservation, the same
    settings (no no-ops, no life loss, no clipping, no FIRE: those draw or act differently)."""
    ours = AtariWrapper(make_atari(game, repeat_action_probability=0.0), frame_stack=4, noop_max=0,
                        terminal_on_life_loss=False, clip_reward=False, fire_reset=False)
    theirs = gym.wrappers.FrameStackObservation(
        gym.wrappers.AtariPreprocessing(gym.make(game, frameskip=1, repeat_action_probability=0.0), noop_max=0,
                                        frame_skip=4, screen_size=84, terminal_on_life_loss=False,
                                        grayscale_obs=True, scale_obs=False), 4)
    return ours, theirs


@pytest.mark.parametrize("game,steps", [("ALE/Breakout-v5", 300), ("ALE/Pong-v5", 120)])
def test_atari_wrapper_matches_gymnasium_step_by_step(game, steps):
    ours, theirs = _pair(game)
    assert ours.observation_space == theirs.observation_space
    a, _ = ours.reset(seed=3)
    b, _ = theirs.reset(seed=3)
    np.testing.assert_array_equal(a, b)
    rng = np.random.default_rng(0)
    total = 0.0
    for t in range(steps):       # Breakout's game ends at step 183 with these actions
        action = int(rng.integers(ours.action_space.n))
        a, ra, ta, tra, _ = ours.step(action)
        b, rb, tb, trb, _ = theirs.step(action)
        assert (ra, ta, tra) == (rb, tb, trb), f"step {t}"
        if ta or tra:
            # By design: when the game ends before the skip's last two frames, gymnasium pools
            # screens left from the step before; rlox shows the game's final screen.
            np.testing.assert_array_equal(a[:-1], b[:-1])
            final = np.empty_like(ours._screens[1])
            ours.ale.getScreenGrayscale(final)
            np.testing.assert_array_equal(a[-1], ours._frame(final))
            break
        np.testing.assert_array_equal(a, b, err_msg=f"frame stacks differ at step {t}")
        total += abs(ra)
    assert a.dtype == np.uint8 and a.std() > 0


def test_atari_episodic_life_clip_and_fire():
    env = AtariWrapper(make_atari("ALE/Breakout-v5", repeat_action_probability=0.0))
    obs, info = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and info["lives"] == 5
    assert env.fire_reset            # Breakout waits for FIRE
    rng = np.random.default_rng(0)
    for _ in range(2_000):
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(4)))
        assert reward in (-1.0, 0.0, 1.0) and abs(info["raw_reward"]) >= abs(reward)
        if terminated:
            break
    assert terminated and info["lives"] == 4      # a lost life ends the learner's episode ...
    _, info = env.reset()
    assert info["lives"] == 4                     # ... but not the game


class _ActionLog(gym.Wrapper):
    """Records every action that reaches ALE (one per frame)."""

    def __init__(self, env):
        super().__init__(env)
        self.actions = []

    def step(self, action):
        self.actions.append(int(action))
        return self.env.step(action)


def test_atari_fire_after_every_reset_lost_lives_included():
    """FireReset sits over EpisodicLife and MaxAndSkip (baselines'/SB3's order): a real reset is
    no-ops then FIRE and UP as skipped steps, a lost life one skipped no-op then FIRE and UP."""
    log = _ActionLog(make_atari("ALE/Breakout-v5", repeat_action_probability=0.0))
    env = AtariWrapper(log)
    env.reset(seed=0)
    noops = len(log.actions) - 8
    assert 1 <= noops <= 30 and log.actions == [0] * noops + [1] * 4 + [2] * 4
    rng = np.random.default_rng(0)
    terminated = False
    for _ in range(2_000):
        _, _, terminated, truncated, info = env.step(int(rng.integers(4)))
        if terminated:
            break
    assert terminated and info["lives"] == 4
    log.actions.clear()
    _, info = env.reset()
    assert log.actions == [0] * 4 + [1] * 4 + [2] * 4 and info["lives"] == 4
    # the same seed draws the same no-op count (from the ALE env's np_random, as SB3 does)
    log.actions.clear()
    env.reset(seed=0)
    assert log.actions == [0] * noops + [1] * 4 + [2] * 4


@pytest.mark.parametrize("game", ["ALE/Breakout-v5", "ALE/Pong-v5"])
def test_atari_wrapper_matches_sb3_step_by_step(game):
    """Every default on (no-ops, sticky actions, lost lives, FIRE, clipping): rewards,
    terminations and lives equal SB3's AtariWrapper through many resets; the frames differ only
    by the grayscale conversion (ALE's own vs OpenCV's of the RGB screen)."""
    sb3_atari = pytest.importorskip("stable_baselines3.common.atari_wrappers",
                                    reason="the SB3 comparison needs stable-baselines3 (rlox[bench])")
    ours = AtariWrapper(make_atari(game))
    theirs = sb3_atari.AtariWrapper(gym.make(game, frameskip=1))
    a, _ = ours.reset(seed=7)
    b, _ = theirs.reset(seed=7)
    rng = np.random.default_rng(0)
    resets, diffs = 0, []
    for t in range(1_500):
        diffs.append(np.abs(a[-1].astype(np.int16) - b[..., 0].astype(np.int16)).mean())
        action = int(rng.integers(ours.action_space.n))
        a, ra, ta, tra, ia = ours.step(action)
        b, rb, tb, trb, ib = theirs.step(action)
        assert (ra, ta, tra, ia["lives"]) == (rb, tb, trb, ib["lives"]), f"step {t}"
        if ta or tra:
            resets += 1
            a, _ = ours.reset()
            b, _ = theirs.reset()
    assert max(diffs) < 1.0, "the frames should differ by the grayscale rounding alone"
    if game == "ALE/Breakout-v5":
        assert resets >= 10       # many lost lives and games, each followed by FIRE


def test_atari_env_with_internal_frameskip():
    env = AtariWrapper(gym.make("ALE/Pong-v5"), frame_stack=4)      # v5 already skips 4 in ALE
    assert env.frame_skip == 1
    assert env.reset(seed=0)[0].shape == (4, 84, 84)


# ---------------------------------------------------------------------- DeepMind Control
def _render_or_skip():
    pytest.importorskip("dm_control", reason="DeepMind Control tests need dm-control (pip install 'rlox[dmc]')")
    try:
        env = DMControlWrapper("cartpole", "swingup", from_pixels=True, height=32, width=32)
        env.reset(seed=0)
    except Exception as exc:    # no EGL/OSMesa on this machine (.ci/run installs libegl1)
        pytest.skip(f"MuJoCo cannot render headless here ({type(exc).__name__}: {exc}); "
                    f"install libegl1 or libosmesa6 and set MUJOCO_GL")
    return env


def test_dmc_proprio():
    pytest.importorskip("dm_control", reason="needs dm-control (pip install 'rlox[dmc]')")
    env = DMControlWrapper(domain="cartpole", task="swingup", action_repeat=8, seed=0)
    assert env.observation_space.shape == (5,) and env.action_space.shape == (1,)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and env.observation_space.contains(obs)
    steps, total = 0, 0.0
    while True:
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        total += reward
        if terminated or truncated:
            break
    assert truncated and not terminated and steps == 125        # 1000 physics steps / action_repeat 8
    again, _ = DMControlWrapper("cartpole", "swingup").reset(seed=0)
    np.testing.assert_array_equal(again, DMControlWrapper("cartpole", "swingup").reset(seed=0)[0])


def test_dmc_through_trainer_and_gym_make():
    pytest.importorskip("dm_control", reason="needs dm-control (pip install 'rlox[dmc]')")
    from rlox import Trainer
    from rlox.wrappers.visual import DMC_ID

    made = gym.make(DMC_ID, domain="cartpole", task="balance", action_repeat=4)
    assert made.observation_space.shape == (5,)
    t = Trainer("dreamer", env=DMControlWrapper("cartpole", "swingup", action_repeat=8), seed=0,
                deter=16, hidden=16, groups=2, classes=4, batch_size=2, batch_length=8, n_bins=21,
                learning_starts=20, train_ratio=4, steps_per_iteration=50)
    metrics = t.train(total_timesteps=130)
    assert t.algo.updates > 0 and metrics["episodes"] == 1     # one 125-step episode


def test_dmc_pixels():
    env = _render_or_skip()
    obs, _ = env.reset(seed=1)
    assert obs.shape == (3, 32, 32) and obs.dtype == np.uint8 and obs.std() > 0
    obs2, *_ = env.step(np.ones(1))
    assert env.observation_space.contains(obs2)


def test_dmc_bad_task():
    pytest.importorskip("dm_control", reason="needs dm-control (pip install 'rlox[dmc]')")
    with pytest.raises(ValueError, match="did you mean 'cartpole-swingup'"):
        DMControlWrapper("cartpol", "swingup")
    with pytest.raises(ValueError, match="no task"):
        DMControlWrapper("cartpole", "jump")


def test_atari_without_ale_names_the_extra(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ale_py", None)        # as if ale-py were not installed
    with pytest.raises(ImportError, match=r"pip install 'rlox\[atari\]'"):
        make_atari("ALE/Pong-v5")
