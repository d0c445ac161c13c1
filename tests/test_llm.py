"""GRPO group advantages and token-level KL kernels against the NumPy oracles in
tests/reference/llm_ref.py and against the PyTorch one-liners TRL uses."""
import numpy as np
import pytest
import torch
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import rlox
from rlox._ext import llm as llm_ext
from tests.reference import llm_ref as ref

SCALES = ["group", "batch", "none"]


# ------------------------------------------------------------------------------- torch peers
def torch_group_advantages(rewards, G, scale="group", eps=1e-4):
    """TRL GRPOTrainer's formula: view(-1, G).mean/std, repeat_interleave, divide."""
    r = torch.from_numpy(rewards)
    mean = r.view(-1, G).mean(dim=1).repeat_interleave(G, dim=0)
    adv = r - mean
    if scale == "group":
        adv = adv / (r.view(-1, G).std(dim=1).repeat_interleave(G, dim=0) + eps)
    elif scale == "batch":
        adv = adv / (r.std().expand_as(r) + eps)
    return adv.numpy()


def torch_k3(lp, lq):
    """TRL's per-token KL: exp(ref - logp) - (ref - logp) - 1."""
    ref_lp, logp = torch.from_numpy(lq), torch.from_numpy(lp)
    return (torch.exp(ref_lp - logp) - (ref_lp - logp) - 1).numpy()


# ------------------------------------------------------------------------- group advantages
grid = st.integers(-8, 8).map(lambda k: k * 0.5)        # exact in float32: ties and equal groups


@st.composite
def reward_batches(draw, dtype=np.float64):
    G = draw(st.integers(1, 10))
    n_groups = draw(st.integers(1, 8))
    elements = grid if draw(st.booleans()) else st.floats(-50, 50, width=32)
    r = draw(hnp.arrays(dtype, n_groups * G, elements=elements))
    return r, G


