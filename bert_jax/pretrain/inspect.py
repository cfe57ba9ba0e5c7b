r"""Looks at what the pretraining input produces: decoded examples and statistics.

  python -m bert_jax.pretrain.inspect --config=configs/tiny.py --batches=100 [--json]

Reads config.data (the fields of pipeline.default_data_config()) and takes the first
--batches batches of epoch 0 of the training input (as process 0 of 1): the tf.data
stream's, or with config.data.shards the shard files' (shards.py; no fill_<builder>
numbers then, and no unit lengths: shards mask by token). Without --json it
prints --examples decoded examples, WordPiece by WordPiece, with each prediction shown as
`[MASK:orig]` (now [MASK]), `[new~orig]` (now a random token) or `[=orig]` (kept), then
the statistics. With --json it prints one JSON object, nothing else, with:

  selected_fraction   predictions / eligible (non-special) tokens; ~masked_lm_prob
  mask_fraction       of the predictions, the share now [MASK];      ~mask_token_prob
  random_fraction     the share now another token;                   ~random_token_prob
  kept_fraction       the share left as it was;                      ~the rest
  is_next_fraction    share of IsNext pairs (label 0);               ~1 - random_next_prob
                      (only with next_sentence_labels, i.e. example_builder=nsp_pairs)
  sop_swapped_fraction share of swapped pairs (label 1);            ~0.5
                      (only with sentence_order_labels, i.e. example_builder=sop)
  pair_length_rule    unpacked NSP / SOP pairs: the share of labels that "the first
                      segment is the shorter one" (or its negation, whichever reads more)
                      predicts, the accuracy a sentence head gets from lengths alone;
                      ~0.5 when the lengths carry no cue
  pad_fraction        share of [PAD] positions
  fill_rate           share of real-token positions (1 - pad_fraction)
  examples_per_row    examples in a row: 1, more with packed rows (config.data.packing)
  slots_per_row       packed pair rows only: K, the slots for pairs in a row
                      (config.data.pairs_per_row)
  slot_fill           packed pair rows only: the share of slots holding a pair
                      (examples_per_row / slots_per_row)
  fill_<builder>      every example builder's fill over all of epoch 0's rows of the
                      corpus at this max_seq_length (before batching; the configured one's
                      equals fill_rate up to the dropped remainder), and
  fill_<builder>_packed with config.data.packing=True (pairs: at config.data.pairs_per_row);
                      a builder the corpus cannot feed is left out
  epoch_mask_overlap  the same pairs masked as epoch 0 and as epoch 1: shared positions /
                      positions; static masking gives 1.0, dynamic about masked_lm_prob
  split_word_fraction of the predictions inside words of several pieces, the share
                      whose word is not predicted whole; 0 with masking=whole_word
  partial_word_fraction of all predictions, the share inside a word that is only partly
                      predicted (words per the tokenizer's kind, masking.py)
  unit_length_mean    mean length in words of all the units the selector drew (a token
                      or word: 1; an n-gram: n; a span: its words) as they came out: cut by
                      the budget, by a special token or the row's end, by a unit drawn
                      before (and, the budget being fixed, the units that fit before it
                      runs out are the shorter ones)
  unit_length_max     the longest unit;                                 span <= 10
  drawn_length_mean   the same for each row's first-drawn unit only: a clean sample of the
                      length rule (nothing taken yet, the budget not in reach; only the
                      row's end can cut it);                            ngram 1.64, span 3.78
  drawn_length_N      share of those first units that are N words long (N = 1 .. the
                      longest); ngram: 6/11, 3/11, 2/11; span: 0.2 * 0.8^(N-1) renormalised

  entity_whole_fraction  with span annotations (config.data.spans): of the annotated
  phrase_whole_fraction  entities (phrases) in the rows, the share predicted whole; up to
                      the mask rate with masking=entity (phrase): a unit longer than what
                      is left of a row's budget is skipped, so long ones are masked less
                      often (4-word phrases in 64-token rows: 0.09); near 0 with token
                      masking
  entity_split_fraction  of those with any token predicted, the share only partly
  phrase_split_fraction  predicted; 0 with masking=entity (phrase) (text/spans.py)

A random replacement that happens to equal the original token counts as kept.
"""
import json
import sys

