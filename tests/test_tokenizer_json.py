"""Tokenizers from an HF `tokenizer.json` alone (bert_jax/text/tokenizer_json.py).

What answerdotai/ModernBERT-base ships, and what transformers 5 saves even for BERT: a
ModernBERT-like byte-level one gives transformers' ids and model inputs, BERT's gives our
WordPiece's ids, and a ModernBERT folder with only it fine-tunes through the trainer.
"""
import os
import pathlib

import numpy as np
import pytest

from bert_jax.text import tokenizers
from bert_jax.text import wordpiece
from tests.helpers.tokenizer_samples import (assert_model_inputs_equal,  # noqa: F401
                                             mismatches, modernbert_like_tokenizer,
                                             sample_lines, training_text)

transformers = pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def json_bpe_folder(tmp_path_factory, training_text) -> str:  # noqa: F811
  return modernbert_like_tokenizer(training_text, str(tmp_path_factory.mktemp("json_bpe")),
                                   vocab_size=1000)


def test_tokenizer_json_ids_and_inputs_equal_hf(json_bpe_folder, sample_lines):  # noqa: F811
  assert "vocab.json" not in os.listdir(json_bpe_folder)
  ours = tokenizers.model_tokenizer(json_bpe_folder)
  assert type(ours).__name__ == "TokenizerJson"
  theirs = transformers.AutoTokenizer.from_pretrained(json_bpe_folder)
  assert not mismatches(ours.encode(sample_lines),
                        theirs(sample_lines, add_special_tokens=False)["input_ids"],
                        sample_lines)
  assert (ours.cls_id, ours.sep_id, ours.pad_id, ours.mask_id, ours.unk_id) == tuple(
      theirs.convert_tokens_to_ids(t) for t in ("[CLS]", "[SEP]", "[PAD]", "[MASK]", "[UNK]"))
  assert_model_inputs_equal(
      ours, theirs, ["the quick brown fox", "a", "unbelievably extraordinary tokenization"],
      ["jumps over", "the lazy dog while it sleeps", "x"], (6, 9, 17))
  assert ours.encode_words(["the"]) == ours.encode([" the"]) != ours.encode(["the"])
  # Word starts: 'Ġthe' starts one, a bare piece continues it, specials stand alone.
  table = ours.continuation_table()
  assert not table[ours.vocab.index("\u0120the")] and not table[ours.cls_id]
  assert table.sum() > 100
  # Random replacements draw ordinary pieces only: not the specials, not an unused id.
  from bert_jax.pretrain import masking
  replacements = set(masking.replacement_ids_from_vocab(ours.vocab + [""]).tolist())
  assert not replacements & {ours.cls_id, ours.sep_id, ours.pad_id, ours.mask_id,
                             ours.unk_id, len(ours.vocab)}
  # save() gives transformers the same tokenizer back.
  ours.save(str(pathlib.Path(json_bpe_folder).parent / "json_copy"))
  again = transformers.AutoTokenizer.from_pretrained(
      str(pathlib.Path(json_bpe_folder).parent / "json_copy"))
  assert again("hello there")["input_ids"] == theirs("hello there")["input_ids"]


def test_tokenizer_json_of_wordpiece_equals_our_wordpiece(vocab_path, sample_lines,  # noqa: F811
                                                          tmp_path):
  # What transformers 5 saves for BERT: tokenizer.json, no vocab.txt. The same ids as our
  # WordPiece, the same '##' word rule; with a vocab.txt beside it the folder is WordPiece
  # (not an error).
  from bert_jax.pretrain import masking
  folder = tmp_path / "bert"
  transformers.BertTokenizerFast(vocab_path).save_pretrained(str(folder))
  (folder / "vocab.txt").write_bytes(pathlib.Path(vocab_path).read_bytes())
  assert isinstance(tokenizers.model_tokenizer(str(folder)), wordpiece.WordPieceTokenizer)
  (folder / "vocab.txt").unlink()
  ours, reference = tokenizers.model_tokenizer(str(folder)), wordpiece.WordPieceTokenizer(
      vocab_path)
  assert type(ours).__name__ == "TokenizerJson" and ours.lower_case and ours.strips_accents
  assert not mismatches(ours.encode(sample_lines), reference.encode(sample_lines),
                        sample_lines)
  batch = ours.encode_for_model(["a b"], ["c"], max_length=8)
  assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1, 0, 0]]
  np.testing.assert_array_equal(masking.continuation_table_for(ours),
                                masking.continuation_table_from_vocab(reference.vocab))


def test_tokenizer_json_without_roles_is_a_one_line_error(json_bpe_folder, tmp_path):
  folder = tmp_path / "no_roles"
  folder.mkdir()
  (folder / "tokenizer.json").write_bytes(
      (pathlib.Path(json_bpe_folder) / "tokenizer.json").read_bytes())
  with pytest.raises(ValueError, match="name no pad token"):
    tokenizers.model_tokenizer(str(folder))


