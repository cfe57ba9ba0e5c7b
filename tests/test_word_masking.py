"""Word-level masking selectors against their reference rules: whole words (WordPiece,
SentencePiece, BPE), ALBERT's n-grams, SpanBERT's spans."""
import numpy as np
import pytest
import tensorflow as tf

from bert_jax.pretrain import masking
from tests.helpers.masking_rows import CLS, MASK, P, PAD, SEP, T, options, packed_rows, run


CONTINUATION = np.zeros(8000, bool)
CONTINUATION[7000:] = True


def word_rows(num_rows, seed=0):
  """Like packed_rows, but each word is 1-4 pieces (a start id 5000.. + "##" ids 7000..)."""
  rng = np.random.default_rng(seed)
  ids = np.zeros((num_rows, T), np.int32)

  def segment(budget):
    pieces = []
    while len(pieces) < budget:
      pieces += [rng.integers(5000, 6000)] + list(rng.integers(7000, 8000, rng.integers(0, 4)))
    return pieces[:budget]  # may end mid-word, as a truncated segment does
  for row in range(num_rows):
    a, b = segment(rng.integers(1, 30)), segment(rng.integers(1, 30))
    ids[row, :len(a) + len(b) + 3] = [CLS, *a, SEP, *b, SEP]
  return ids


def reference_whole_word(ids_row, scores_row, budget):
  """create_pretraining_data.py's rule: words in random order, taken whole if they fit."""
  words = []
  for position, token in enumerate(ids_row):
    if token in (PAD, CLS, SEP, MASK):
      continue
    if CONTINUATION[token] and words and words[-1][-1] == position - 1:
      words[-1].append(position)
    else:
      words.append([position])
  order = sorted(range(len(words)), key=lambda w: -scores_row[words[w][0]])
  taken = []
  for w in order:
    if len(taken) + len(words[w]) <= budget:
      taken += words[w]
  return sorted(taken)


def test_whole_word_masking_equals_the_reference_rule():
  ids = word_rows(300)
  opts = options(selector="whole_word", continuation_table=CONTINUATION)
  noise = masking.example_noise(0, 0, tf.constant(np.arange(len(ids)), tf.int64),
                                masking.noise_size(T, opts)).numpy()
  out = run(ids, opts)
  eligible = ~np.isin(ids, [PAD, CLS, SEP, MASK])
  budget = np.minimum(np.maximum(np.round(0.15 * eligible.sum(1)), 1), P).astype(int)
  partial_words = 0
  for row in range(len(ids)):
    want = reference_whole_word(ids[row], noise[row, :T], budget[row])
    count = int(out["masked_lm_weights"][row].sum())
    got = out["masked_lm_positions"][row, :count].tolist()
    assert got == want, row
    np.testing.assert_array_equal(out["masked_lm_ids"][row, :count], ids[row, got])
    assert (out["masked_lm_positions"][row, count:] == 0).all()
    partial_words += sum(CONTINUATION[ids[row, p]] and p - 1 not in got and eligible[row, p - 1]
                         for p in got)
  assert partial_words == 0
  # Skipping words that do not fit costs a little of the 15%.
  selected = out["masked_lm_weights"].sum() / eligible.sum()
  assert 0.12 < selected <= 0.155, selected
  # Multi-piece words are chosen too, not only the single pieces.
  chosen_continuations = CONTINUATION[np.where(out["masked_lm_weights"] > 0,
                                               out["masked_lm_ids"], 0)].sum()
  assert chosen_continuations > 0.2 * out["masked_lm_weights"].sum()


def test_whole_word_masking_past_the_first_2p_words_equals_the_reference_rule():
  # Three-piece words and one single piece a row, 4 predictions: after one word the budget
  # of 4 has room for 1 piece, so a row is met only where its single piece comes, often
  # past the 2P = 8 best-scoring words the greedy pass reads first: the full pass decides.
  rng = np.random.default_rng(3)
  ids = np.zeros((200, T), np.int32)
  for row in range(len(ids)):
    words = [[rng.integers(5000, 6000), *rng.integers(7000, 8000, 2)] for _ in range(19)]
    words.insert(rng.integers(0, 20), [rng.integers(5000, 6000)])
    ids[row, :60] = [CLS, *[piece for word in words for piece in word], SEP]
  opts = options(selector="whole_word", continuation_table=CONTINUATION,
                 max_predictions_per_seq=4)
  noise = masking.example_noise(0, 0, tf.constant(np.arange(len(ids)), tf.int64),
                                masking.noise_size(T, opts)).numpy()
  out = run(ids, opts)
  late_single_pieces = 0
  for row in range(len(ids)):
    want = reference_whole_word(ids[row], noise[row, :T], 4)
    count = int(out["masked_lm_weights"][row].sum())
    assert out["masked_lm_positions"][row, :count].tolist() == want, row
    starts = [p for p in range(1, 59) if not CONTINUATION[ids[row, p]]]
    single = next(p for p in starts if not CONTINUATION[ids[row, p + 1]])
    rank = sum(noise[row, p] > noise[row, single] for p in starts)
    late_single_pieces += single in want and rank >= 8
  assert late_single_pieces > 10, late_single_pieces


