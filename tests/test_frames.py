"""The frame kernel (rlox._ext.frames): max-pool + RGB2GRAY + INTER_AREA downscale against
OpenCV (bit for bit where ``area_kernel_applies``), against the NumPy oracle in
tests/reference/frames.py (within one level), on random and real ALE frames, one frame and N
frames at any thread count, and its argument checks."""
import platform

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from rlox._ext import frames as F
from rlox.wrappers.visual import area_kernel_applies
from tests.reference import frames as ref

cv2 = pytest.importorskip("cv2", reason="the comparison with OpenCV needs opencv-python-headless")

# Bit-exact needs float32 sums without fused multiply-add, as x86-64 builds run OpenCV and the
# kernel (built with -ffp-contract=off); elsewhere OpenCV itself may fuse, so allow one level.
EXACT = platform.machine() in ("x86_64", "AMD64")


def _cv2_pipeline(frame, prev, h, w, grayscale=True):
    """SB3's MaxAndSkip + WarpFrame: np.maximum, cv2.cvtColor(RGB2GRAY), cv2.resize(INTER_AREA)."""
    x = frame if prev is None else np.maximum(frame, prev)
    if grayscale and x.ndim == 3 and x.shape[-1] == 3:
        x = cv2.cvtColor(x, cv2.COLOR_RGB2GRAY)
    return cv2.resize(x, (w, h), interpolation=cv2.INTER_AREA).reshape(
        (h, w) if x.ndim == 2 else (h, w, x.shape[-1]))


def _assert_matches_cv2(got, want, what):
    diff = np.abs(got.astype(np.int16) - want.astype(np.int16))
    if EXACT:
        assert diff.max() == 0, f"{what}: {int((diff > 0).sum())} pixels differ from OpenCV (max {diff.max()})"
    else:
        assert diff.max() <= 1, what