@pytest.mark.parametrize("scale", SCALES)
@given(case=reward_batches())
def test_batch_group_advantages_f64_matches_oracle_and_torch(scale, case):
    r, G = case
    adv = rlox.compute_batch_group_advantages(r, group_size=G, scale=scale)
    assert adv.dtype == np.float64 and adv.shape == r.shape
    np.testing.assert_allclose(adv, ref.group_advantages(r, G, scale=scale), rtol=1e-12,
                               atol=1e-12)
    if G > 1:   # torch's std of one value is NaN; rlox (like TRL's guarded path) gives 0
        np.testing.assert_allclose(adv, torch_group_advantages(r, G, scale), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("scale", SCALES)
@given(case=reward_batches(np.float32))
def test_batch_group_advantages_f32(scale, case):
    r, G = case
    adv = rlox.compute_batch_group_advantages(r, G, scale=scale)
    assert adv.dtype == np.float32
    expected = ref.group_advantages(r, G, scale=scale)
    np.testing.assert_allclose(adv, expected, rtol=2e-6, atol=1e-5 * max(1.0, np.abs(r).max()))
    if G > 1:
        # torch's float32 one-liner (mean and std in float32) agrees up to its float32 rounding,
        # err ~ eps32 * |r| / (std + eps), except on groups whose rewards are all equal: there
        # its rounded mean differs from the rewards and the difference is divided by eps
        # (e.g. seven rewards of 1.9710976 give -0.00119 each); rlox gives exactly 0
        groups = r.reshape(-1, G).astype(np.float64)
        equal = np.repeat((groups == groups[:, :1]).all(1), G)
        denom = groups.std(1, ddof=1) + 1e-4 if scale == "group" else np.full(len(groups), 1.0)
        if scale == "batch":
            denom[:] = r.astype(np.float64).std(ddof=1) + 1e-4
        err = np.repeat((1e-6 * np.abs(groups).max(1) + 1e-44) / denom, G)   # + denormal steps
        peer = torch_group_advantages(r, G, scale)
        assert np.all(np.abs(adv - peer)[~equal] <= 1e-4 * np.abs(peer[~equal]) + err[~equal])
        assert np.all(adv[equal] == 0)


def test_group_advantages_known_values():
    r = np.array([1.0, 0.0, 0.0, 1.0])
    std = np.std(r, ddof=1)                       # 0.5773..., TRL's torch.std
    np.testing.assert_allclose(rlox.compute_group_advantages(r), (r - 0.5) / (std + 1e-4))
    np.testing.assert_allclose(rlox.compute_group_advantages(r, scale="none"), r - 0.5)
    np.testing.assert_allclose(rlox.compute_group_advantages(r, eps=0.0), (r - 0.5) / std)
    # all equal, and groups of one, give exact zeros
    assert np.array_equal(rlox.compute_group_advantages(np.full(8, 0.1)), np.zeros(8))
    assert np.array_equal(rlox.compute_batch_group_advantages(np.arange(5.0), 1), np.zeros(5))
    # batch scale: group means, whole-batch std
    r = np.array([0.0, 1.0, 2.0, 5.0])
    adv = rlox.compute_batch_group_advantages(r, 2, scale="batch")
    np.testing.assert_allclose(adv, np.array([-0.5, 0.5, -1.5, 1.5]) / (np.std(r, ddof=1) + 1e-4))
    # older TRL's boolean scale_rewards
    np.testing.assert_array_equal(rlox.compute_group_advantages(r, scale=False),
                                  rlox.compute_group_advantages(r, scale="none"))
    np.testing.assert_array_equal(rlox.compute_group_advantages(r, scale=True),
                                  rlox.compute_group_advantages(r))


def test_group_advantages_input_forms():
    assert rlox.compute_group_advantages([]).shape == (0,)
    assert rlox.compute_batch_group_advantages(np.zeros(0), 4).shape == (0,)
    # lists and ints become float64; torch tensors are accepted; strided input is copied
    np.testing.assert_allclose(rlox.compute_group_advantages([0, 1]),
                               rlox.compute_group_advantages(np.array([0.0, 1.0])))
    t = torch.tensor([0.0, 1.0, 3.0], dtype=torch.float64)
    np.testing.assert_allclose(rlox.compute_group_advantages(t),
                               rlox.compute_group_advantages(t.numpy()))
    x = np.arange(16.0)
    np.testing.assert_allclose(rlox.compute_batch_group_advantages(x[::2], 4),
                               rlox.compute_batch_group_advantages(x[::2].copy(), 4))


def test_group_advantages_nan_propagates_to_its_group_only():
    r = np.array([1.0, np.nan, 1.0, 0.0, 1.0, 2.0])
    adv = rlox.compute_batch_group_advantages(r, 3)
    assert np.isnan(adv[:3]).all()
    np.testing.assert_allclose(adv[3:], ref.group_advantages(r[3:], 3))


@pytest.mark.parametrize("scale", SCALES)
def test_group_advantages_threads_identical(n_threads, scale):
    r = np.random.default_rng(1).standard_normal(8192 * 10)   # above the parallel threshold
    adv = rlox.compute_batch_group_advantages(r, 10, scale=scale)
    rlox.set_num_threads(1)
    assert np.array_equal(adv, rlox.compute_batch_group_advantages(r, 10, scale=scale))
    np.testing.assert_allclose(adv, ref.group_advantages(r, 10, scale=scale), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(group_size=0), ValueError, "group_size must be >= 1, got 0"),
    (dict(group_size=-2), ValueError, "group_size must be >= 1"),
    (dict(group_size=5), ValueError, "group_size=5 does not divide"),
    (dict(group_size=2.0), TypeError, "group_size must be an int"),
    (dict(group_size=True), TypeError, "group_size must be an int"),
    (dict(group_size=4, scale="std"), ValueError, "scale must be 'group', 'batch' or 'none'"),
    (dict(group_size=4, scale=None), ValueError, "scale must be"),
    (dict(group_size=4, eps=-1.0), ValueError, "eps must be a finite number >= 0"),
    (dict(group_size=4, eps=float("nan")), ValueError, "eps must be"),
])
def test_group_advantages_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        rlox.compute_batch_group_advantages(np.zeros(8), **kwargs)


