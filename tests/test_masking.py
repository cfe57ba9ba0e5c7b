"""Dynamic in-graph masking: selection, the 80/10/10 split, sparse layout, determinism."""
import numpy as np
import pytest
import tensorflow as tf

from bert_jax.pretrain import masking
from tests.helpers.masking_rows import CLS, MASK, P, PAD, SEP, T, options, packed_rows, run


def test_layout_and_never_special_tokens():
  ids = packed_rows(256)
  out = run(ids, options())
  eligible = ~np.isin(ids, [PAD, CLS, SEP, MASK])
  expected_count = np.minimum(np.maximum(np.round(0.15 * eligible.sum(1)), 1), P)
  weights = out["masked_lm_weights"]
  assert out["masked_lm_positions"].dtype == np.int32 and weights.dtype == np.float32
  np.testing.assert_array_equal(weights.sum(1), expected_count)
  for row in range(len(ids)):
    count = int(expected_count[row])
    positions = out["masked_lm_positions"][row]
    np.testing.assert_array_equal(weights[row], [1.0] * count + [0.0] * (P - count))
    assert (np.diff(positions[:count]) > 0).all() and (positions[count:] == 0).all()
    assert eligible[row, positions[:count]].all()  # never [CLS]/[SEP]/[PAD]
    np.testing.assert_array_equal(out["masked_lm_ids"][row, :count], ids[row, positions[:count]])
    assert (out["masked_lm_ids"][row, count:] == 0).all()
    untouched = np.setdiff1d(np.arange(T), positions[:count])
    np.testing.assert_array_equal(out["input_ids"][row, untouched], ids[row, untouched])


def test_rates_80_10_10():
  ids = packed_rows(4000)
  out = run(ids, options())
  now = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], axis=1)
  chosen = out["masked_lm_weights"] > 0
  eligible = ~np.isin(ids, [PAD, CLS, SEP, MASK])
  assert abs(chosen.sum() / eligible.sum() - 0.15) < 0.01
  to_mask = chosen & (now == MASK)
  kept = chosen & (now == out["masked_lm_ids"])
  randomized = chosen & ~to_mask & ~kept
  assert abs(to_mask.sum() / chosen.sum() - 0.8) < 0.02
  assert abs(randomized.sum() / chosen.sum() - 0.1) < 0.02
  assert abs(kept.sum() / chosen.sum() - 0.1) < 0.02
  assert np.isin(now[randomized], np.arange(1000, 2000)).all()


def test_rates_come_from_the_options():
  ids = packed_rows(2000)
  opts = options(masked_lm_prob=0.3, mask_token_prob=0.5, random_token_prob=0.5,
                 max_predictions_per_seq=P)
  out = run(ids, opts)
  chosen = out["masked_lm_weights"] > 0
  now = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], axis=1)
  assert abs((chosen & (now == MASK)).sum() / chosen.sum() - 0.5) < 0.03
  assert (now[chosen] != out["masked_lm_ids"][chosen]).mean() > 0.99  # nothing kept
  assert chosen.sum(1).max() == P  # 30% of up to 61 tokens hits the cap


def test_crafted_noise_picks_the_action():
  ids = packed_rows(1)
  opts = options()
  noise = np.zeros((3, masking.noise_size(T, opts)), np.float32)
  noise[:, T:T + P] = [[0.1], [0.85], [0.95]]  # action draws: mask, random, keep
  noise[:, T + P:] = 0.5                       # replacement: the middle of the table
  noise[:, :T] = np.linspace(0, 1, T)          # selection: the highest positions win
  out = masking.mask_batch(tf.constant(np.repeat(ids, 3, 0)), tf.constant(noise), opts)
  positions = out["masked_lm_positions"].numpy()[0][out["masked_lm_weights"].numpy()[0] > 0]
  eligible = np.flatnonzero(~np.isin(ids[0], [PAD, CLS, SEP]))
  np.testing.assert_array_equal(positions, eligible[-len(positions):])
  now = out["input_ids"].numpy()[:, positions]
  assert (now[0] == MASK).all() and (now[1] == 1500).all()
  np.testing.assert_array_equal(now[2], ids[0, positions])


def test_noise_depends_only_on_seed_epoch_and_index():
  size = 50
  batch = masking.example_noise(3, 1, tf.constant([7, 8, 9], tf.int64), size).numpy()
  alone = masking.example_noise(3, 1, tf.constant([8], tf.int64), size).numpy()
  np.testing.assert_array_equal(batch[1], alone[0])
  other_epoch = masking.example_noise(3, 2, tf.constant([8], tf.int64), size).numpy()
  other_seed = masking.example_noise(4, 1, tf.constant([8], tf.int64), size).numpy()
  assert not np.allclose(alone, other_epoch) and not np.allclose(alone, other_seed)
  big = masking.example_noise(0, 0, tf.range(2000, dtype=tf.int64), 100).numpy()
  assert big.min() >= 0.0 and big.max() < 1.0
  assert abs(big.mean() - 0.5) < 0.01 and abs(big.std() - 12 ** -0.5) < 0.01
  assert abs(np.corrcoef(big[:-1, 3], big[1:, 3])[0, 1]) < 0.1


def test_noise_is_splitmix64():
  """The reference sequence of SplitMix64 from state 0: 0xe220a8397b1dcdaf, ..."""
  gamma = np.uint64(0x9E3779B97F4A7C15)

  def mix(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))
  with np.errstate(over="ignore"):
    assert int(mix(gamma)) == 0xE220A8397B1DCDAF
    key = mix(mix(np.uint64(0)))  # seed 0, epoch 0, example 0
    expected = [int(mix(key + np.uint64(j) * gamma) >> np.uint64(40)) / 2 ** 24
                for j in (1, 2, 3)]
  got = masking.example_noise(0, 0, tf.constant([0], tf.int64), 3).numpy()[0]
  np.testing.assert_array_equal(got, np.float32(expected))


def test_masks_differ_across_epochs():
  ids = packed_rows(200)
  first, second = run(ids, options(), epoch=0), run(ids, options(), epoch=1)
  again = run(ids, options(), epoch=0)
  np.testing.assert_array_equal(first["masked_lm_positions"], again["masked_lm_positions"])
  same = (first["masked_lm_positions"] == second["masked_lm_positions"]).all(1)
  assert same.mean() < 0.05


def test_replacement_ids_and_validation():
  vocab = ["[PAD]", "[unused0]", "[UNK]", "[CLS]", "the", "##s", "[SEP]", "[MASK]", "!"]
  np.testing.assert_array_equal(masking.replacement_ids_from_vocab(vocab), [4, 5, 8])
  with pytest.raises(ValueError, match="sum to <= 1"):
    options(mask_token_prob=0.8, random_token_prob=0.3)
  with pytest.raises(ValueError, match="masked_lm_prob"):
    options(masked_lm_prob=0.0)
  with pytest.raises(ValueError, match="max_predictions_per_seq"):
    options(max_predictions_per_seq=0)


# Whole-word masking: ids 7000-7999 are "##" continuation pieces.
