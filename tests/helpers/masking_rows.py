"""Rows, options and one masking call shared by the masking tests (tests/test_masking.py,
tests/test_word_masking.py)."""
import numpy as np
import tensorflow as tf

from bert_jax.pretrain import masking

PAD, CLS, SEP, MASK = 0, 101, 102, 103
T, P = 64, 10


def options(**overrides):
  fields = dict(max_predictions_per_seq=P, mask_id=MASK, special_ids=(PAD, CLS, SEP, MASK),
                replacement_ids=np.arange(1000, 2000, dtype=np.int32))
  fields.update(overrides)
  return masking.MaskingOptions(**fields)


def packed_rows(num_rows, seed=0):
  """[CLS] A [SEP] B [SEP] [PAD]... rows of ordinary ids 5000.. with random lengths."""
  rng = np.random.default_rng(seed)
  ids = np.zeros((num_rows, T), np.int32)
  for row in range(num_rows):
    a, b = rng.integers(1, 30), rng.integers(1, 30)
    a_ids, b_ids = rng.integers(5000, 6000, a), rng.integers(5000, 6000, b)
    ids[row, :a + b + 3] = [CLS, *a_ids, SEP, *b_ids, SEP]
  return ids


def run(input_ids, opts, seed=0, epoch=0, example_index=None):
  example_index = np.arange(len(input_ids)) if example_index is None else example_index
  noise = masking.example_noise(seed, epoch, tf.constant(example_index, tf.int64),
                                masking.noise_size(T, opts))
  return {k: v.numpy() for k, v in masking.mask_batch(tf.constant(input_ids), noise, opts).items()}