def test_group_advantages_bad_rewards():
    with pytest.raises(ValueError, match=r"rewards must be 1-D .* shape \(2, 4\)"):
        rlox.compute_batch_group_advantages(np.zeros((2, 4)), 4)
    with pytest.raises(TypeError, match="rewards must hold real numbers"):
        rlox.compute_group_advantages(np.array(["a", "b"]))
    with pytest.raises(TypeError, match="rewards must hold real numbers"):
        rlox.compute_group_advantages(np.zeros(3, dtype=complex))


# ------------------------------------------------------------------------------ token KL
KL = {  # estimator -> (single f64, single f32, batch f64, batch f32)
    "k1": (rlox.compute_token_kl, rlox.compute_token_kl_f32,
           rlox.compute_batch_token_kl, rlox.compute_batch_token_kl_f32),
    "k2": (rlox.compute_token_kl_squared, rlox.compute_token_kl_squared_f32,
           rlox.compute_batch_token_kl_squared, rlox.compute_batch_token_kl_squared_f32),
    "k3": (rlox.compute_token_kl_schulman, rlox.compute_token_kl_schulman_f32,
           rlox.compute_batch_token_kl_schulman, rlox.compute_batch_token_kl_schulman_f32),
}
logprobs = st.floats(-25, 0, width=32)


@st.composite
def kl_batches(draw):
    B = draw(st.integers(1, 5))
    T = draw(st.integers(1, 70))          # crosses the 16-token lanes of the float32 kernel
    lp = draw(hnp.arrays(np.float32, B * T, elements=logprobs))
    if draw(st.booleans()):               # near policies: tiny differences
        lq = lp + draw(hnp.arrays(np.float32, B * T, elements=st.floats(-2**-10, 2**-10, width=32)))
    else:
        lq = draw(hnp.arrays(np.float32, B * T, elements=logprobs))
    mask = draw(hnp.arrays(np.bool_, B * T))
    return lp, lq.astype(np.float32), mask, B, T


@pytest.fixture(scope="module", params=["avx2", "portable"])
def kl_code(request):
    """Run a float32 KL test on the kernels' AVX2 code and again on their portable code.
    (Module scope: hypothesis does not allow function-scoped fixtures in @given tests.)"""
    if request.param == "avx2" and not llm_ext._set_kl_simd(True):
        pytest.skip("this CPU has no AVX2+FMA, so only the portable code runs")
    llm_ext._set_kl_simd(request.param == "avx2")
    yield request.param
    llm_ext._set_kl_simd(True)


def _f32_error(lp, lq, est, axis=None):
    """Error bound of the float32 kernels per token (summed over ``axis`` unless None): half an
    ulp of d = lp - lq rounded to float32, times the estimator's slope, plus 10 ulp of the term
    (its own rounding and the float32 lane sums it goes through), plus float32's underflow."""
    d = lp.astype(np.float64) - lq
    slope = {"k1": 1.0, "k2": np.abs(d), "k3": np.abs(np.expm1(-d))}[est]
    err = 1.2e-6 * np.abs(ref.token_kl(lp, lq, est)) + 6e-8 * np.abs(d) * slope + 1e-37
    return err if axis is None else err.sum(axis=axis)