import ml_collections
import numpy as np
from absl import app
from absl import flags

from bert_jax.startup import cli
from bert_jax.startup import config_flag
from bert_jax.pretrain import builders
from bert_jax.pretrain import masking
from bert_jax.pretrain import pipeline
from bert_jax.pretrain import shards
from bert_jax.text import spans as spans_lib
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import make_tokenizer

if __name__ == "__main__":  # flags exist only when run as a program
  _CONFIG = config_flag.define_config("config", "The config; reads config.data.")
  _BATCHES = flags.DEFINE_integer("batches", 50, "How many batches of epoch 0 to look at.")
  _EXAMPLES = flags.DEFINE_integer("examples", 2, "Decoded examples to print (not with --json).")
  _JSON = flags.DEFINE_bool("json", False, "Print one JSON object of statistics only.")


def original_ids(batch: dict[str, np.ndarray]) -> np.ndarray:
  """The input_ids [B, T] before masking: the predictions' ids put back."""
  ids = batch["input_ids"].copy()
  rows, slots = np.nonzero(batch["masked_lm_weights"] > 0)
  ids[rows, batch["masked_lm_positions"][rows, slots]] = batch["masked_lm_ids"][rows, slots]
  return ids


def word_starts(batch: dict[str, np.ndarray], eligible: np.ndarray,
                continuation: np.ndarray) -> np.ndarray:
  """bool [B, T]: the eligible pieces that start a word (masking.py's rule)."""
  follows_eligible = np.pad(eligible[:, :-1], ((0, 0), (1, 0)))
  return eligible & ~(continuation[original_ids(batch)] & follows_eligible)


def unit_lengths(batch: dict[str, np.ndarray], word_start: np.ndarray
                 ) -> tuple[list[int], list[int]]:
  """(words in every unit the selector drew (batch["masked_lm_unit_start"]), words in
  each row's first-drawn unit)."""
  every, first = [], []
  starts_word = np.take_along_axis(word_start, batch["masked_lm_positions"], axis=1)  # [B, P]
  for row, unit in enumerate(batch["masked_lm_unit_start"]):
    count = int((batch["masked_lm_weights"][row] > 0).sum())
    begins = np.flatnonzero(unit[:count])
    lengths = [max(1, int(starts_word[row, begin:end].sum()))
               for begin, end in zip(begins, [*begins[1:], count])]
    every += lengths
    if lengths:
      first.append(lengths[int(unit[begins].argmin())])
  return every, first


def split_word_counts(batch: dict[str, np.ndarray], eligible: np.ndarray,
                      continuation: np.ndarray) -> tuple[int, int]:
  """(predictions in multi-piece words, of those in words not predicted whole)."""
  word_start = word_starts(batch, eligible, continuation)
  word_index = np.cumsum(word_start, axis=1) - 1                                   # [B, T]
  predicted = np.zeros_like(eligible)
  rows, slots = np.nonzero(batch["masked_lm_weights"] > 0)
  predicted[rows, batch["masked_lm_positions"][rows, slots]] = True
  in_multi, split = 0, 0
  for row in range(len(eligible)):
    words = word_index[row][eligible[row]]
    size = np.bincount(words)
    chosen = np.bincount(words, weights=predicted[row][eligible[row]], minlength=len(size))
    multi = size > 1
    in_multi += int(chosen[multi].sum())
    split += int(chosen[multi & (chosen < size)].sum())
  return in_multi, split


