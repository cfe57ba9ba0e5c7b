"""NSP pair instances: the create_pretraining_data.py rules, redrawn per epoch."""
import numpy as np
import pytest

from bert_jax.pretrain import nsp_pairs
from tests.helpers.corpora import document_of_token, synthetic_corpus


@pytest.fixture(scope="module")
def corpus():
  return synthetic_corpus(np.random.default_rng(1).integers(2, 40, size=300))


def build(corpus, seed=0, **options):
  return nsp_pairs.build_pair_instances(
      corpus, nsp_pairs.PairOptions(**options), np.random.default_rng(seed))


def test_pairs_fit_and_are_well_formed(corpus):
  instances = build(corpus, max_seq_length=64)
  assert len(instances) > 500
  assert (instances.a_lengths >= 1).all() and (instances.b_lengths >= 1).all()
  assert (instances.a_lengths + instances.b_lengths <= 64 - 3).all()
  a_documents = document_of_token(corpus, instances.a_starts)
  a_last_tokens = instances.a_starts + instances.a_lengths - 1
  assert (a_documents == document_of_token(corpus, a_last_tokens)).all()
  b_documents = document_of_token(corpus, instances.b_starts)
  is_next = ~instances.is_random_next
  assert (a_documents[is_next] == b_documents[is_next]).all()
  a_ends = instances.a_starts + instances.a_lengths
  assert (instances.b_starts[is_next] >= a_ends[is_next]).all()
  assert (a_documents[~is_next] != b_documents[~is_next]).all()


def test_untruncated_pairs_are_whole_sentences_and_true_continuations(corpus):
  instances = build(corpus, max_seq_length=2000)  # nothing gets truncated
  starts = set(corpus.sentence_starts.tolist())
  a_ends = instances.a_starts + instances.a_lengths
  assert all(int(s) in starts for s in instances.a_starts)
  assert all(int(e) in starts for e in a_ends)
  is_next = ~instances.is_random_next
  np.testing.assert_array_equal(instances.b_starts[is_next], a_ends[is_next])
  assert all(int(s) in starts for s in instances.b_starts)


def test_is_next_rate_and_lengths(corpus):
  instances = build(corpus, max_seq_length=128)
  assert abs((~instances.is_random_next).mean() - 0.5) < 0.03
  total = instances.a_lengths + instances.b_lengths
  assert (total == 125).mean() > 0.5  # mostly full: short only when drawn so, or at doc ends
  short = build(corpus, max_seq_length=128, short_seq_prob=1.0)
  assert (short.a_lengths + short.b_lengths).mean() < 0.75 * total.mean()
  always_random = build(corpus, random_next_prob=1.0)
  assert always_random.is_random_next.all()


def test_redrawn_per_epoch_and_reproducible(corpus):
  first, again, other = build(corpus, seed=5), build(corpus, seed=5), build(corpus, seed=6)
  for field in ("a_starts", "a_lengths", "b_starts", "b_lengths", "is_random_next"):
    np.testing.assert_array_equal(getattr(first, field), getattr(again, field))
  shared = set(zip(first.a_starts.tolist(), first.b_starts.tolist())) & set(
      zip(other.a_starts.tolist(), other.b_starts.tolist()))
  assert len(shared) < 0.5 * len(first)


def test_one_sentence_documents_give_not_next_only():
  corpus = synthetic_corpus([1] * 50 + [6] * 50)
  instances = build(corpus)
  single = document_of_token(corpus, instances.a_starts) < 50
  assert single.any() and instances.is_random_next[single].all()


def reference_truncation_counts(a_length, b_length, max_tokens):
  """The token-by-token rule: trim the longer side (B on ties) until it fits."""
  a_cut = b_cut = 0
  while (a_length - a_cut) + (b_length - b_cut) > max_tokens:
    if a_length - a_cut > b_length - b_cut:
      a_cut += 1
    else:
      b_cut += 1
  return a_cut, b_cut


def test_closed_form_truncation_matches_the_loop():
  rng = np.random.default_rng(0)
  a_lengths, b_lengths = rng.integers(1, 200, size=500), rng.integers(1, 200, size=500)
  a_starts, b_starts = rng.integers(0, 1000, size=500), rng.integers(0, 1000, size=500)
  new_a, a_kept, new_b, b_kept = nsp_pairs._truncate_pairs(
      a_starts, a_lengths, b_starts, b_lengths, 125, rng)
  for i in range(500):
    a_cut, b_cut = reference_truncation_counts(a_lengths[i], b_lengths[i], 125)
    assert (a_kept[i], b_kept[i]) == (a_lengths[i] - a_cut, b_lengths[i] - b_cut)
    assert 0 <= new_a[i] - a_starts[i] <= a_cut and 0 <= new_b[i] - b_starts[i] <= b_cut
  front_cut = (new_a - a_starts)[a_lengths - a_kept > 20]
  back_cut = (a_starts + a_lengths - new_a - a_kept)[a_lengths - a_kept > 20]
  assert front_cut.sum() > 0 and back_cut.sum() > 0  # both ends get trimmed


