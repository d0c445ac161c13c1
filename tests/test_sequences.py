"""DPOPair, VarLenStore and pack_sequences, against plain-Python oracles (tests/reference/llm_ref.py)."""
import pickle

import numpy as np
import pytest
from hypothesis import given, strategies as st

import rlox
from tests.reference import llm_ref as ref

token_lists = st.lists(st.integers(0, 2**32 - 1), max_size=12)


def u32(*xs):
    return np.array(xs, dtype=np.uint32)


# ---------------------------------------------------------------------------------- DPOPair
def test_dpo_pair_fields():
    pair = rlox.DPOPair(prompt_tokens=u32(1, 2, 3), chosen_tokens=u32(4, 5),
                        rejected_tokens=u32(6, 7, 8))
    assert (pair.prompt_length, pair.chosen_length, pair.rejected_length) == (3, 2, 3)
    assert pair.completion_start == 3
    np.testing.assert_array_equal(pair.chosen_input_ids, [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(pair.rejected_input_ids, [1, 2, 3, 6, 7, 8])
    for a in (pair.prompt_tokens, pair.chosen_tokens, pair.rejected_tokens,
              pair.chosen_input_ids, pair.rejected_input_ids):
        assert a.dtype == np.uint32 and not a.flags.writeable
    np.testing.assert_array_equal(pair.chosen_input_ids[pair.completion_start:], pair.chosen_tokens)
    assert "prompt_length=3" in repr(pair)


@given(token_lists, token_lists, token_lists)
def test_dpo_pair_concatenations(p, c, r):
    pair = rlox.DPOPair(p, c, r)                  # lists of ints are accepted
    assert pair.chosen_input_ids.tolist() == p + c
    assert pair.rejected_input_ids.tolist() == p + r
    assert pair.completion_start == len(p)
    back = pickle.loads(pickle.dumps(pair))
    assert back.rejected_input_ids.tolist() == p + r and back.chosen_tokens.tolist() == c


def test_dpo_pair_copies_its_inputs():
    prompt = u32(1, 2)
    pair = rlox.DPOPair(prompt, u32(3), u32(4))
    prompt[0] = 99
    assert pair.prompt_tokens[0] == 1 and pair.chosen_input_ids[0] == 1
    with pytest.raises(ValueError):
        pair.chosen_tokens[0] = 7
    with pytest.raises(AttributeError):
        pair.prompt_tokens = u32(5)


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(chosen_tokens=np.array([1.0, 2.0])), TypeError, "chosen_tokens must hold integer token ids"),
    (dict(rejected_tokens=np.array([True])), TypeError, "rejected_tokens must hold integer"),
    (dict(prompt_tokens=np.array([1, -2])), ValueError, r"prompt_tokens holds token ids outside"),
    (dict(chosen_tokens=np.array([2**32])), ValueError, "chosen_tokens holds token ids outside"),
    (dict(prompt_tokens=np.zeros((2, 2), np.uint32)), ValueError, r"prompt_tokens must be 1-D"),
    (dict(rejected_tokens=["a"]), TypeError, "rejected_tokens must hold integer"),
])
def test_dpo_pair_bad_tokens(kwargs, exc, match):
    args = dict(prompt_tokens=u32(1), chosen_tokens=u32(2), rejected_tokens=u32(3))
    args.update(kwargs)
    with pytest.raises(exc, match=match):
        rlox.DPOPair(**args)


# ------------------------------------------------------------------------------ VarLenStore
@given(st.lists(token_lists, max_size=40))
def test_varlen_store_matches_list(seqs):
    store = rlox.VarLenStore()
    for i, s in enumerate(seqs):
        assert store.push(np.array(s, dtype=np.uint64)) == i
    assert len(store) == store.len() == len(seqs)
    assert store.total_tokens() == sum(map(len, seqs))
    assert store.offsets.tolist() == np.cumsum([0] + [len(s) for s in seqs]).tolist()
    assert store.values.tolist() == [t for s in seqs for t in s]
    for i, s in enumerate(seqs):
        assert store.get(i).tolist() == s and store[i - len(seqs)].tolist() == s
    assert [x.tolist() for x in store] == seqs


def test_varlen_store_guide_example_and_views():
    store = rlox.VarLenStore()
    store.push(u32(1, 2, 3))
    store.push(u32(4, 5))
    seq = store.get(0)
    assert seq.dtype == np.uint32 and seq.tolist() == [1, 2, 3]
    assert store.offsets.dtype == np.int64 and store.values.dtype == np.uint32
    for view in (seq, store.offsets, store.values):
        with pytest.raises(ValueError):
            view[0] = 9
    for _ in range(3000):                    # grow both buffers several times
        store.push(u32(7, 7, 7))
    assert seq.tolist() == [1, 2, 3] and store.get(1).tolist() == [4, 5]
    assert "len=3002" in repr(store)