def annotated_unit_counts(batch: dict[str, np.ndarray], eligible: np.ndarray) -> dict[str, int]:
  """Per kind of span (text/spans.py): annotated units in the rows, those predicted whole
  and those predicted in part; {} without span tags."""
  if "span_tags" not in batch:
    return {}
  predicted = np.zeros_like(eligible)
  rows, slots = np.nonzero(batch["masked_lm_weights"] > 0)
  predicted[rows, batch["masked_lm_positions"][rows, slots]] = True
  counts = {}
  for kind in spans_lib.SPAN_KINDS:
    code = np.where(eligible, spans_lib.kind_code(batch["span_tags"], kind), spans_lib.OUTSIDE)
    before = np.pad(code[:, :-1], ((0, 0), (1, 0)))
    starts = (code == spans_lib.BEGIN) | ((code == spans_lib.INSIDE)
                                           & (before == spans_lib.OUTSIDE))
    unit = np.where(code != spans_lib.OUTSIDE, np.cumsum(starts.reshape(-1)).reshape(
        code.shape), 0).reshape(-1)  # a number per unit over the batch, 0 outside
    size = np.bincount(unit)[1:]
    hits = np.bincount(unit, weights=predicted.reshape(-1), minlength=len(size) + 1)[1:]
    counts.update({f"{kind}_units": len(size), f"{kind}_whole": int((hits == size).sum()),
                   f"{kind}_partial": int(((hits > 0) & (hits < size)).sum())})
  return counts


def batch_counts(batch: dict[str, np.ndarray], special_ids, mask_id: int,
                 continuation: np.ndarray) -> dict[str, int]:
  """Counts behind the statistics, for one batch; continuation: bool [V] "##" pieces."""
  is_prediction = batch["masked_lm_weights"] > 0                                   # [B, P]
  now = np.take_along_axis(batch["input_ids"], batch["masked_lm_positions"], axis=1)
  to_mask = is_prediction & (now == mask_id)
  kept = is_prediction & (now == batch["masked_lm_ids"])
  eligible = (batch["attention_mask"] > 0) & ~np.isin(original_ids(batch), special_ids)
  in_multi, split = split_word_counts(batch, eligible, continuation)
  units = {}
  if "masked_lm_unit_start" in batch:
    every, first = unit_lengths(batch, word_starts(batch, eligible, continuation))
    units = {f"{kind}_units_of_{n}": int(c) for kind, lengths in (("every", every),
                                                                  ("first", first))
             for n, c in enumerate(np.bincount(lengths)) if n > 0}
  sentence_counts = {}
  real = batch.get("example_mask")  # packed pairs: [B, K], the slots that hold a pair
  real = np.ones(len(batch["input_ids"])) if real is None else real
  if "next_sentence_labels" in batch:
    labels = batch["next_sentence_labels"]
    sentence_counts = {"is_next": int(((labels == 0) * real).sum())}
  if "sentence_order_labels" in batch:
    labels = batch["sentence_order_labels"]
    sentence_counts = {"swapped": int(((labels == 1) * real).sum())}
  if "example_mask" in batch:
    sentence_counts["slots"] = int(batch["example_mask"].size)
  elif sentence_counts:  # unpacked pairs: [CLS] A [SEP] (type 0) B [SEP] (type 1)
    real_token = batch["attention_mask"] > 0
    first = (real_token & (batch["token_type_ids"] == 0)).sum(-1) - 2
    second = (real_token & (batch["token_type_ids"] == 1)).sum(-1) - 1
    sentence_counts["shorter_first_is_label_0"] = int(((first < second) == (labels == 0)).sum())
  return {
      **sentence_counts,
      **units,
      **annotated_unit_counts(batch, eligible),
      "in_multi_piece_words": in_multi,
      "split_words": split,
      "eligible": int(eligible.sum()),
      "selected": int(is_prediction.sum()),
      "mask": int(to_mask.sum()),
      "kept": int(kept.sum()),
      "random": int((is_prediction & ~to_mask & ~kept).sum()),
      "pad": int((batch["attention_mask"] == 0).sum()),
      "positions": int(batch["attention_mask"].size),
      "rows": len(batch["attention_mask"]),
      "examples": int(batch["segment_ids"].max(-1).sum() if "segment_ids" in batch
                      else len(batch["attention_mask"])),
  }


def mask_overlap(first: dict[str, np.ndarray], second: dict[str, np.ndarray]) -> tuple[int, int]:
  """(positions predicted in both, positions predicted in `first`) for the same pairs."""
  shared, total = 0, 0
  for row in range(len(first["masked_lm_positions"])):
    a = set(first["masked_lm_positions"][row][first["masked_lm_weights"][row] > 0].tolist())
    b = set(second["masked_lm_positions"][row][second["masked_lm_weights"][row] > 0].tolist())
    shared, total = shared + len(a & b), total + len(a)
  return shared, total