def _frame(rng, shape, coarse=False):
    x = rng.integers(0, 256, shape, dtype=np.uint8)
    return (x // 64 * 64).astype(np.uint8) if coarse else x      # coarse: many equal sums (ties)


SIZES = [(210, 160, 84, 84), (250, 160, 84, 84), (210, 160, 84, 80), (100, 90, 37, 41), (64, 64, 32, 30),
         (50, 50, 50, 49), (17, 13, 2, 3), (9, 200, 8, 3)]


@pytest.mark.parametrize("H,W,h,w", SIZES)
@pytest.mark.parametrize("channels", [None, 3, 4])
@pytest.mark.parametrize("pool", [False, True])
def test_matches_cv2_and_oracle(H, W, h, w, channels, pool):
    assert area_kernel_applies(H, W, h, w)
    rng = np.random.default_rng(H * W + h)
    shape = (H, W) if channels is None else (H, W, channels)
    for trial in range(3):
        a, b = _frame(rng, shape, coarse=trial == 1), _frame(rng, shape)
        prev = b if pool else None
        for grayscale in ([True, False] if channels == 3 else [False]):
            out_shape = (h, w) if channels is None or grayscale else (h, w, channels)
            out = np.full(out_shape, 7, np.uint8)
            assert F.preprocess_frame(a, prev, out, grayscale=grayscale) is out
            _assert_matches_cv2(out, _cv2_pipeline(a, prev, h, w, grayscale), f"{shape}->{out_shape}")
            oracle = ref.preprocess(a, prev, h, w, grayscale)
            diff = np.abs(out.astype(np.int16) - oracle)
            assert diff.max() <= 1 and (diff > 0).mean() < 0.02


@given(H=st.integers(2, 64), W=st.integers(2, 64), fh=st.floats(0.05, 1.0), fw=st.floats(0.05, 1.0),
       seed=st.integers(0, 2**16), rgb=st.booleans())
def test_random_sizes_match_cv2(H, W, fh, fw, seed, rgb):
    h, w = max(1, int(H * fh)), max(1, int(W * fw))
    rng = np.random.default_rng(seed)
    a = _frame(rng, (H, W, 3) if rgb else (H, W), coarse=seed % 2 == 0)
    b = _frame(rng, a.shape)
    out = np.empty((h, w), np.uint8)
    assume(area_kernel_applies(H, W, h, w))     # not integer factors (OpenCV's resizeAreaFast)
    F.preprocess_frame(a, b, out)
    _assert_matches_cv2(out, _cv2_pipeline(a, b, h, w), f"{a.shape}->{(h, w)}")


@pytest.mark.parametrize("groups", [2, 4])
def test_stacked_rgb_frames_give_one_gray_channel_each(groups, n_threads):
    """[H, W, 3G] (G RGB frames on the channel axis) -> [h, w, G]: gray per triple, then resize."""
    rng = np.random.default_rng(groups)
    a, b = _frame(rng, (210, 160, 3 * groups)), _frame(rng, (210, 160, 3 * groups))
    out = np.empty((84, 84, groups), np.uint8)
    F.preprocess_frame(a, b, out)
    for g in range(groups):
        _assert_matches_cv2(out[..., g], _cv2_pipeline(np.ascontiguousarray(a[..., 3 * g:3 * g + 3]),
                                                       np.ascontiguousarray(b[..., 3 * g:3 * g + 3]), 84, 84),
                            f"group {g}")
    batch = np.empty((2, 84, 84, groups), np.uint8)
    F.preprocess_frames(np.stack([a, b]), None, batch)
    np.testing.assert_array_equal(batch[0], F.preprocess_frame(a, None, np.empty_like(out)))
    with pytest.raises(ValueError, match=rf"expected \(h, w, {groups}\)"):
        F.preprocess_frame(a, b, np.empty((84, 84), np.uint8))


def test_constant_frames_stay_constant():
    for v in (0, 1, 128, 254, 255):
        out = np.empty((84, 84), np.uint8)
        F.preprocess_frame(np.full((210, 160, 3), v, np.uint8), None, out)
        assert (out == v).all()


def test_area_kernel_applies():
    assert area_kernel_applies(210, 160, 84, 84)
    assert area_kernel_applies(210, 160, 84, 160)       # one axis unchanged, the other non-integer
    assert not area_kernel_applies(210, 160, 105, 80)   # 2x both: OpenCV's resizeAreaFast
    assert not area_kernel_applies(64, 64, 16, 16)
    assert not area_kernel_applies(210, 160, 84, 200)   # upscaling one axis
    assert not area_kernel_applies(84, 84, 84, 84)      # same size (an integer factor of 1)


def test_batched_equals_one_by_one_any_thread_count(n_threads):
    rng = np.random.default_rng(5)
    frames, prev = _frame(rng, (8, 210, 160, 3)), _frame(rng, (8, 210, 160, 3))
    out = np.empty((8, 84, 84), np.uint8)
    assert F.preprocess_frames(frames, prev, out) is out
    for i in range(8):
        one = np.empty((84, 84), np.uint8)
        np.testing.assert_array_equal(out[i], F.preprocess_frame(frames[i], prev[i], one))
        _assert_matches_cv2(out[i], _cv2_pipeline(frames[i], prev[i], 84, 84), f"frame {i}")
    gray = np.empty((8, 84, 84), np.uint8)
    F.preprocess_frames(frames[..., 0].copy(), None, gray)
    for i in range(8):
        _assert_matches_cv2(gray[i], _cv2_pipeline(frames[i, ..., 0], None, 84, 84), f"gray frame {i}")
    assert F.preprocess_frames(frames[:0], None, out[:0]).shape == (0, 84, 84)


def test_writes_into_a_frame_stack_slot_only():
    rng = np.random.default_rng(2)
    stack = np.full((4, 84, 84), 9, np.uint8)
    a, b = _frame(rng, (210, 160)), _frame(rng, (210, 160))
    F.preprocess_frame(a, b, stack[2])
    assert (stack[[0, 1, 3]] == 9).all()
    _assert_matches_cv2(stack[2], _cv2_pipeline(a, b, 84, 84), "slot")


def test_real_ale_frames_match_sb3_pipeline():
    """Breakout screens (RGB, as SB3's WarpFrame gets them, and ALE's gray): kernel == OpenCV."""
    gym = pytest.importorskip("gymnasium")
    ale_py = pytest.importorskip("ale_py", reason="Atari tests need ale-py (pip install 'rlox[atari]')")
    gym.register_envs(ale_py)
    env = gym.make("ALE/Breakout-v5", frameskip=1, repeat_action_probability=0.0)
    env.reset(seed=0)
    ale = env.unwrapped.ale
    rng = np.random.default_rng(0)
    rgb, gray = [], []
    for t in range(240):
        _, _, term, trunc, _ = env.step(int(rng.integers(4)) if t % 40 else 1)
        if term or trunc:
            env.reset()
        rgb.append(ale.getScreenRGB())
        g = np.empty(ale.getScreenDims(), np.uint8)
        ale.getScreenGrayscale(g)
        gray.append(g)
    env.close()
    out = np.empty((84, 84), np.uint8)
    for t in range(1, len(rgb), 3):
        F.preprocess_frame(rgb[t], rgb[t - 1], out)
        _assert_matches_cv2(out, _cv2_pipeline(rgb[t], rgb[t - 1], 84, 84), f"RGB step {t}")
        F.preprocess_frame(gray[t], gray[t - 1], out)
        _assert_matches_cv2(out, _cv2_pipeline(gray[t], gray[t - 1], 84, 84), f"gray step {t}")
    assert np.asarray(rgb).std() > 0


def test_bad_input_is_refused_with_a_clear_message():
    a = np.zeros((210, 160, 3), np.uint8)
    out = np.empty((84, 84), np.uint8)
    with pytest.raises(TypeError, match="frame has dtype float32, expected uint8"):
        F.preprocess_frame(a.astype(np.float32), None, out)
    with pytest.raises(TypeError, match="out has dtype float32"):
        F.preprocess_frame(a, None, out.astype(np.float32))
    with pytest.raises(ValueError, match=r"out has shape \(84, 84, 3\), expected \(h, w\)"):
        F.preprocess_frame(a, None, np.empty((84, 84, 3), np.uint8))
    with pytest.raises(ValueError, match=r"out has shape \(84, 84\), expected \(h, w, 3\)"):
        F.preprocess_frame(a, None, out, grayscale=False)
    with pytest.raises(ValueError, match="only downscales"):
        F.preprocess_frame(a, None, np.empty((300, 84), np.uint8))
    with pytest.raises(ValueError, match="C-contiguous"):
        F.preprocess_frame(a, None, np.empty((84, 168), np.uint8)[:, ::2])
    with pytest.raises(ValueError, match=r"prev has shape \(210, 160\), expected frame's shape"):
        F.preprocess_frame(a, a[..., 0], out)
    with pytest.raises(ValueError, match="4 channels, grayscale=True needs RGB channels in groups of 3"):
        F.preprocess_frame(np.zeros((210, 160, 4), np.uint8), None, out)
    with pytest.raises(ValueError, match="expected one frame"):
        F.preprocess_frame(np.zeros(10, np.uint8), None, out)
    with pytest.raises(ValueError, match="shares memory with an input"):
        flat = np.zeros(210 * 160, np.uint8)
        F.preprocess_frame(flat.reshape(210, 160), None, flat[:84 * 84].reshape(84, 84))
    with pytest.raises(TypeError, match="out must be a NumPy array"):
        F.preprocess_frame(a, None, [[0] * 84] * 84)
    frames = np.zeros((8, 210, 160), np.uint8)
    with pytest.raises(ValueError, match=r"out has shape \(4, 84, 84\), expected 8 frames first"):
        F.preprocess_frames(frames, None, np.empty((4, 84, 84), np.uint8))
    with pytest.raises(ValueError, match=r"frames has shape \(210, 160\), expected \[N, H, W\]"):
        F.preprocess_frames(frames[0], None, out)
    with pytest.raises(ValueError, match=r"out\[i\] is 300x84"):
        F.preprocess_frames(frames, None, np.empty((8, 300, 84), np.uint8))


def test_wrappers_kernel_path_equals_opencv():
    """ImagePreprocess and resize_frames take the kernel for 210x160 -> 84x84: same as cv2."""
    import gymnasium as gym

    from rlox.wrappers.visual import ImagePreprocess, resize_frames

    rng = np.random.default_rng(3)
    stack = _frame(rng, (210, 160, 12))             # 4 RGB frames, channel-last
    env = gym.make("CartPole-v1")                   # only its spaces matter below
    env.observation_space = gym.spaces.Box(0, 255, (210, 160, 12), np.uint8)
    gray = ImagePreprocess(env, 84, 84, grayscale=True).observation(stack)
    for g in range(4):
        _assert_matches_cv2(gray[..., g], _cv2_pipeline(stack[..., 3 * g:3 * g + 3], None, 84, 84), f"group {g}")
    env.observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)    # one RGB frame
    one = ImagePreprocess(env, 84, 84, grayscale=True).observation(stack[..., :3])
    assert one.shape == (84, 84, 1)
    _assert_matches_cv2(one[..., 0], _cv2_pipeline(np.ascontiguousarray(stack[..., :3]), None, 84, 84), "one")
    env.observation_space = gym.spaces.Box(0, 255, (12, 210, 160), np.uint8)   # channel-first
    chw = ImagePreprocess(env, 84, 84, grayscale=True).observation(np.ascontiguousarray(np.moveaxis(stack, -1, 0)))
    np.testing.assert_array_equal(chw, np.moveaxis(gray, -1, 0))
    colour = resize_frames(stack[None], 84, 84)[0]       # cv2.resize itself takes at most 4 channels
    for g in range(4):
        want = cv2.resize(np.ascontiguousarray(stack[..., 3 * g:3 * g + 3]), (84, 84), interpolation=cv2.INTER_AREA)
        _assert_matches_cv2(colour[..., 3 * g:3 * g + 3], want, f"channels {3 * g}..{3 * g + 2}")
    half = resize_frames(stack[None, ..., :3], 105, 80)[0]       # 2x: the cv2 path
    np.testing.assert_array_equal(half, cv2.resize(stack[..., :3], (80, 105), interpolation=cv2.INTER_AREA))