@pytest.mark.slow
def test_a_modernbert_folder_as_released_fine_tunes(json_bpe_folder, tmp_path):
  # answerdotai/ModernBERT-base ships tokenizer.json and no other vocabulary file: such a
  # folder fine-tunes through the trainer, and its workdir keeps the same tokenizer.
  import jax
  from flax import linen as nn
  from bert_jax.run import trainer
  from bert_jax.weights import hf
  from bert_jax.models.config import config_for_size
  from bert_jax.models.headed import BertForPreTraining
  from configs import glue
  tok = tokenizers.model_tokenizer(json_bpe_folder)
  config = config_for_size("modernbert-tiny", vocab_size=tok.vocab_size,
                           pad_token_id=tok.pad_id)
  params = nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  folder = tmp_path / "modernbert"
  hf.save(str(folder), config, jax.device_get(params))
  for name in os.listdir(json_bpe_folder):
    (folder / name).write_bytes((pathlib.Path(json_bpe_folder) / name).read_bytes())
  run = glue.get_config("dataset=sst2,runlocal=True")
  run.init_from, run.num_train_steps = str(folder), 2
  workdir = tmp_path / "sst2"
  trainer.train_and_evaluate(run, str(workdir))
  assert os.path.exists(workdir / "eval_results.json")
  assert "tokenizer.json" in os.listdir(workdir)
  again = tokenizers.model_tokenizer(str(workdir))
  assert again.encode(["a fine movie"]) == tok.encode(["a fine movie"])


@pytest.mark.parametrize("kind", ["wordpiece_uncased", "wordpiece_cased", "bpe"])
def test_saved_tokenizer_json_is_our_tokenizer(kind, vocab_path, training_text,  # noqa: F811
                                               sample_lines, tmp_path):  # noqa: F811
  """save() writes tokenizer.json too (`fast_tokenizer`: transformers 5 reads ModernBERT's
  tokenizer only from one): read by transformers it gives our model inputs, pairs and
  truncation included, on the real sample lines and the edge cases."""
  from bert_jax.text.bpe import BPETokenizer, train_bpe
  if kind == "bpe":
    train_bpe([training_text], str(tmp_path / "learned"), vocab_size=600)
    ours = BPETokenizer.from_pretrained_dir(str(tmp_path / "learned"))
  else:
    ours = wordpiece.WordPieceTokenizer(vocab_path, lower_case=kind == "wordpiece_uncased")
  ours.save(str(tmp_path / "saved"))
  theirs = transformers.PreTrainedTokenizerFast(
      tokenizer_file=str(tmp_path / "saved" / "tokenizer.json"),
      **{role: ours.vocab[getattr(ours, f"{role.split('_')[0]}_id")]
         for role in ("cls_token", "sep_token", "pad_token", "mask_token", "unk_token")})
  assert not mismatches(ours.encode(sample_lines),
                        theirs(sample_lines, add_special_tokens=False)["input_ids"],
                        sample_lines)
  assert_model_inputs_equal(ours, theirs, sample_lines[:40], sample_lines[40:80], (8, 64))


def test_a_converted_modernbert_classifier_loads_in_transformers_auto_classes(
    vocab_path, tmp_path):
  """convert --to=hf of a fine-tuned ModernBERT saved without tokenizer.json (workdirs
  written before the trainer saved one): the output gets one, config.json the tokenizer's
  [CLS]/[SEP] ids (not ModernBertConfig's 50281/50282), and AutoTokenizer +
  AutoModelForSequenceClassification give our inputs and logits."""
  import jax
  import torch
  from flax import linen as nn
  from bert_jax.weights import checkpoint
  from bert_jax.commands.convert import convert
  from bert_jax.models import specs
  from bert_jax.models.config import config_for_size
  config = config_for_size("modernbert-tiny", vocab_size=30522, pad_token_id=0)
  spec = {"headed_model": "sequence_classification", "num_labels": 2}
  model = specs.build(config, spec)
  params = nn.unbox(model.init(jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  params = jax.tree.map(lambda x: x + 0.05 * jax.random.normal(jax.random.key(1), x.shape),
                        params)  # a non-zero classifier
  checkpoint.save_model(str(tmp_path / "ours"), config, jax.device_get(params), spec=spec)
  tokenizer = wordpiece.WordPieceTokenizer(vocab_path)
  tokenizer.save(str(tmp_path / "ours"))
  (tmp_path / "ours" / "tokenizer.json").unlink()
  convert(str(tmp_path / "ours"), str(tmp_path / "hf"), to="hf")
  hf_tokenizer = transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf"))
  hf_model = transformers.AutoModelForSequenceClassification.from_pretrained(
      str(tmp_path / "hf"), attn_implementation="eager").eval()
  assert (hf_model.config.cls_token_id, hf_model.config.sep_token_id) == (101, 102)
  texts = ["a gorgeous , witty , seductive movie .", "strictly routine ."]
  theirs = hf_tokenizer(texts, padding="max_length", max_length=16, return_tensors="np")
  mine = tokenizer.encode_for_model(texts, max_length=16)
  np.testing.assert_array_equal(mine["input_ids"], theirs["input_ids"])
  with torch.no_grad():
    hf_logits = hf_model(input_ids=torch.tensor(theirs["input_ids"], dtype=torch.long),
                         attention_mask=torch.tensor(theirs["attention_mask"])).logits.numpy()
  logits = model.apply({"params": params}, mine["input_ids"], None, mine["attention_mask"]).logits
  np.testing.assert_allclose(np.asarray(logits), hf_logits, atol=1e-5)