def statistics(train_input: pipeline.PretrainingInput, num_batches: int, special_ids,
               mask_id: int, continuation: np.ndarray
               ) -> tuple[dict[str, float], list[dict[str, np.ndarray]]]:
  """The module docstring's statistics over the first num_batches of epoch 0."""
  steps = train_input.steps_in_epoch(0)
  if num_batches > steps:
    print(f"inspect: epoch 0 has {steps} batches; looking at all of them", file=sys.stderr)
    num_batches = steps
  as_epoch_0 = train_input.epoch_batches(0)
  as_epoch_1 = train_input.epoch_batches(0, mask_epoch=1)
  totals, shared, predicted, batches = {}, 0, 0, []
  for _ in range(num_batches):
    batch, remasked = next(as_epoch_0), next(as_epoch_1)
    for key, count in batch_counts(batch, special_ids, mask_id, continuation).items():
      totals[key] = totals.get(key, 0) + count
    both, total = mask_overlap(batch, remasked)
    shared, predicted = shared + both, predicted + total
    batches.append(batch)
  selected = max(totals["selected"], 1)
  sentence_stats = {}
  if "is_next" in totals:
    sentence_stats["is_next_fraction"] = totals["is_next"] / totals["examples"]
  if "swapped" in totals:
    sentence_stats["sop_swapped_fraction"] = totals["swapped"] / totals["examples"]
  if "shorter_first_is_label_0" in totals:
    agree = totals["shorter_first_is_label_0"] / totals["examples"]
    sentence_stats["pair_length_rule"] = max(agree, 1.0 - agree)
  if "slots" in totals:  # packed pairs: K slots per row, the share holding a pair
    sentence_stats["slots_per_row"] = totals["slots"] / totals["rows"]
    sentence_stats["slot_fill"] = totals["examples"] / totals["slots"]
  unit_stats = {}
  every, first = ({int(key.split("_")[-1]): count for key, count in totals.items()
                   if key.startswith(f"{kind}_units_of_")} for kind in ("every", "first"))
  if every:
    longest, total = max(first), sum(first.values())
    unit_stats = {
        "unit_length_mean": sum(n * c for n, c in every.items()) / sum(every.values()),
        "unit_length_max": float(max(every)),
        "drawn_length_mean": sum(n * c for n, c in first.items()) / total,
        **{f"drawn_length_{n}": first.get(n, 0) / total for n in range(1, longest + 1)}}
  for kind in spans_lib.SPAN_KINDS:
    if f"{kind}_units" in totals:
      whole, partial = totals[f"{kind}_whole"], totals[f"{kind}_partial"]
      unit_stats[f"{kind}_whole_fraction"] = whole / max(totals[f"{kind}_units"], 1)
      unit_stats[f"{kind}_split_fraction"] = partial / max(whole + partial, 1)
  return {
      "selected_fraction": totals["selected"] / max(totals["eligible"], 1),
      "mask_fraction": totals["mask"] / selected,
      "random_fraction": totals["random"] / selected,
      "kept_fraction": totals["kept"] / selected,
      **sentence_stats,
      "pad_fraction": totals["pad"] / totals["positions"],
      "fill_rate": 1.0 - totals["pad"] / totals["positions"],
      "examples_per_row": totals["examples"] / totals["rows"],
      "epoch_mask_overlap": shared / max(predicted, 1),
      "split_word_fraction": totals["split_words"] / max(totals["in_multi_piece_words"], 1),
      "partial_word_fraction": totals["split_words"] / selected,
      **unit_stats,
  }, batches