def test_whole_word_masking_without_continuations_selects_as_many_pieces():
  ids = packed_rows(64)  # every word is one piece
  plain = run(ids, options())
  whole = run(ids, options(selector="whole_word", continuation_table=CONTINUATION))
  for key in ("masked_lm_weights", "masked_lm_positions", "masked_lm_ids", "input_ids"):
    np.testing.assert_array_equal(whole[key], plain[key])


def test_whole_word_masking_needs_the_continuation_table():
  with pytest.raises(ValueError, match="needs word boundaries"):
    options(selector="whole_word")
  with pytest.raises(ValueError, match=r"config.data.masking='spam': expected one of"):
    options(selector="spam")
  np.testing.assert_array_equal(masking.continuation_table_from_vocab(["the", "##s", "#"]),
                                [False, True, False])


# ------------------------------------------------- n-gram (ALBERT) and span (SpanBERT)
def reference_words(ids_row, continuation=CONTINUATION, specials=(PAD, CLS, SEP, MASK)):
  """Words as position lists: a continuation piece joins the word of the piece before it."""
  words = []
  for position, token in enumerate(ids_row):
    if token in specials:
      continue
    if continuation[token] and words and words[-1][-1] == position - 1:
      words[-1].append(position)
    else:
      words.append([position])
  return words


def reference_ngram(ids_row, order_scores, n_draws, budget):
  """google-research/albert create_masked_lm_predictions' n-gram loop, the shuffle and
  np.random.choice replaced by the given draws. -> (positions, unit starts)."""
  cand_indexes = reference_words(ids_row)
  ngram_indexes = [[cand_indexes[i:i + n] for n in (1, 2, 3)] for i in range(len(cand_indexes))]
  shuffled = sorted(range(len(cand_indexes)), key=lambda i: -order_scores[cand_indexes[i][0]])
  cdf = np.float32(np.cumsum([6 / 11, 3 / 11]))
  covered, starts = set(), []
  for i in shuffled:
    cand_index_set = ngram_indexes[i]
    if len(covered) >= budget:
      break
    n = 1 + int((n_draws[cand_indexes[i][0]] >= cdf).sum())
    index_set = sum(cand_index_set[n - 1], [])
    n -= 1
    while len(covered) + len(index_set) > budget:
      if n == 0:
        break
      index_set = sum(cand_index_set[n - 1], [])
      n -= 1
    if len(covered) + len(index_set) > budget:
      continue
    if any(index in covered for index in index_set):
      continue
    covered.update(index_set)
    starts.append(index_set[0])
  return sorted(covered), sorted(starts)


def reference_span(ids_row, anchor_draws, length_draws, budget):
  """SpanBERT's PairWithSpanMaskingScheme.mask + merge_intervals; the anchor is the
  drawn one of the free eligible tokens (the reference redraws a taken anchor).
  -> (positions, drawn span starts, merged spans [(start, end)])."""
  words = reference_words(ids_row)
  word_of = {p: w for w, word in enumerate(words) for p in word}
  eligible = sorted(word_of)
  probs = 0.2 * 0.8 ** np.arange(10)
  cdf = np.float32(np.cumsum(probs / probs.sum())[:-1])
  mask, spans, attempt = set(), [], 0
  while len(mask) < budget:
    span_len = 1 + int((length_draws[attempt] >= cdf).sum())
    free = [p for p in eligible if p not in mask]
    pick = int(np.float32(anchor_draws[attempt]) * np.float32(len(free)))
    anchor = free[min(pick, len(free) - 1)]
    attempt += 1
    w = word_of[anchor]
    spans.append([words[w][0], words[w][0]])
    num_words = 0
    while (num_words < span_len and w < len(words) and len(mask) < budget
           and (num_words == 0 or words[w][0] == words[w - 1][-1] + 1)):
      for i in words[w]:
        if len(mask) >= budget:
          break
        mask.add(i)
        spans[-1][-1] = i
      num_words += 1
      w += 1
  merged = []
  for start, end in sorted(spans):
    if merged and merged[-1][1] + 1 >= start:
      merged[-1][1] = max(merged[-1][1], end)
    else:
      merged.append([start, end])
  return sorted(mask), sorted(s for s, _ in spans), merged