@pytest.mark.parametrize("est", ["k1", "k2", "k3"])
@given(case=kl_batches())
def test_batch_kl_matches_oracle_and_torch(est, case, kl_code):
    lp, lq, mask, B, T = case
    _, _, batch64, batch32 = KL[est]
    per_tok = ref.token_kl(lp, lq, est).reshape(B, T)
    m = mask.reshape(B, T)
    tol = _f32_error(lp, lq, est, axis=None).sum() + 1e-30
    for reduction in ("sum", "mean"):
        for kw, weights in [({}, np.ones((B, T))), ({"mask": mask}, m)]:
            sums = (per_tok * weights).sum(1)
            counts = weights.sum(1)
            want = sums if reduction == "sum" else np.where(counts > 0, sums / np.maximum(counts, 1), 0)
            got64 = batch64(lp.astype(np.float64), lq.astype(np.float64), seq_len=T,
                            reduction=reduction, **kw)
            got32 = batch32(lp, lq, seq_len=T, reduction=reduction, **kw)
            assert got64.dtype == np.float64 and got32.dtype == np.float32 and got32.shape == (B,)
            np.testing.assert_allclose(got64, want, rtol=1e-12, atol=1e-9 * (1 + tol))
            np.testing.assert_allclose(got32, want, rtol=2e-6, atol=tol)
    if est == "k3":
        # TRL: (per_token_kl * mask).sum(-1), with torch in float64 and in float32; torch's
        # float32 one-liner rounds each of exp(x), x and 1 (it cancels where rlox does not)
        tm = torch.from_numpy(m.astype(np.float64))
        d = lp.astype(np.float64) - lq
        torch_err = 2.4e-7 * (np.exp(-d) + np.abs(d) + 1).sum() + tol
        for dt, atol in ((np.float64, 1e-9 * (1 + tol)), (np.float32, torch_err)):
            k = torch.from_numpy(torch_k3(lp.astype(dt), lq.astype(dt)).reshape(B, T)).double()
            want = (k * tm).sum(-1).numpy()
            got = batch32(lp, lq, seq_len=T, mask=mask)
            np.testing.assert_allclose(got, want, rtol=2e-5, atol=atol)


@pytest.mark.parametrize("est", ["k1", "k2", "k3"])
@given(case=kl_batches())
def test_single_kl_matches_batch_of_one(est, case, kl_code):
    lp, lq, mask, B, T = case
    single64, single32, batch64, batch32 = KL[est]
    s64 = single64(lp.astype(np.float64)[:T], lq.astype(np.float64)[:T])
    assert isinstance(s64, float)
    assert s64 == batch64(lp.astype(np.float64)[:T], lq.astype(np.float64)[:T], seq_len=T)[0]
    s32 = single32(lp[:T], lq[:T], mask=mask[:T], reduction="mean")
    assert np.float32(s32) == batch32(lp[:T], lq[:T], seq_len=T, mask=mask[:T], reduction="mean")[0]


def test_kl_long_rows_and_chunks(kl_code):
    """Rows longer than the float32 kernel's 1024-token chunks, with masks and tails."""
    rng = np.random.default_rng(3)
    B, T = 3, 3000
    lp = (rng.standard_normal(B * T) * 0.5 - 3).astype(np.float32)
    lq = (lp + rng.standard_normal(B * T) * 0.2).astype(np.float32)
    mask = rng.random(B * T) < 0.7
    for est, (_, _, batch64, batch32) in KL.items():
        want = (ref.token_kl(lp, lq, est) * mask).reshape(B, T).sum(1)
        np.testing.assert_allclose(batch32(lp, lq, seq_len=T, mask=mask), want, rtol=1e-6)
        np.testing.assert_allclose(batch64(lp, lq, seq_len=T, mask=mask), want, rtol=1e-12)


@pytest.mark.parametrize("est", ["k1", "k2", "k3"])
def test_kl_threads_identical(n_threads, est, kl_code):
    rng = np.random.default_rng(4)
    B, T = 24, 2048                               # above the parallel threshold
    lp = rng.standard_normal(B * T).astype(np.float32)
    lq = rng.standard_normal(B * T).astype(np.float32)
    mask = rng.random(B * T) < 0.5
    _, _, batch64, batch32 = KL[est]
    got = [batch32(lp, lq, seq_len=T), batch32(lp, lq, seq_len=T, mask=mask),
           batch64(lp, lq, seq_len=T, mask=mask)]
    rlox.set_num_threads(1)
    want = [batch32(lp, lq, seq_len=T), batch32(lp, lq, seq_len=T, mask=mask),
            batch64(lp, lq, seq_len=T, mask=mask)]
    for g, w in zip(got, want):
        assert np.array_equal(g, w)