def builder_fill_rates(corpora, data_config, special: builders.SpecialIds) -> dict[str, float]:
  """{fill_<builder>[_packed]: real tokens / positions} of every builder's epoch-0 rows
  over `corpora` (the shards' TokenizedCorpus), at data_config.max_seq_length."""
  fills = {}
  for name, builder in builders.BUILDERS.items():
    for packing in (False, True):
      data = ml_collections.ConfigDict(data_config.to_dict())
      data.example_builder, data.packing = name, packing
      try:
        options = builder.options(data)
        for corpus in corpora:
          builder.check_corpus(corpus)
      except ValueError:  # it cannot pack, or the corpus cannot feed it (CorpusError)
        continue
      real = positions = 0
      for corpus in corpora:
        instances = builder.instances(corpus, options, np.random.default_rng(data.seed))
        rows = builder.rows(instances, corpus, options, special)
        real, positions = real + int(rows.lengths.sum()), positions + rows.input_ids.size
      fills[f"fill_{name}" + ("_packed" if packing else "")] = real / max(positions, 1)
  return fills


def render_example(batch: dict[str, np.ndarray], row: int, tokenizer) -> str:
  """One example as WordPieces, predictions annotated (module docstring)."""
  vocab, now = tokenizer.vocab, batch["input_ids"][row]
  notes = {}
  for position, original, weight in zip(batch["masked_lm_positions"][row],
                                        batch["masked_lm_ids"][row],
                                        batch["masked_lm_weights"][row]):
    if weight > 0:
      if now[position] == tokenizer.mask_id:
        notes[position] = f"[MASK:{vocab[original]}]"
      elif now[position] == original:
        notes[position] = f"[={vocab[original]}]"
      else:
        notes[position] = f"[{vocab[now[position]]}~{vocab[original]}]"
  length = int(batch["attention_mask"][row].sum())
  words = [notes.get(i, vocab[now[i]]) for i in range(length)]
  names = {"next_sentence_labels": ("IsNext", "NotNext"),
           "sentence_order_labels": ("in order", "swapped")}
  label = ""
  for field, (zero, one) in names.items():
    if field in batch:  # one label per row, or per slot of a packed pair row
      slots = np.atleast_1d(batch[field][row])
      real = np.atleast_1d(batch["example_mask"][row] > 0 if "example_mask" in batch else True)
      label = " + ".join(zero if value == 0 else one for value in slots[real]) + ", "
  return f"({label}{length} tokens + {len(now) - length} pad) " + " ".join(words)


def main(argv):
  del argv
  if _CONFIG.value is None:
    raise app.UsageError("--config is required")
  data_config = _CONFIG.value.data
  family = _CONFIG.value.get("model", {}).get("family", "bert")
  tokenizer = make_tokenizer(data_config, model_dir=_CONFIG.value.get("init_from", ""),
                             kinds=tokenizer_kinds(family))
  from_shards = bool(data_config.get("shards"))
  if from_shards:  # the shard files' rows (shards.py), masked as training masks them
    train_input = shards.ShardInput(data_config.shards, data_config, tokenizer)
  else:
    train_input, _ = pipeline.make_inputs(data_config, tokenizer, span_fields=True)
  special_ids = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
  continuation = masking.continuation_table_for(tokenizer)
  stats, batches = statistics(train_input, _BATCHES.value, special_ids, tokenizer.mask_id,
                              continuation)
  if not from_shards:  # the builders' fill needs the tokenized corpus
    stats.update(builder_fill_rates(
        list(train_input.corpora.values()), data_config,
        builders.SpecialIds(pad=tokenizer.pad_id, cls=tokenizer.cls_id, sep=tokenizer.sep_id)))
  if _JSON.value:
    print(json.dumps({key: round(value, 4) for key, value in stats.items()}))
    return
  if from_shards:
    print(f"shards: {train_input.num_rows} rows in {len(train_input.paths)} file(s); ", end="")
  else:
    corpora = train_input.corpora.values()
    print(f"corpus: {sum(c.num_documents for c in corpora)} documents, "
          f"{sum(c.num_sentences for c in corpora)} sentences, "
          f"{sum(c.num_tokens for c in corpora)} tokens in {len(corpora)} data shard(s); ",
          end="")
  print(f"epoch 0: {train_input.steps_in_epoch(0)} batches of {train_input.global_batch_size}")
  for row in range(min(_EXAMPLES.value, len(batches[0]["input_ids"]))):
    print(f"\nexample {row} " + render_example(batches[0], row, tokenizer))
  print()
  for key, value in stats.items():
    print(f"{key:20s} {value:.4f}")


if __name__ == "__main__":
  cli.run(main)