def test_varlen_store_push_is_amortised():
    store = rlox.VarLenStore()
    capacities = {store.capacity}
    for _ in range(20_000):
        store.push(u32(1, 2, 3))
        capacities.add(store.capacity)
    # doubling: a handful of reallocations for 60k tokens, never more than twice what is used
    assert len(capacities) <= 8
    assert store.total_tokens() == 60_000 and store.capacity < 2 * 60_000
    big = np.arange(10_000, dtype=np.uint32)
    store.push(big)                           # one push larger than the doubled capacity
    np.testing.assert_array_equal(store.get(-1), big)


@pytest.mark.parametrize("index, exc, match", [
    (2, IndexError, "index 2 is out of range for a VarLenStore of 2 sequences"),
    (-3, IndexError, "index -3 is out of range"),
    (10**30, IndexError, "out of range"),
    (1.0, TypeError, "VarLenStore index must be an int"),
    ("0", TypeError, "VarLenStore index must be an int"),
])
def test_varlen_store_bad_index(index, exc, match):
    store = rlox.VarLenStore()
    store.push(u32(1))
    store.push(u32(2))
    with pytest.raises(exc, match=match):
        store.get(index)


def test_varlen_store_bad_push():
    store = rlox.VarLenStore()
    with pytest.raises(TypeError, match="tokens must hold integer token ids, got dtype float64"):
        store.push(np.array([1.5]))
    with pytest.raises(ValueError, match="tokens holds token ids outside"):
        store.push([-1])
    with pytest.raises(ValueError, match="tokens must be 1-D"):
        store.push(5)
    assert len(store) == 0 and store.total_tokens() == 0


def test_varlen_store_save_load(tmp_path):
    store = rlox.VarLenStore()
    seqs = [u32(1, 2, 3), u32(), u32(4, 5), np.arange(2000, dtype=np.uint32)]
    for s in seqs:
        store.push(s)
    path = tmp_path / "store.npz"
    store.save(path)
    back = rlox.VarLenStore.load(path)
    assert len(back) == 4 and back.total_tokens() == store.total_tokens()
    for i, s in enumerate(seqs):
        np.testing.assert_array_equal(back.get(i), s)
    back.push(u32(9))                          # a loaded store keeps growing
    assert back.get(4).tolist() == [9] and back.get(3)[-1] == 1999
    empty = tmp_path / "empty"                 # the name is used as given
    rlox.VarLenStore().save(empty)
    loaded = rlox.VarLenStore.load(empty)
    assert len(loaded) == 0 and loaded.push(u32(3)) == 0 and loaded.get(0).tolist() == [3]


def test_varlen_store_load_rejects_bad_files(tmp_path):
    def write(name, **arrays):
        path = tmp_path / name
        with open(path, "wb") as f:
            np.savez(f, **arrays)
        return path
    good = dict(format_version=np.int64(1), offsets=np.array([0, 2]), values=u32(1, 2))
    cases = [
        (dict(good, format_version=np.int64(2)), "format version 2"),
        ({k: v for k, v in good.items() if k != "values"}, r"lacks \['values'\]"),
        (dict(good, offsets=np.array([0, 3])), "offsets must start at 0"),
        (dict(good, offsets=np.array([1, 2])), "offsets must start at 0"),
        (dict(good, offsets=np.array([0, 2, 1, 2])), "never decrease"),
        (dict(good, offsets=np.array([0, 2], dtype=np.int32)), "offsets must be 1-D int64"),
        (dict(good, values=np.array([1.0, 2.0])), "values must be 1-D uint32"),
    ]
    for i, (arrays, match) in enumerate(cases):
        with pytest.raises(ValueError, match=match):
            rlox.VarLenStore.load(write(f"bad{i}.npz", **arrays))
    pickled = write("pickled.npz", format_version=np.int64(1), offsets=np.array([0, 1]),
                    values=np.array([object()], dtype=object))
    with pytest.raises(ValueError, match="allow_pickle"):
        rlox.VarLenStore.load(pickled)


