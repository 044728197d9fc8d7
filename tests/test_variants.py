"""The named mistakes (grader/judge/secret/variants.py): attend, split_heads and merge_heads
written once more on the judge side, each mistake a row of knobs.  Their defaults are the
reference's numbers bit for bit, every row differs from the reference, and a broken row or a
variant that raises is loud: it raises, nothing swallows it."""
import pytest
import torch

from grader.judge.checks import support
from grader.judge.checks.hidden import check_attend_reference as hidden_attend
from grader.judge.checks.public import check_attend as public_attend
from grader.judge.secret import variants
from grader.judge.secret.reference import ref

# (leading axes, Tq, Tk, d, d_v): ranks 2-5, square and not, v as wide as q and not
SHAPES = [((), 5, 5, 4, 6), ((2,), 3, 3, 8, 8), ((2, 3), 5, 5, 4, 6), ((2, 3), 4, 6, 2, 3),
          ((1, 2, 3), 1, 1, 4, 4)]


def same_bits(a, b):
    """Equal shape, dtype and every number, NaN where NaN and infinities where infinities."""
    return a.shape == b.shape and a.dtype == b.dtype and torch.equal(a.isnan(), b.isnan()) \
        and torch.equal(torch.nan_to_num(a, 0.0), torch.nan_to_num(b, 0.0))


def drawn(shape, dtype, seed):
    lead, tq, tk, d, d_v = shape
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(*lead, t, w, generator=g, dtype=dtype)
               for t, w in ((tq, d), (tk, d), (tk, d_v)))
    return q, k, v, torch.rand(tq, tk, generator=g) > 0.3


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_attention_at_its_defaults_is_the_reference_bit_for_bit(shape, dtype):
    q, k, v, drawn_mask = drawn(shape, dtype, seed=len(shape[0]) + shape[1])
    defaults = {knob: settings[0] for knob, settings in variants.ATTEND_KNOBS.items()}
    for mask in (None, drawn_mask, drawn_mask.expand(*shape[0], *drawn_mask.shape)):
        expected = ref.attend(q, k, v, mask, return_weights=True)
        for got in (variants.attention(q, k, v, mask), variants.attention(q, k, v, mask, **defaults)):
            assert same_bits(got[0], expected[0]) and same_bits(got[1], expected[1])


@pytest.mark.parametrize("batch,positions,width,heads", [(2, 5, 12, 3), (1, 3, 8, 2), (3, 4, 6, 6),
                                                         (2, 2, 4, 1)])
def test_split_and_merge_at_their_defaults_are_the_reference_bit_for_bit(batch, positions, width,
                                                                          heads):
    x = torch.randn(batch, positions, width)
    default = {"layout": variants.SPLIT_KNOBS["layout"][0]}
    for got in (variants.split_heads(x, heads), variants.split_heads(x, heads, **default)):
        assert same_bits(got, ref.split_heads(x, heads))
    parted = ref.split_heads(x, heads)
    default = {"layout": variants.MERGE_KNOBS["layout"][0]}
    for h in (parted, parted.contiguous(), torch.randn(batch, positions, width // heads, heads)
              .permute(0, 3, 1, 2)):
        for got in (variants.merge_heads(h), variants.merge_heads(h, **default)):
            assert same_bits(got, ref.merge_heads(h))


@pytest.mark.parametrize("name", sorted(variants.ATTEND_VARIANTS))
def test_each_attend_variant_differs_from_the_reference(name):
    q, k, v, _ = drawn(((2, 3), 5, 5, 4, 6), torch.float32, seed=0)
    # an inverted convention shows only with a mask given: its own default is the right one
    mask = public_attend.BAND if name == "mask_inverted" else None
    context, weights = variants.attend_variant(name, q, k, v, mask=mask)
    ref_context, ref_weights = ref.attend(q, k, v, mask=mask, return_weights=True)
    assert not (support.same(context, ref_context) and support.same(weights, ref_weights))


@pytest.mark.parametrize("name", sorted(variants.SPLIT_VARIANTS))
def test_each_split_variant_differs_from_the_reference(name):
    x = torch.randn(2, 5, 12)
    got = variants.split_heads(x, 3, **variants.SPLIT_VARIANTS[name])
    assert got.shape == (2, 3, 5, 4) and not torch.equal(got, ref.split_heads(x, 3))


@pytest.mark.parametrize("name", sorted(variants.MERGE_VARIANTS))
def test_each_merge_variant_differs_from_the_reference(name):
    heads = torch.randn(2, 3, 5, 4)
    got = variants.merge_heads(heads, **variants.MERGE_VARIANTS[name])
    assert got.shape == (2, 5, 12) and not torch.equal(got, ref.merge_heads(heads))


def test_every_row_is_a_rubric_key_and_a_block_variant_or_attend_only():
    from grader import rubric

    messages = set(rubric.load().messages)
    rows = set(variants.ATTEND_VARIANTS) | set(variants.SPLIT_VARIANTS) | set(variants.MERGE_VARIANTS)
    assert rows <= messages
    assert rows - variants.ATTEND_ONLY <= set(variants.MODULE_VARIANTS)


# -- a broken variant is loud ------------------------------------------------------------------
@pytest.mark.parametrize("table,row", [("ATTEND_VARIANTS", {"mask": "tirl"}),
                                       ("ATTEND_VARIANTS", {"mask_mode": "none"}),
                                       ("SPLIT_VARIANTS", {"layuot": "head_minor"}),
                                       ("MERGE_VARIANTS", {"layout": "no_tranpose"})])
def test_a_row_with_a_knob_its_function_lacks_fails_the_import_check(monkeypatch, table, row):
    monkeypatch.setitem(getattr(variants, table), "typo", row)
    with pytest.raises(ValueError, match="has no knob"):
        variants.check_tables()


def test_a_row_with_a_knob_its_function_lacks_raises_when_run(monkeypatch):
    q, k, v, _ = drawn(((2, 3), 5, 5, 4, 6), torch.float32, seed=1)
    monkeypatch.setitem(variants.ATTEND_VARIANTS, "typo", {"mask": "tirl"})
    with pytest.raises(ValueError, match="has no knob"):
        variants.attend_variant("typo", q, k, v)
    monkeypatch.setitem(variants.ATTEND_VARIANTS, "typo", {"mask_mode": "none"})
    with pytest.raises(TypeError):
        variants.attend_variant("typo", q, k, v)


def test_a_variant_that_raises_is_not_swallowed_by_the_search_for_a_name(monkeypatch):
    """A wrong answer makes the hidden check run every variant: one that raises ends the check
    with its own exception (the runner's `internal`), never a verdict or a pass."""
    def broken(*_):
        raise RuntimeError("a broken variant")

    monkeypatch.setitem(variants.SCALES, "none", broken)
    q, k, v, _ = drawn(((2, 3), 5, 5, 4, 6), torch.float32, seed=2)
    context, weights = ref.attend(q * 3, k, v, return_weights=True)  # no variant's numbers
    with pytest.raises(RuntimeError, match="a broken variant"):
        hidden_attend.expect_reference(context, weights, q, k, v)
    right = ref.attend(q, k, v, return_weights=True)
    hidden_attend.expect_reference(*right, q, k, v)  # a right answer runs no variant


def test_a_block_variant_for_a_function_the_reference_lacks_raises():
    with pytest.raises(ValueError, match="no function 'attend_heads'"):
        variants.reference_copy(attend_heads=variants.attend_variant)