def test_kl_lengths_equal_a_prefix_mask(kl_code):
    rng = np.random.default_rng(5)
    B, T = 6, 50
    lp, lq = rng.standard_normal((2, B, T)).astype(np.float32)
    lengths = np.array([0, 1, 16, 17, 49, 50])
    mask = np.arange(T)[None, :] < lengths[:, None]
    for est, (_, _, batch64, batch32) in KL.items():
        for fn in (batch64, batch32):
            for red in ("sum", "mean"):
                a = fn(lp, lq, lengths=lengths, reduction=red)
                b = fn(lp, lq, mask=mask, reduction=red)
                np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    # a flat input takes a [B, T] mask too
    np.testing.assert_array_equal(
        rlox.compute_batch_token_kl_schulman_f32(lp.reshape(-1), lq.reshape(-1), seq_len=T, mask=mask),
        rlox.compute_batch_token_kl_schulman_f32(lp, lq, mask=mask))


def test_kl_masked_tokens_are_never_read(kl_code):
    lp = np.array([-1.0, np.nan, -2.0, np.inf] * 5, dtype=np.float32)
    lq = np.array([-1.5, -1.0, np.nan, -1.0] * 5, dtype=np.float32)
    mask = np.array([1, 0, 0, 0] * 5, dtype=np.uint8)
    want = 5 * ref.token_kl(np.array([-1.0]), np.array([-1.5]), "k3")[0]
    for fn in (rlox.compute_batch_token_kl_schulman_f32, rlox.compute_batch_token_kl_schulman):
        np.testing.assert_allclose(fn(lp, lq, seq_len=20, mask=mask), [want], rtol=1e-6)
    per_tok = rlox.compute_token_kl_per_token(lp, lq, mask=mask, seq_len=20)
    assert np.isfinite(per_tok).all() and (per_tok[0, mask == 0] == 0).all()


def test_k3_extremes_float32(kl_code):
    """The float32 exp against float64 across the range, and non-finite inputs."""
    x = np.concatenate([np.linspace(-80, 80, 4001), np.geomspace(1e-12, 1, 200),
                        -np.geomspace(1e-12, 1, 200), [0.0, 0.5, -0.5, 1.0, -1.0, 88.0]])
    x = x.astype(np.float32)
    lp = np.zeros_like(x)                       # x = lq - lp
    got = rlox.compute_token_kl_per_token(lp, x, estimator="k3")
    np.testing.assert_allclose(got, ref.k3(x), rtol=5e-7, atol=0)
    # small differences keep their relative accuracy (torch's float32 one-liner gives 0 here)
    small = np.full(1, 1e-5, dtype=np.float32)
    got = rlox.compute_token_kl_per_token(np.zeros(1, np.float32), small)
    np.testing.assert_allclose(got, ref.k3(small), rtol=1e-6)
    # overflow, infinities, NaN
    lq = np.array([1000.0, -np.inf, np.nan, 0.0, 0.0], dtype=np.float32)
    lp = np.array([0.0, 0.0, 0.0, -np.inf, np.nan], dtype=np.float32)
    for fn in (lambda a, b: rlox.compute_token_kl_per_token(a, b),
               lambda a, b: rlox.compute_token_kl_per_token(a.astype(np.float64), b.astype(np.float64))):
        k = fn(lp, lq)
        assert k[0] == np.inf and k[1] == np.inf and np.isnan(k[2]) and k[3] == np.inf
        assert np.isnan(k[4])