def _run_with_noise(ids, opts):
  noise = masking.example_noise(0, 0, tf.constant(np.arange(len(ids)), tf.int64),
                                masking.noise_size(T, opts)).numpy()
  out = masking.mask_batch(tf.constant(ids), tf.constant(noise), opts)
  return noise, {k: v.numpy() for k, v in out.items()}


def _budgets(ids):
  eligible = ~np.isin(ids, [PAD, CLS, SEP, MASK])
  return np.minimum(np.maximum(np.round(0.15 * eligible.sum(1)), 1), P).astype(int)


def _check_spans(out, row, merged):
  """The span fields of `row` against merged spans [(start, end)]."""
  count = int(out["masked_lm_weights"][row].sum())
  for slot in range(count):
    position = out["masked_lm_positions"][row, slot]
    start, end = next((s, e) for s, e in merged if s <= position <= e)
    assert out["masked_lm_span_left"][row, slot] == start - 1
    assert out["masked_lm_span_right"][row, slot] == min(end + 1, T - 1)
    assert out["masked_lm_span_offset"][row, slot] == position - start
  for key in masking.SPAN_FIELDS:
    assert (out[key][row, count:] == 0).all()


def _runs(positions):
  """Maximal runs of consecutive positions: [(start, end)]."""
  runs = []
  for p in positions:
    if runs and runs[-1][1] == p - 1:
      runs[-1][1] = p
    else:
      runs.append([p, p])
  return runs


def test_ngram_masking_equals_albert():
  ids = word_rows(300, seed=1)
  opts = options(selector="ngram", continuation_table=CONTINUATION, span_fields=True)
  noise, out = _run_with_noise(ids, opts)
  budget = _budgets(ids)
  lengths = []
  for row in range(len(ids)):
    want, starts = reference_ngram(ids[row], noise[row, :T], noise[row, T:2 * T], budget[row])
    count = int(out["masked_lm_weights"][row].sum())
    got = out["masked_lm_positions"][row, :count].tolist()
    assert got == want, row
    got_starts = [p for p, s in zip(got, out["masked_lm_unit_start"][row]) if s]
    assert got_starts == starts, row
    ranks = out["masked_lm_unit_start"][row][out["masked_lm_unit_start"][row] > 0]
    assert len(set(ranks)) == len(ranks), row  # one candidate rank per n-gram
    _check_spans(out, row, _runs(got))
    words = reference_words(ids[row])
    lengths += [sum(w[0] in range(s, e + 1) for w in words) for s, e in _runs(got)]
  assert max(lengths) > 3  # adjacent n-grams merge into longer spans
  assert abs(out["masked_lm_weights"].sum() / budget.sum() - 1) < 0.05


def test_span_masking_equals_spanbert():
  ids = word_rows(300, seed=2)
  opts = options(selector="span", continuation_table=CONTINUATION, span_fields=True)
  noise, out = _run_with_noise(ids, opts)
  budget = _budgets(ids)
  mask_now = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], 1) == MASK
  for row in range(len(ids)):
    want, starts, merged = reference_span(ids[row], noise[row, :P], noise[row, P:2 * P],
                                          budget[row])
    count = int(out["masked_lm_weights"][row].sum())
    got = out["masked_lm_positions"][row, :count].tolist()
    assert got == want and count == budget[row], row
    assert [p for p, s in zip(got, out["masked_lm_unit_start"][row]) if s] == starts, row
    _check_spans(out, row, merged)
    for start, end in merged:  # one 80/10/10 decision per merged span
      in_span = [slot for slot, p in enumerate(got) if start <= p <= end]
      assert len(set(mask_now[row, in_span])) == 1, row