def test_pack_layout():
  corpus = synthetic_corpus([3, 3])
  instances = nsp_pairs.PairInstances(
      a_starts=np.array([10, 0]), a_lengths=np.array([2, 3]), b_starts=np.array([20, 5]),
      b_lengths=np.array([3, 1]), is_random_next=np.array([True, False]))
  ids = nsp_pairs.pack_pair_instances(instances, corpus.token_ids + 1000, 10,
                                      cls_id=101, sep_id=102, pad_id=0)
  np.testing.assert_array_equal(ids, [
      [101, 1010, 1011, 102, 1020, 1021, 1022, 102, 0, 0],
      [101, 1000, 1001, 1002, 102, 1005, 102, 0, 0, 0]])
  assert ids.dtype == np.int32


def test_options_are_validated():
  with pytest.raises(ValueError, match="max_seq_length"):
    nsp_pairs.PairOptions(max_seq_length=4)
  with pytest.raises(ValueError, match="random_next_prob"):
    nsp_pairs.PairOptions(random_next_prob=1.5)


def test_sop_pairs_are_consecutive_segments_swapped_half_the_time(corpus):
  """ALBERT's SOP: B follows A in the same document (label 0) or precedes it (label 1)."""
  from bert_jax.pretrain import builders
  options = nsp_pairs.PairOptions(max_seq_length=64)
  pairs = builders.BUILDERS["sop"].instances(corpus, options, np.random.default_rng(0))
  swapped = pairs.is_random_next
  assert len(pairs) > 500 and abs(swapped.mean() - 0.5) < 0.05
  same_doc = document_of_token(corpus, pairs.a_starts) == document_of_token(corpus,
                                                                            pairs.b_starts)
  assert same_doc.all()  # every document here has >= 2 sentences: no random B
  in_order = ~swapped
  assert (pairs.a_starts[in_order] + pairs.a_lengths[in_order] <= pairs.b_starts[in_order]).all()
  assert (pairs.b_starts[swapped] + pairs.b_lengths[swapped] <= pairs.a_starts[swapped]).all()


def test_equal_length_sop_pairs_are_the_sop_pairs_cut_at_their_boundary(corpus):
  """sop_equal_lengths: the same pairs and swaps as sop (one rng stream), each side cut to
  the shorter one's length, keeping the tokens next to the boundary between them."""
  from bert_jax.pretrain import builders
  options = nsp_pairs.PairOptions(max_seq_length=64)
  sop, equal = (builders.BUILDERS[name].instances(corpus, options, np.random.default_rng(0))
                for name in ("sop", "sop_equal_lengths"))
  np.testing.assert_array_equal(equal.is_random_next, sop.is_random_next)
  np.testing.assert_array_equal(equal.a_lengths, equal.b_lengths)
  np.testing.assert_array_equal(equal.a_lengths, np.minimum(sop.a_lengths, sop.b_lengths))
  assert (sop.a_lengths != sop.b_lengths).mean() > 0.5  # the cut did something
  for side in ("a", "b"):  # each side a sub-span of sop's
    start, length = getattr(equal, f"{side}_starts"), getattr(equal, f"{side}_lengths")
    sop_start, sop_length = getattr(sop, f"{side}_starts"), getattr(sop, f"{side}_lengths")
    assert (start >= sop_start).all() and (start + length <= sop_start + sop_length).all()
  # In original order A keeps its end and B its start; swapped, the reverse.
  in_order, swapped = ~equal.is_random_next, equal.is_random_next
  np.testing.assert_array_equal((equal.a_starts + equal.a_lengths)[in_order],
                                (sop.a_starts + sop.a_lengths)[in_order])
  np.testing.assert_array_equal(equal.b_starts[in_order], sop.b_starts[in_order])
  np.testing.assert_array_equal(equal.a_starts[swapped], sop.a_starts[swapped])
  np.testing.assert_array_equal((equal.b_starts + equal.b_lengths)[swapped],
                                (sop.b_starts + sop.b_lengths)[swapped])
