"""The assembled pretraining input: batch contract, resumption, epochs, shards, errors."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from bert_jax.text import corpus as corpus_lib
from bert_jax.pretrain import inspect as inspect_lib
from bert_jax.pretrain import masking
from bert_jax.text import prepare
from bert_jax.pretrain import pipeline as pretraining
from bert_jax.text.tokenizers import make_tokenizer
from bert_jax.text.wordpiece import WordPieceTokenizer

KEYS = {"input_ids": np.int32, "token_type_ids": np.int32, "attention_mask": np.int32,
        "masked_lm_positions": np.int32, "masked_lm_ids": np.int32,
        "masked_lm_weights": np.float32, "next_sentence_labels": np.int32}
WORDS = ("the a cat dog sat on mat ran fast slow house tree river bird sings loud quiet "
         "green blue red big small old new city road car train boat sea sky sun rain "
         "snow wind hill stone bread milk water fire light night day morning").split()


def synthetic_documents(num_documents, seed=0):
  rng = np.random.default_rng(seed)
  return [[" ".join(rng.choice(WORDS, rng.integers(4, 15))).capitalize() + "."
           for _ in range(rng.integers(3, 12))] for _ in range(num_documents)]


def write_corpus(path, documents):
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join("\n".join(sentences) for sentences in documents) + "\n")
  return str(path)


@pytest.fixture(scope="module")
def tokenizer(vocab_path):
  return WordPieceTokenizer(vocab_path)


@pytest.fixture(scope="module")
def corpus_file(tmp_path_factory):
  return write_corpus(tmp_path_factory.mktemp("corpus") / "train.txt", synthetic_documents(120))


def data_config(vocab_path, train_files, **overrides):
  config = pretraining.default_data_config()
  config.update(dict(train_files=tuple(train_files), vocab_path=vocab_path,
                     max_seq_length=64, max_predictions_per_seq=10, batch_size=8, seed=3))
  config.update(overrides)
  return config


@pytest.fixture(scope="module")
def small_corpus(vocab_path, corpus_file, tokenizer):
  config = data_config(vocab_path, [corpus_file])
  return pretraining.load_corpora(config, tokenizer)[0][0]


def make_input(small_corpus, tokenizer, vocab_path, corpus_file, **overrides):
  process = {k: overrides.pop(k) for k in ("process_index", "process_count") if k in overrides}
  config = data_config(vocab_path, [corpus_file], **{"num_shards": 1, **overrides})
  return pretraining.PretrainingInput({0: small_corpus}, tokenizer, config, **process)


@pytest.fixture
def train_input(small_corpus, tokenizer, vocab_path, corpus_file):
  return make_input(small_corpus, tokenizer, vocab_path, corpus_file)


def take(iterator, count):
  return [next(iterator) for _ in range(count)]


def assert_batches_equal(first, second):
  assert len(first) == len(second)
  for a, b in zip(first, second):
    for key in KEYS:
      np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_batch_contract(train_input, tokenizer):
  batch = next(train_input)
  assert set(batch) == set(KEYS)
  for key, dtype in KEYS.items():
    assert batch[key].dtype == dtype, key
  assert batch["input_ids"].shape == batch["token_type_ids"].shape == (8, 64)
  assert batch["masked_lm_positions"].shape == batch["masked_lm_weights"].shape == (8, 10)
  assert batch["next_sentence_labels"].shape == (8,)
  assert set(np.unique(batch["next_sentence_labels"])) <= {0, 1}
  ids = inspect_lib.original_ids(batch)
  for row in range(8):
    length = int(batch["attention_mask"][row].sum())
    np.testing.assert_array_equal(batch["attention_mask"][row], [1] * length + [0] * (64 - length))
    assert ids[row, 0] == tokenizer.cls_id and (ids[row, length:] == tokenizer.pad_id).all()
    separators = np.flatnonzero(ids[row] == tokenizer.sep_id)
    assert len(separators) == 2 and separators[1] == length - 1
    expected_types = np.zeros(64, np.int32)
    expected_types[separators[0] + 1:length] = 1
    np.testing.assert_array_equal(batch["token_type_ids"][row], expected_types)


def test_specials_and_padding_never_masked(train_input, tokenizer):
  specials = [tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id]
  for batch in take(train_input, 10):
    chosen = batch["masked_lm_weights"] > 0
    positions = batch["masked_lm_positions"][chosen]
    rows = np.nonzero(chosen)[0]
    assert not np.isin(batch["masked_lm_ids"][chosen], specials).any()
    assert (batch["attention_mask"][rows, positions] == 1).all()
    assert (positions > 0).all()


def test_resume_from_state_gives_identical_batches(small_corpus, tokenizer, vocab_path,
                                                   corpus_file):
  first = make_input(small_corpus, tokenizer, vocab_path, corpus_file)
  steps = first.steps_in_epoch(0)
  states, batches = [], []
  for _ in range(steps + 5):  # crosses into epoch 1
    states.append(first.state())
    batches.append(next(first))
  assert states[steps] == {"seed": 3, "batch_size": 8, "num_shards": 1, "shards": {"0": {
      "epoch": 1, "step_in_epoch": 0, "tokens": small_corpus.num_tokens}}}
  for resume_at in (3, steps - 1, steps + 2):
    resumed = make_input(small_corpus, tokenizer, vocab_path, corpus_file)
    resumed.restore(json.loads(json.dumps(states[resume_at])))  # survives a JSON round trip
    assert_batches_equal(take(resumed, len(batches) - resume_at), batches[resume_at:])
  with pytest.raises(ValueError, match="seed=3"):
    make_input(small_corpus, tokenizer, vocab_path, corpus_file, seed=4).restore(states[1])
  with pytest.raises(ValueError, match="num_shards=2, this input has 1"):
    make_input(small_corpus, tokenizer, vocab_path, corpus_file).restore(
        {**states[1], "num_shards": 2})
  beyond = make_input(small_corpus, tokenizer, vocab_path, corpus_file)
  beyond.restore({**states[0], "shards": {"0": {**states[0]["shards"]["0"],
                                                "step_in_epoch": steps + 1}}})
  with pytest.raises(ValueError, match="past its"):
    next(beyond)


def test_epochs_redraw_pairs_and_masks(train_input):
  epoch_0 = list(train_input.epoch_batches(0))
  epoch_1 = list(train_input.epoch_batches(1))
  assert not np.array_equal(epoch_0[0]["input_ids"], epoch_1[0]["input_ids"])
  assert_batches_equal(epoch_0, list(train_input.epoch_batches(0)))
  remasked = list(train_input.epoch_batches(0, mask_epoch=1))
  shared = total = 0
  for a, b in zip(epoch_0, remasked):
    shared_batch, total_batch = inspect_lib.mask_overlap(a, b)
    shared, total = shared + shared_batch, total + total_batch
    np.testing.assert_array_equal(inspect_lib.original_ids(a), inspect_lib.original_ids(b))
  assert shared / total < 0.3


def test_process_shards_concatenate_to_the_global_batch(small_corpus, tokenizer, vocab_path,
                                                        corpus_file):
  whole = make_input(small_corpus, tokenizer, vocab_path, corpus_file)
  shards = [make_input(small_corpus, tokenizer, vocab_path, corpus_file,
                       process_index=p, process_count=2) for p in range(2)]
  assert shards[1].steps_in_epoch(0) == whole.steps_in_epoch(0)
  for _ in range(3):
    global_batch, local = next(whole), [next(shard) for shard in shards]
    assert local[0]["input_ids"].shape == (4, 64)
    for key in KEYS:
      np.testing.assert_array_equal(np.concatenate([l[key] for l in local]), global_batch[key])
  with pytest.raises(ValueError, match="not divisible"):
    make_input(small_corpus, tokenizer, vocab_path, corpus_file, process_count=3)


def sharded_inputs(vocab_path, corpus_file, tokenizer, process_count, **overrides):
  config = data_config(vocab_path, [corpus_file], **{"num_shards": 4, **overrides})
  return [pretraining.make_inputs(config, process_index=p, process_count=process_count,
                                  tokenizer=tokenizer)[0] for p in range(process_count)]


def global_batches(inputs, steps):
  return [{key: np.concatenate([b[key] for b in local]) for key in KEYS}
          for local in (([next(i) for i in inputs]) for _ in range(steps))]


@pytest.mark.slow
def test_data_shards_give_one_global_stream_for_any_process_count(vocab_path, corpus_file,
                                                                  tokenizer):
  one = sharded_inputs(vocab_path, corpus_file, tokenizer, 1)
  fresh = {}  # process count -> its inputs, not yet read from
  # Each process tokenizes only its shards' documents (ids % 4), and all of them together
  # are the corpus once.
  for process_count in (2, 4):
    inputs = fresh[process_count] = sharded_inputs(vocab_path, corpus_file, tokenizer,
                                                   process_count)
    ids = [c.document_ids for i in inputs for c in i.corpora.values()]
    np.testing.assert_array_equal(np.sort(np.concatenate(ids)),
                                  np.sort(np.concatenate([c.document_ids for c in
                                                          one[0].corpora.values()])))
    for p, i in enumerate(inputs):
      assert sorted(i.corpora) == list(range(p * 4 // process_count,
                                             (p + 1) * 4 // process_count))
      for shard, c in i.corpora.items():
        assert (c.document_ids % 4 == shard).all()
  # Every shard crosses into its epoch 1 (each epoch is a new tf.data pipeline per shard, so
  # the test's time is mostly building them: one crossing, not two).
  steps = max(stream.steps_in_epoch(0) for stream in one[0]._streams) + 3
  expected = global_batches(one, steps)
  for process_count in (2, 4, 8):  # 8 processes: two read each shard, a slice each
    inputs = fresh.get(process_count) or sharded_inputs(vocab_path, corpus_file, tokenizer,
                                                        process_count)
    assert_batches_equal(global_batches(inputs, steps), expected)


@pytest.mark.slow
def test_resume_a_sharded_stream_on_another_process_count(vocab_path, corpus_file, tokenizer):
  two = sharded_inputs(vocab_path, corpus_file, tokenizer, 2)
  first = global_batches(two, 7)
  states = [i.state() for i in two]
  assert set(states[0]["shards"]) == {"0", "1"} and set(states[1]["shards"]) == {"2", "3"}
  merged = {**states[0], "shards": {**states[0]["shards"], **states[1]["shards"]}}
  continued = global_batches(two, 9)
  one = sharded_inputs(vocab_path, corpus_file, tokenizer, 1)
  one[0].restore(json.loads(json.dumps(merged)))
  assert_batches_equal(global_batches(one, 9), continued)
  assert first  # (the 7 batches before the save were consumed)
  with pytest.raises(ValueError, match="no position for shard 2"):
    one[0].restore(states[0])


def test_sharding_errors_name_the_shard_and_field(vocab_path, corpus_file, tokenizer):
  with pytest.raises(ValueError, match="num_shards=3 and 2 processes"):
    sharded_inputs(vocab_path, corpus_file, tokenizer, 2, num_shards=3)
  with pytest.raises(corpus_lib.CorpusError, match="data shard 20 of 100: .*single document"):
    make_in = data_config(vocab_path, [corpus_file], num_shards=100, batch_size=100)
    pretraining.make_inputs(make_in, tokenizer=tokenizer)


def _statistics(train_input, tokenizer):
  specials = (tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id, tokenizer.mask_id)
  continuation = masking.continuation_table_from_vocab(list(tokenizer.vocab))
  stats, _ = inspect_lib.statistics(train_input, 1000, specials, tokenizer.mask_id,
                                    continuation)
  return stats


def test_statistics_within_tolerance(train_input, tokenizer):
  stats = _statistics(train_input, tokenizer)
  assert abs(stats["selected_fraction"] - 0.15) < 0.01
  assert abs(stats["mask_fraction"] - 0.8) < 0.04
  assert abs(stats["random_fraction"] - 0.1) < 0.04
  assert abs(stats["kept_fraction"] - 0.1) < 0.04
  assert abs(stats["is_next_fraction"] - 0.5) < 0.1
  assert stats["epoch_mask_overlap"] < 0.3


# Words of several WordPieces in BERT's uncased vocab (e.g. "un ##bel ##ie ##va ##bly").
_LONG_WORDS = ["unbelievably", "hyperparameters", "tokenization", "backpropagation",
               "misunderstandings", "overcomplicated", "photosynthesis", "reimplementing"]


def test_whole_word_masking_in_the_pipeline(vocab_path, tmp_path, tokenizer):
  rng = np.random.default_rng(1)
  documents = [[" ".join(rng.choice(WORDS + _LONG_WORDS, rng.integers(4, 15))) + "."
                for _ in range(rng.integers(3, 12))] for _ in range(120)]
  corpus = write_corpus(tmp_path / "train.txt", documents)
  stats = {}
  for whole_word in (False, True):
    config = data_config(vocab_path, [corpus], masking="whole_word" if whole_word else "token")
    stats[whole_word] = _statistics(pretraining.make_inputs(config, tokenizer=tokenizer)[0],
                                    tokenizer)
  assert stats[False]["split_word_fraction"] > 0.5  # piece masking splits most long words
  assert stats[True]["split_word_fraction"] == 0.0
  assert abs(stats[True]["selected_fraction"] - 0.15) < 0.015
  assert abs(stats[True]["mask_fraction"] - 0.8) < 0.04
  assert stats[True]["epoch_mask_overlap"] < 0.3


def test_whole_word_masking_needs_wordpiece_continuations(vocab_path, corpus_file, tmp_path):
  no_continuations = tmp_path / "vocab.txt"
  with open(vocab_path) as f:
    no_continuations.write_text("".join(line for line in f if not line.startswith("##")))
  config = data_config(str(no_continuations), [corpus_file], masking="whole_word")
  with pytest.raises(ValueError, match="masking='whole_word' needs word boundaries"):
    pretraining.make_inputs(config, tokenizer=WordPieceTokenizer(str(no_continuations)))


def test_held_out_documents_make_a_fixed_eval_input(vocab_path, corpus_file, tokenizer):
  config = data_config(vocab_path, [corpus_file], eval_held_out_docs=40)
  train_input, eval_input = pretraining.make_inputs(config, tokenizer=tokenizer)
  train_corpus, eval_corpus = train_input.corpora[0], eval_input.corpora[0]
  assert train_corpus.num_documents == 80 and eval_corpus.num_documents == 40
  assert not set(train_corpus.document_ids) & set(eval_corpus.document_ids)
  assert_batches_equal(list(eval_input.epoch_batches(0)), list(eval_input.epoch_batches(0)))
  train_tokens = set(map(bytes, (train_corpus.document_sentences(d)[0].tobytes()
                                 for d in range(80))))
  eval_tokens = set(map(bytes, (eval_corpus.document_sentences(d)[0].tobytes()
                                for d in range(40))))
  assert not train_tokens & eval_tokens
  config.eval_held_out_docs = 119
  with pytest.raises(corpus_lib.CorpusError, match="leaves fewer than 2"):
    pretraining.load_corpora(config, tokenizer)


def test_tfds_mock_data_path(vocab_path, tokenizer):
  import tensorflow_datasets as tfds
  texts = [" ".join(document) for document in synthetic_documents(60, seed=1)]

  def as_dataset_fn(self, split, shuffle_files=False, **kwargs):
    del self, split, shuffle_files, kwargs
    return tf.data.Dataset.from_tensor_slices({"text": texts, "title": ["t"] * len(texts)})
  config = data_config(vocab_path, [], tfds_name="wikipedia/20230601.en")
  with tfds.testing.mock_data(as_dataset_fn=as_dataset_fn):
    train_input, _ = pretraining.make_inputs(config, tokenizer=tokenizer)
  assert train_input.corpora[0].num_documents == 60
  assert train_input.corpora[0].num_sentences == sum(len(d) for d in synthetic_documents(60, seed=1))
  batch = next(train_input)
  assert batch["input_ids"].shape == (8, 64) and set(batch) == set(KEYS)


# ------------------------------------------------------------------ bad input
def test_missing_vocab_names_the_file(tmp_path, corpus_file):
  config = data_config(str(tmp_path / "nope" / "vocab.txt"), [corpus_file])
  with pytest.raises(FileNotFoundError, match="nope/vocab.txt"):
    pretraining.make_inputs(config, make_tokenizer(config))


@pytest.mark.parametrize("content, message", [
    (b"", "empty corpus.*bad.txt"),
    (b"One sentence.\n\nAnother one.\n\nA third.\n", "bad.txt has a single sentence"),
    (b"Fine.\nOkay.\n\nBroken \xff byte.\nMore.\n", r"bad.txt:4: invalid UTF-8"),
    (b"Just.\nOne.\nDocument.\n", "bad.txt holds a single document"),
])
def test_bad_corpora_are_one_clear_error(tmp_path, vocab_path, tokenizer, content, message):
  path = tmp_path / "bad.txt"
  path.write_bytes(content)
  config = data_config(vocab_path, ["bad.txt"], data_dir=str(tmp_path))
  with pytest.raises(corpus_lib.CorpusError, match=message):
    pretraining.make_inputs(config, tokenizer=tokenizer)


def test_config_errors(tmp_path, vocab_path, tokenizer, corpus_file):
  with pytest.raises(corpus_lib.CorpusError, match="names no text"):
    pretraining.make_inputs(data_config(vocab_path, []), tokenizer=tokenizer)
  with pytest.raises(corpus_lib.CorpusError, match="do not fill one batch of 4096"):
    pretraining.make_inputs(data_config(vocab_path, [corpus_file], batch_size=4096),
                            tokenizer=tokenizer)[0].steps_in_epoch(0)


def test_tokenized_corpus_cache(tmp_path, vocab_path, corpus_file, tokenizer):
  config = data_config(vocab_path, [corpus_file], cache_dir=str(tmp_path / "cache"))
  built, _ = pretraining.load_corpora(config, tokenizer)
  assert len(os.listdir(tmp_path / "cache")) == 1
  cached, _ = pretraining.load_corpora(config, tokenizer)
  built, cached = built[0], cached[0]
  np.testing.assert_array_equal(built.token_ids, cached.token_ids)
  np.testing.assert_array_equal(built.document_starts, cached.document_starts)


# ------------------------------------------------------------------ the real corpus
@pytest.mark.slow
def test_inspect_cli_on_real_text(data_dir, vocab_path, tmp_path):
  """Bounded real-corpus check through the CLI: WikiText-2 valid + inaugural addresses."""
  corpus_path = str(tmp_path / "real.txt")
  prepare.prepare(["wikitext-2/valid.txt", "nltk_corpora/inaugural.zip"], corpus_path, data_dir)
  config_path = tmp_path / "config.py"
  config_path.write_text(
      "import ml_collections\nfrom bert_jax.pretrain import pipeline as pretraining\n"
      "def get_config():\n"
      "  config = ml_collections.ConfigDict()\n"
      "  config.data = pretraining.default_data_config()\n"
      f"  config.data.train_files = ({corpus_path!r},)\n"
      f"  config.data.vocab_path = {vocab_path!r}\n"
      "  return config\n")
  result = subprocess.run(
      [sys.executable, "-m", "bert_jax.pretrain.inspect", f"--config={config_path}",
       "--batches=120", "--json"], capture_output=True, text=True, check=True)
  stats = json.loads(result.stdout)
  assert set(stats) == {"selected_fraction", "mask_fraction", "random_fraction",
                        "kept_fraction", "is_next_fraction", "pair_length_rule", "pad_fraction",
                        "epoch_mask_overlap", "split_word_fraction", "partial_word_fraction",
                        "unit_length_mean", "unit_length_max", "drawn_length_mean",
                        "drawn_length_1", "fill_rate", "examples_per_row", "fill_nsp_pairs",
                        "fill_nsp_pairs_packed", "fill_sop", "fill_sop_packed",
                        "fill_sop_equal_lengths", "fill_sop_equal_lengths_packed",
                        "fill_full_sentences", "fill_full_sentences_packed",
                        "fill_doc_sentences", "fill_doc_sentences_packed",
                        "fill_token_stream"}
  assert stats["examples_per_row"] == 1.0
  assert 0.5 <= stats["pair_length_rule"] < 0.55, stats  # NSP pairs: lengths carry no cue
  assert abs(stats["fill_rate"] - stats["fill_nsp_pairs"]) < 0.02
  assert stats["fill_full_sentences_packed"] > max(0.95, stats["fill_full_sentences"])
  assert stats["fill_nsp_pairs_packed"] > max(0.95, stats["fill_nsp_pairs"])
  assert stats["fill_sop_packed"] > max(0.95, stats["fill_sop"])
  # Equal lengths leave rows shorter; packed, the pairs share them.
  assert stats["fill_sop_equal_lengths"] < stats["fill_sop"]
  assert stats["fill_sop_equal_lengths_packed"] > max(0.95, stats["fill_sop_equal_lengths"])
  assert stats["fill_token_stream"] > 0.99
  assert stats["unit_length_max"] == stats["drawn_length_1"] == 1.0  # token masking
  assert abs(stats["selected_fraction"] - 0.15) < 0.01
  assert abs(stats["mask_fraction"] - 0.8) < 0.02
  assert abs(stats["random_fraction"] - 0.1) < 0.02
  assert abs(stats["kept_fraction"] - 0.1) < 0.02
  assert abs(stats["is_next_fraction"] - 0.5) < 0.03
  assert stats["split_word_fraction"] > 0.5  # real text has multi-piece words
  assert stats["epoch_mask_overlap"] < 0.3


def test_static_masking_repeats_dupe_factor_versions(small_corpus, tokenizer, vocab_path,
                                                     corpus_file):
  """dupe_factor=2: epochs 0 and 2 are the same batches, 0 and 1 differ (dynamic: all do)."""
  static = make_input(small_corpus, tokenizer, vocab_path, corpus_file, dupe_factor=2)
  first = [next(static.epoch_batches(epoch)) for epoch in range(3)]
  for key in KEYS:
    np.testing.assert_array_equal(first[0][key], first[2][key])
  assert not np.array_equal(first[0]["masked_lm_positions"], first[1]["masked_lm_positions"])
  dynamic = make_input(small_corpus, tokenizer, vocab_path, corpus_file)
  assert not np.array_equal(next(dynamic.epoch_batches(0))["input_ids"],
                            next(dynamic.epoch_batches(2))["input_ids"])
  # Static masking with one version: the same pairs get the same masks every epoch.
  once = make_input(small_corpus, tokenizer, vocab_path, corpus_file, dupe_factor=1)
  stats = _statistics(once, tokenizer)
  assert stats["epoch_mask_overlap"] == 1.0


@pytest.mark.parametrize("rate, split", [
    (0.15, (1.0, 0.0)), (0.15, (0.8, 0.0)), (0.15, (0.8, 0.2)), (0.15, (0.0, 0.2)),
    (0.15, (0.0, 0.0)), (0.30, (0.8, 0.1)), (0.15, (0.85, 0.0))])
def test_masking_rate_and_replacement_split_are_config_fields(small_corpus, tokenizer,
                                                             vocab_path, corpus_file, rate,
                                                             split):
  """BERT Table 8's splits, ELECTRA's 85/0/15 and a 30% rate (P raised so it is not capped).

  ~4k predictions here: the split is checked to 0.025 (3.5 sigma); over 200 batches of the
  real corpus `bert_jax.pretrain.inspect` gives them within 0.01 (README)."""
  train = make_input(small_corpus, tokenizer, vocab_path, corpus_file, masked_lm_prob=rate,
                     max_predictions_per_seq=24, mask_token_prob=split[0],
                     random_token_prob=split[1])
  stats = _statistics(train, tokenizer)
  assert abs(stats["selected_fraction"] - rate) < 0.005, stats
  assert abs(stats["mask_fraction"] - split[0]) < 0.025, stats
  # A random replacement equal to the original counts as kept (1 in ~30k here).
  assert abs(stats["random_fraction"] - split[1]) < 0.025, stats
  assert abs(stats["kept_fraction"] - (1 - split[0] - split[1])) < 0.025, stats