@given(case=kl_batches())
def test_per_token_matches_oracle_and_torch(case, kl_code):
    lp, lq, mask, B, T = case
    for est in ("k1", "k2", "k3"):
        want = ref.token_kl(lp, lq, est).reshape(B, T) * mask.reshape(B, T)
        got32 = rlox.compute_token_kl_per_token(lp.reshape(B, T), lq.reshape(B, T), est,
                                                mask=mask.reshape(B, T))
        got64 = rlox.compute_token_kl_per_token(lp.astype(np.float64), lq.astype(np.float64),
                                                est, mask=mask, seq_len=T)
        assert got32.dtype == np.float32 and got32.shape == (B, T) and got64.shape == (B, T)
        np.testing.assert_allclose(got64, want, rtol=1e-12, atol=1e-300)
        err = _f32_error(lp, lq, est).reshape(B, T) * mask.reshape(B, T)
        assert np.all(np.abs(got32 - want) <= err), (est, got32, want)
    k_torch = torch_k3(lp.astype(np.float64), lq.astype(np.float64)).reshape(B, T)
    np.testing.assert_allclose(rlox.compute_token_kl_per_token(lp.astype(np.float64),
                                                               lq.astype(np.float64), seq_len=T),
                               k_torch, rtol=1e-9, atol=1e-12)


def test_per_token_large_is_parallel_and_identical(n_threads, kl_code):
    rng = np.random.default_rng(6)
    lp, lq = rng.standard_normal((2, 16, 4096)).astype(np.float32)
    got = rlox.compute_token_kl_per_token(lp, lq)
    rlox.set_num_threads(1)
    assert np.array_equal(got, rlox.compute_token_kl_per_token(lp, lq))
    np.testing.assert_allclose(got, ref.token_kl(lp, lq, "k3"), rtol=1e-6)


def test_kl_avx2_and_portable_code_agree():
    """The AVX2 kernels and the portable ones: every token within 3e-7 relative (they differ only
    by FMA contraction), row sums likewise, for every estimator, with and without a mask, on row
    lengths around the 16-token blocks and the 1024-token chunks."""
    if not llm_ext._set_kl_simd(True):
        pytest.skip("this CPU has no AVX2+FMA")
    rng = np.random.default_rng(11)
    try:
        for T in (1, 7, 8, 15, 16, 17, 1023, 1024, 1025, 2061):
            lp = (rng.standard_normal((3, T)) * 2 - 3).astype(np.float32)
            lq = (lp + rng.standard_normal((3, T)) * np.array([[1e-4], [0.3], [3.0]])).astype(np.float32)
            mask = rng.random((3, T)) < 0.6
            got = {}
            for simd in (True, False):
                llm_ext._set_kl_simd(simd)
                got[simd] = [(rlox.compute_token_kl_per_token(lp, lq, estimator=est, mask=m),
                              KL[est][3](lp, lq, seq_len=T, mask=m))
                             for est in KL for m in (None, mask)]
            for (tok_a, row_a), (tok_b, row_b) in zip(got[True], got[False]):
                np.testing.assert_allclose(tok_a, tok_b, rtol=3e-7, atol=1e-37)
                np.testing.assert_allclose(row_a, row_b, rtol=1e-6, atol=1e-30)
    finally:
        llm_ext._set_kl_simd(True)


def test_kl_input_forms():
    rng = np.random.default_rng(7)
    lp, lq = rng.standard_normal((2, 4, 8))
    want = rlox.compute_batch_token_kl_schulman(lp, lq)          # 2-D [B, T]
    assert want.shape == (4,)
    np.testing.assert_array_equal(rlox.compute_batch_token_kl_schulman(lp.ravel(), lq.ravel(), 8), want)
    np.testing.assert_array_equal(rlox.compute_batch_token_kl_schulman(lp, lq, seq_len=8), want)
    # float32 into the float64 function converts (one copy); torch tensors are accepted
    np.testing.assert_allclose(rlox.compute_token_kl(lp[0].astype(np.float32), lq[0]),
                               rlox.compute_token_kl(lp[0].astype(np.float32).astype(np.float64), lq[0]))
    assert rlox.compute_token_kl(torch.from_numpy(lp[0]), lq[0]) == rlox.compute_token_kl(lp[0], lq[0])
    # strided views are copied, not misread
    big = np.stack([lp, lq], axis=-1)                            # [4, 8, 2]
    np.testing.assert_array_equal(rlox.compute_batch_token_kl_schulman(big[..., 0], big[..., 1]), want)
    # empty inputs
    assert rlox.compute_batch_token_kl_f32(np.zeros(0, np.float32), np.zeros(0, np.float32), 5).shape == (0,)
    np.testing.assert_array_equal(rlox.compute_batch_token_kl(np.zeros((3, 0)), np.zeros((3, 0))),
                                  np.zeros(3))
    assert rlox.compute_token_kl([], [], reduction="mean") == 0.0
    assert rlox.compute_token_kl_schulman_f32([-1.0], [-1.0]) == 0.0