def test_span_rates_and_unit_order():
  """Long rows: the exact 15% budget, [MASK] for 80% of the spans, units in draw order."""
  rows, length = 500, 256
  ids = np.concatenate([np.full((rows, 1), CLS), np.random.default_rng(3).integers(
      5000, 6000, (rows, length - 2)), np.full((rows, 1), SEP)], 1).astype(np.int32)
  opts = options(selector="span", continuation_table=CONTINUATION, span_fields=True,
                 max_predictions_per_seq=40)
  noise = masking.example_noise(0, 0, tf.range(rows, dtype=tf.int64),
                                masking.noise_size(length, opts))
  out = {k: v.numpy() for k, v in masking.mask_batch(tf.constant(ids), noise, opts).items()}
  weights = out["masked_lm_weights"] > 0
  assert abs(weights.sum() / (rows * (length - 2)) - 0.15) < 0.002
  now = np.take_along_axis(out["input_ids"], out["masked_lm_positions"], 1)
  first_of_span = weights & (out["masked_lm_span_offset"] == 0)
  assert abs((now == MASK)[first_of_span].mean() - 0.8) < 0.03
  for row in range(rows):  # each attempt number starts at most one unit
    numbers = out["masked_lm_unit_start"][row][out["masked_lm_unit_start"][row] > 0]
    assert len(set(numbers)) == len(numbers) and numbers.max() <= 40




@pytest.fixture(scope="module")
def wikitext_lines(data_dir):
  with open(f"{data_dir}/wikitext-2/valid.txt", encoding="utf-8") as f:
    lines = [line.strip() for line in f if len(line.strip()) > 40]
  return lines[:1200]


@pytest.mark.parametrize("kind", ["sentencepiece", "bpe"])
def test_whole_word_masking_of_sentencepiece_and_bpe(kind, wikitext_lines, tmp_path):
  """Word starts by fairseq's rule (SentencePiece: the piece starts with U+2581; BPE: it
  decodes to text starting with a space; special pieces such as <unk> always start one),
  whole-word masking as the reference rule."""
  from bert_jax.text import bpe, sentencepiece_vocab
  text = tmp_path / "text.txt"
  text.write_text("\n".join(wikitext_lines) + "\n", encoding="utf-8")
  if kind == "bpe":
    tok = bpe.train_bpe([str(text)], str(tmp_path), vocab_size=600)
    starts_word = [tok.decode([i]).startswith(" ") for i in range(tok.vocab_size)]
  else:
    model = sentencepiece_vocab.train_sentencepiece([str(text)], str(tmp_path / "sp"),
                                                    vocab_size=600, num_threads=1)
    tok = sentencepiece_vocab.SentencePieceTokenizer(model)
    starts_word = [piece.startswith("\u2581") for piece in tok.vocab]
  specials = (tok.pad_id, tok.cls_id, tok.sep_id, tok.mask_id)
  starts_word[tok.unk_id] = True
  reference_continuation = ~np.array(starts_word)
  ids = np.full((300, T), tok.pad_id, np.int32)
  for row, pieces in enumerate(tok.encode(wikitext_lines[:300])):
    pieces = [tok.cls_id, *pieces[:T - 2], tok.sep_id]
    ids[row, :len(pieces)] = pieces
  table = masking.continuation_table_for(tok)
  opts = options(selector="whole_word", continuation_table=table, special_ids=specials,
                 mask_id=tok.mask_id)
  noise, out = _run_with_noise(ids, opts)
  budget = np.minimum(np.maximum(np.round(0.15 * (~np.isin(ids, specials)).sum(1)), 1), P)
  multi_piece_words = 0
  for row in range(len(ids)):
    words = reference_words(ids[row], reference_continuation, specials)
    multi_piece_words += sum(len(w) > 1 for w in words)
    order = sorted(range(len(words)), key=lambda w: -noise[row, words[w][0]])
    want = []
    for w in order:
      if len(want) + len(words[w]) <= budget[row]:
        want += words[w]
    count = int(out["masked_lm_weights"][row].sum())
    assert out["masked_lm_positions"][row, :count].tolist() == sorted(want), row
  assert multi_piece_words > 1000


def test_inspect_unit_lengths_count_words_per_drawn_unit():
  from bert_jax.pretrain import inspect as inspect_lib
  # Row: predictions at 2,3,4 (unit drawn 2nd), 7 (drawn 1st), 9,10 (drawn 3rd); words start
  # at 2, 4, 7, 9 (3 and 10 continue a word).
  word_start = np.zeros((1, 12), bool)
  word_start[0, [2, 4, 7, 9]] = True
  batch = {"masked_lm_positions": np.array([[2, 3, 4, 7, 9, 10, 0]]),
           "masked_lm_weights": np.array([[1, 1, 1, 1, 1, 1, 0]], np.float32),
           "masked_lm_unit_start": np.array([[2, 0, 0, 1, 3, 0, 0]])}
  every, first = inspect_lib.unit_lengths(batch, word_start)
  assert every == [2, 1, 1] and first == [1]
