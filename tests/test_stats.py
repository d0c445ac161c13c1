"""RunningStats / RunningStatsVec against NumPy's mean and population variance."""
import numpy as np
import pytest
from hypothesis import given, strategies as st
from hypothesis.extra import numpy as hnp

import rlox

vals = st.floats(-1e3, 1e3, allow_nan=False)


@given(st.lists(hnp.arrays(np.float64, st.integers(0, 20), elements=vals), min_size=1, max_size=5))
def test_running_stats_matches_numpy(chunks):
    s = rlox.RunningStats()
    for c in chunks:
        s.batch_update(c)
    allv = np.concatenate(chunks)
    assert s.count() == allv.size
    if allv.size:
        assert s.mean() == pytest.approx(allv.mean(), abs=1e-9)
        assert s.var() == pytest.approx(allv.var(), rel=1e-7, abs=1e-6)
        assert s.std() == pytest.approx(allv.std(), rel=1e-7, abs=1e-6)


def test_update_merge_reset_and_state():
    x = np.random.default_rng(0).standard_normal(1000) * 3 + 5
    a, b, whole = rlox.RunningStats(), rlox.RunningStats(), rlox.RunningStats()
    for v in x[:300]:
        a.update(v)
    b.batch_update(x[300:])
    a.merge(b)
    whole.batch_update(x)
    assert a.count() == 1000 and a.mean() == pytest.approx(x.mean()) and a.var() == pytest.approx(x.var())
    c = rlox.RunningStats()
    c.load_state_dict(a.state_dict())
    assert c.mean() == a.mean() and c.count() == 1000
    a.reset()
    assert a.count() == 0 and a.mean() == 0.0 and a.var() == 0.0
    with pytest.raises(ValueError, match="non-finite"):
        a.update(float("nan"))


@given(st.integers(1, 5), st.lists(st.integers(0, 12), min_size=1, max_size=4), st.data())
def test_running_stats_vec_matches_numpy(dim, sizes, data):
    s = rlox.RunningStatsVec(dim)
    chunks = [data.draw(hnp.arrays(np.float64, (n, dim), elements=vals)) for n in sizes]
    for c in chunks:
        s.update(c)
    allv = np.concatenate(chunks)
    assert s.count() == len(allv)
    if len(allv):
        np.testing.assert_allclose(s.mean(), allv.mean(0), atol=1e-9)
        np.testing.assert_allclose(s.var(), allv.var(0), rtol=1e-7, atol=1e-6)


def test_vec_normalize_merge_and_state():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((500, 3)) * [1, 10, 100] + [0, 5, -5]
    s = rlox.RunningStatsVec(3)
    s.update(x[:200])
    other = rlox.RunningStatsVec(3)
    other.update(x[200:])
    s.merge(other)
    np.testing.assert_allclose(s.mean(), x.mean(0))
    z = s.normalize(x, clip=None, eps=1e-8)
    np.testing.assert_allclose(z, (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-8), rtol=1e-9)
    z32 = s.normalize(x.astype(np.float32), clip=1.0)
    assert z32.dtype == np.float32 and z32.shape == (500, 3)
    assert np.abs(z32).max() <= 1.0
    one = s.normalize(x[0])
    assert one.shape == (3,)
    s.update(x[0])   # a single vector counts once
    assert s.count() == 501
    t = rlox.RunningStatsVec(3)
    t.load_state_dict(s.state_dict())
    np.testing.assert_array_equal(t.mean(), s.mean())
    assert t.count() == 501


@pytest.mark.parametrize("call, exc, match", [
    (lambda: rlox.RunningStatsVec(0), ValueError, "dim must be a positive int"),
    (lambda: rlox.RunningStatsVec(3).update(np.ones((2, 4))), ValueError,
     r"batch has shape \(2, 4\), expected \(3,\) or \(batch, 3\)"),
    (lambda: rlox.RunningStatsVec(2).normalize(np.ones(2), clip=-1), ValueError, "clip must be"),
    (lambda: rlox.RunningStatsVec(2).merge(rlox.RunningStatsVec(3)), ValueError, "cannot merge"),
    (lambda: rlox.RunningStatsVec(2).load_state_dict({"count": 1, "mean": np.zeros(3), "m2": np.zeros(3)}),
     ValueError, "expected dim 2"),
    (lambda: rlox.RunningStats().batch_update(np.array(["x"])), TypeError, "real numbers"),
])
def test_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