def _lp(n=8):
    return np.zeros(n), np.zeros(n)


@pytest.mark.parametrize("call, exc, match", [
    (lambda: rlox.compute_token_kl(np.zeros(3), np.zeros(4)), ValueError,
     r"log_p has shape \(3,\) but log_q has shape \(4,\)"),
    (lambda: rlox.compute_token_kl(np.zeros((2, 3)), np.zeros((2, 3))), ValueError,
     "log_p must be 1-D.*compute_batch_token_kl"),
    (lambda: rlox.compute_token_kl(np.array(["a"]), np.zeros(1)), TypeError,
     "log_p must hold real numbers"),
    (lambda: rlox.compute_token_kl(*_lp(), mask=np.ones(7)), ValueError,
     r"mask has shape \(7,\), expected \(8,\)"),
    (lambda: rlox.compute_token_kl(*_lp(), mask=np.array(["x"] * 8)), TypeError,
     "mask has dtype"),
    (lambda: rlox.compute_token_kl(*_lp(), reduction="avg"), ValueError,
     "reduction must be 'sum' or 'mean', got 'avg'"),
    (lambda: rlox.compute_batch_token_kl(*_lp()), ValueError, "seq_len is required"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=3), ValueError,
     "seq_len=3 does not divide"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=0), ValueError, "seq_len must be >= 1"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=2.0), TypeError, "seq_len must be an int"),
    (lambda: rlox.compute_batch_token_kl(np.zeros((2, 4)), np.zeros((2, 4)), seq_len=2), ValueError,
     r"seq_len=2 but log_p has shape \(2, 4\)"),
    (lambda: rlox.compute_batch_token_kl(np.zeros((2, 2, 2)), np.zeros((2, 2, 2))), ValueError,
     "log_p must be flat"),
    (lambda: rlox.compute_batch_token_kl_f32(*_lp(), seq_len=4, mask=np.ones((4, 2))), ValueError,
     r"mask has shape \(4, 2\), expected \(8,\) or \(2, 4\)"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=4, mask=np.ones(8), lengths=[1, 2]),
     ValueError, "either mask or lengths"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=4, lengths=[1, 2, 3]), ValueError,
     r"lengths has shape \(3,\), expected \(2,\)"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=4, lengths=[1, 5]), ValueError,
     r"lengths must lie in \[0, seq_len=4\]"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=4, lengths=[-1, 2]), ValueError,
     "lengths must lie in"),
    (lambda: rlox.compute_batch_token_kl(*_lp(), seq_len=4, lengths=[1.0, 2.0]), TypeError,
     "lengths has dtype float64, expected an integer dtype"),
    (lambda: rlox.compute_token_kl_per_token(*_lp(), estimator="k4"), ValueError,
     "estimator must be 'k1', 'k2' or 'k3'"),
    (lambda: rlox.compute_token_kl_per_token(*_lp(), seq_len=3), ValueError,
     "seq_len=3 does not divide"),
    (lambda: rlox.compute_token_kl_per_token(np.zeros((2, 4)), np.zeros((2, 4)), seq_len=2),
     ValueError, r"seq_len=2 but log_p has shape \(2, 4\)"),
    (lambda: rlox.compute_token_kl_per_token(np.zeros((1, 2, 4)), np.zeros((1, 2, 4))), ValueError,
     "log_p must be"),
    (lambda: rlox.compute_token_kl_per_token(*_lp(), mask=np.ones(9)), ValueError,
     r"mask has shape \(9,\)"),
    (lambda: rlox.compute_token_kl(torch.zeros(3, requires_grad=True), np.zeros(3)), TypeError,
     r"log_p could not be converted.*detach\(\)"),
])
def test_kl_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