# --------------------------------------------------------------------------- pack_sequences
def _check_invariants(seqs, packed, max_length):
    ids, att, pos, sid = (packed[k] for k in ("input_ids", "attention_mask", "position_ids",
                                              "sequence_ids"))
    rows = ids.shape[0]
    assert ids.shape == att.shape == pos.shape == sid.shape == (rows, max_length)
    assert all(a.dtype == np.int64 for a in (ids, att, pos, sid))
    lengths = [len(s) for s in seqs]
    assert packed["lengths"].tolist() == lengths
    for i, s in enumerate(seqs):
        row, off = packed["placement"][i]
        if len(s) == 0:
            assert (row, off) == (-1, 0)
            continue
        # the mapping recovers the sequence; its tokens appear exactly once, in order
        np.testing.assert_array_equal(ids[row, off:off + len(s)], s)
        assert (sid == i).sum() == len(s)
        assert (sid[row, off:off + len(s)] == i).all()
        np.testing.assert_array_equal(pos[row, off:off + len(s)], np.arange(len(s)))
    # each row: sequences back to back, then padding (never more than max_length: the shape)
    used = att.sum(1)
    assert (used >= 1).all()
    assert (att == (np.arange(max_length)[None, :] < used[:, None])).all()
    assert ((sid >= 0) == (att == 1)).all() and (pos[att == 0] == 0).all()
    # row count: at least the token lower bound, never above next-fit on the same
    # (decreasing) order (first fit never opens two rows inside one next-fit row)
    decreasing = sorted(lengths, reverse=True)
    assert ref.min_rows(lengths, max_length) <= rows <= ref.next_fit_rows(decreasing, max_length)


@st.composite
def packing_cases(draw):
    max_length = draw(st.integers(1, 40))
    lengths = draw(st.lists(st.integers(0, max_length), max_size=40))
    seqs = [np.array(draw(st.lists(st.integers(0, 2**32 - 1), min_size=n, max_size=n)),
                     dtype=np.uint32) for n in lengths]
    return seqs, max_length


@given(packing_cases(), st.integers(-100, 2**40))
def test_pack_invariants_and_oracle(case, pad_id):
    seqs, max_length = case
    packed = rlox.pack_sequences(seqs, max_length, pad_id=pad_id)
    _check_invariants(seqs, packed, max_length)
    assert (packed["input_ids"][packed["attention_mask"] == 0] == pad_id).all()
    want = ref.pack_sequences(seqs, max_length, pad_id=pad_id)
    assert packed.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(packed[key], want[key], err_msg=key)
    # a VarLenStore packs the same way, without copying its tokens
    store = rlox.VarLenStore()
    for s in seqs:
        store.push(s)
    from_store = rlox.pack_sequences(store, max_length, pad_id=pad_id)
    for key in want:
        np.testing.assert_array_equal(from_store[key], want[key], err_msg=key)


def test_pack_guide_example():
    packed = rlox.pack_sequences(sequences=[u32(1, 2, 3), u32(4, 5)], max_length=8)
    assert packed["input_ids"].tolist() == [[1, 2, 3, 4, 5, 0, 0, 0]]
    assert packed["position_ids"].tolist() == [[0, 1, 2, 0, 1, 0, 0, 0]]
    assert packed["attention_mask"].tolist() == [[1, 1, 1, 1, 1, 0, 0, 0]]
    assert packed["sequence_ids"].tolist() == [[0, 0, 0, 1, 1, -1, -1, -1]]
    assert packed["placement"].tolist() == [[0, 0], [0, 3]]


def test_pack_first_fit_decreasing_order():
    # longest first; 4 goes into row 0 after 6, the 5 opens row 1, then 3 fits only row 1
    packed = rlox.pack_sequences([[1] * 4, [2] * 6, [3] * 5, [4] * 3], max_length=10)
    assert packed["placement"].tolist() == [[0, 6], [0, 0], [1, 0], [1, 5]]
    assert packed["input_ids"].shape[0] == 2


def test_pack_truncate():
    seqs = [np.arange(12), np.arange(3), np.arange(5)]
    with pytest.raises(ValueError, match=r"sequences\[0\] has 12 tokens, more than max_length=8; "
                                         r"pass truncate=True"):
        rlox.pack_sequences(seqs, 8)
    packed = rlox.pack_sequences(seqs, 8, truncate=True)
    assert packed["lengths"].tolist() == [8, 3, 5]
    row, off = packed["placement"][0]
    np.testing.assert_array_equal(packed["input_ids"][row, off:off + 8], np.arange(8))
    _check_invariants([s[:8] for s in seqs], packed, 8)


def test_pack_edge_cases():
    empty = rlox.pack_sequences([], 4)
    assert empty["input_ids"].shape == (0, 4) and empty["placement"].shape == (0, 2)
    only_empty = rlox.pack_sequences([u32(), []], 4)
    assert only_empty["input_ids"].shape == (0, 4)
    assert only_empty["placement"].tolist() == [[-1, 0], [-1, 0]]
    one = rlox.pack_sequences([[5]], 1)
    assert one["input_ids"].tolist() == [[5]]
    # 2-D arrays pack row by row; generators work
    assert rlox.pack_sequences(np.ones((3, 2), dtype=np.int64), 4)["input_ids"].shape == (2, 4)
    assert rlox.pack_sequences((u32(i) for i in range(3)), 2)["input_ids"].shape == (2, 2)


def test_pack_large_matches_oracle_and_threads(n_threads):
    rng = np.random.default_rng(0)
    seqs = [rng.integers(0, 50_000, size=n).astype(np.uint32)
            for n in rng.integers(1, 300, size=2_000)]          # above the parallel threshold
    packed = rlox.pack_sequences(seqs, 512, pad_id=7)
    _check_invariants(seqs, packed, 512)
    want = ref.pack_sequences(seqs, 512, pad_id=7)
    for key in want:
        np.testing.assert_array_equal(packed[key], want[key], err_msg=key)
    rlox.set_num_threads(1)
    again = rlox.pack_sequences(seqs, 512, pad_id=7)
    for key in want:
        np.testing.assert_array_equal(again[key], packed[key], err_msg=key)


def test_pack_rows_much_longer_than_the_input_sort_by_comparison():
    """max_length far above the number of sequences: the packer sorts by comparison instead of
    counting lengths; the placement is the same first-fit decreasing."""
    rng = np.random.default_rng(1)
    seqs = [rng.integers(0, 9, size=n).astype(np.uint32)
            for n in [5, 70_000, 3, 70_000, 30_000, 0, 5, 99_999]]
    packed = rlox.pack_sequences(seqs, 100_000)
    _check_invariants(seqs, packed, 100_000)
    want = ref.pack_sequences(seqs, 100_000)
    for key in want:
        np.testing.assert_array_equal(packed[key], want[key], err_msg=key)


def test_pack_huge_outputs_start_on_a_huge_page():
    """Outputs of 16 MB and more are 2 MiB-aligned views (transparent huge pages cover all of
    them); they are still ordinary writable C-contiguous int64 arrays with the oracle's
    content."""
    rng = np.random.default_rng(2)
    seqs = [rng.integers(0, 50_000, size=n).astype(np.uint32)
            for n in rng.integers(900, 2049, size=1_400)]
    packed = rlox.pack_sequences(seqs, 2048, pad_id=3)
    want = ref.pack_sequences(seqs, 2048, pad_id=3)
    for key in ("input_ids", "attention_mask", "position_ids", "sequence_ids"):
        a = packed[key]
        assert a.nbytes >= 16 * 2**20 and a.ctypes.data % 2**21 == 0, key
        assert a.dtype == np.int64 and a.flags.c_contiguous and a.flags.writeable, key
        np.testing.assert_array_equal(a, want[key], err_msg=key)
    np.testing.assert_array_equal(packed["placement"], want["placement"])


@pytest.mark.parametrize("call, exc, match", [
    (lambda: rlox.pack_sequences([u32(1)], 0), ValueError, "max_length must be >= 1, got 0"),
    (lambda: rlox.pack_sequences([u32(1)], 8.0), TypeError, "max_length must be an int"),
    (lambda: rlox.pack_sequences([u32(1)], "8"), TypeError, "max_length must be an int"),
    (lambda: rlox.pack_sequences([u32(1)], 8, pad_id=0.5), TypeError, "pad_id must be an int"),
    (lambda: rlox.pack_sequences([u32(1)], 8, pad_id=2**63), ValueError, "pad_id must fit in int64"),
    (lambda: rlox.pack_sequences(5, 8), TypeError, "sequences must be a list"),
    (lambda: rlox.pack_sequences(u32(1, 2, 3), 8), TypeError, r"wrap a single sequence as \[seq\]"),
    (lambda: rlox.pack_sequences([u32(1), np.array([0.5])], 8), TypeError,
     r"sequences\[1\] must hold integer token ids"),
    (lambda: rlox.pack_sequences([u32(1), [3, -1]], 8), ValueError,
     r"sequences\[1\] holds token ids outside \[0, 2\*\*32 - 1\]"),
    (lambda: rlox.pack_sequences([u32(1), np.zeros((2, 2), np.uint32)], 8), ValueError,
     r"sequences\[1\] must be 1-D"),
    (lambda: rlox.pack_sequences([u32(1), u32(*range(9))], 8), ValueError,
     r"sequences\[1\] has 9 tokens, more than max_length=8"),
])
def test_pack_bad_input(call, exc, match):
    with pytest.raises(exc, match=match):
        call()
