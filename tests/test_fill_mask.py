"""Fill-mask from the MLM head, against HF's fill-mask pipeline on the same weights."""
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from bert_jax.text.wordpiece import WordPieceTokenizer
from bert_jax.commands.fill_mask import fill_mask
from bert_jax.models.config import BertConfig
from bert_jax.weights import load_pretrained
from tests.helpers.hf_reference import random_hf_model

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXTS = ["the cat sat on the [MASK] .", "paris is the [MASK] of [MASK] ."]


@pytest.fixture(scope="module")
def hf_folder(tmp_path_factory, vocab_path):
  """A random BertForPreTraining with BERT's vocab, saved as an HF folder."""
  folder = tmp_path_factory.mktemp("hf_mlm")
  config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                      initializer_range=0.5)  # peaked predictions, so the top-k order is clear
  random_hf_model(config, seed=0).save_pretrained(folder)
  shutil.copy(vocab_path, folder / "vocab.txt")
  return str(folder)


def test_fill_mask_equals_the_hf_pipeline(hf_folder):
  import transformers
  model, variables = load_pretrained(hf_folder)
  tokenizer = WordPieceTokenizer.from_pretrained_dir(hf_folder)
  ours = fill_mask(model, variables, tokenizer, TEXTS, top_k=5)
  pipeline = transformers.pipeline("fill-mask", model=hf_folder, tokenizer=hf_folder,
                                   top_k=5, device="cpu")
  assert [len(masks) for masks in ours] == [1, 2]
  for text, masks in zip(TEXTS, ours):
    theirs = pipeline(text)
    theirs = [theirs] if isinstance(theirs[0], dict) else theirs  # one [MASK]: a flat list
    for our_top, their_top in zip(masks, theirs):
      assert [token for token, _ in our_top] == [p["token_str"] for p in their_top]
      np.testing.assert_allclose([p for _, p in our_top], [p["score"] for p in their_top],
                                 rtol=1e-4, atol=1e-6)


def test_fill_mask_errors(hf_folder, minilm_dir):
  model, variables = load_pretrained(hf_folder)
  tokenizer = WordPieceTokenizer.from_pretrained_dir(hf_folder)
  with pytest.raises(ValueError, match="text 1 has no \\[MASK\\]"):
    fill_mask(model, variables, tokenizer, ["a [MASK] .", "no mask here"])
  encoder, encoder_variables = load_pretrained(minilm_dir)  # sentence encoder: no MLM head
  with pytest.raises(ValueError, match="has no MLM head"):
    fill_mask(encoder, encoder_variables, tokenizer, TEXTS)


@pytest.mark.slow
def test_fill_mask_cli(hf_folder):
  out = subprocess.run([sys.executable, "-m", "bert_jax.commands.fill_mask", f"--model={hf_folder}",
                        "--top_k=3", TEXTS[1]], capture_output=True, text=True, check=True,
                       cwd=REPO)
  lines = out.stdout.splitlines()
  assert lines[0] == TEXTS[1]
  assert lines[1].startswith("  [MASK] 1: ") and lines[2].startswith("  [MASK] 2: ")
  assert len(lines[1].split()) == 2 + 2 * 3  # "[MASK] 1:" then 3 x (token, probability)


@pytest.mark.parametrize("kind", ["bpe", "sentencepiece"])
def test_predictions_read_as_hf_decodes_them(kind, tmp_path, data_dir):
  """Each vocabulary entry is shown as HF's tokenizer decodes it alone (the pipeline's
  `token_str`, less the word-start space): `Ġit` and `▁it` read `it`; --raw_pieces keeps
  the entry."""
  import transformers
  from bert_jax.commands.fill_mask import token_text
  from bert_jax.text import bpe, sentencepiece_vocab
  text = tmp_path / "text.txt"
  with open(os.path.join(data_dir, "wikitext-2", "valid.txt"), encoding="utf-8") as f:
    text.write_text("".join(line for line in f.readlines()[:2000] if line.strip()))
  if kind == "bpe":
    ours = bpe.train_bpe([str(text)], str(tmp_path / "bpe"), vocab_size=600)
    hf = transformers.PreTrainedTokenizerFast(
        tokenizer_file=str(tmp_path / "bpe" / "tokenizer.json"))
    marked = [i for i, piece in enumerate(ours.vocab) if piece.startswith("\u0120")]
  else:
    sentencepiece_vocab.train_sentencepiece([str(text)], str(tmp_path / "spiece"),
                                            vocab_size=600, num_threads=1)
    ours = sentencepiece_vocab.SentencePieceTokenizer.from_pretrained_dir(str(tmp_path))
    hf = transformers.AlbertTokenizerFast.from_pretrained(str(tmp_path))
    marked = [i for i, piece in enumerate(ours.vocab) if piece.startswith("\u2581")]
  specials = {ours.pad_id, ours.cls_id, ours.sep_id, ours.mask_id, ours.unk_id}
  ids = [i for i in range(len(ours.vocab)) if i not in specials and hf.decode([i]).strip()]
  assert len(ids) > 500 and len(marked) > 100
  assert [token_text(ours, i) for i in ids] == [hf.decode([i]).strip() for i in ids]
  blank = [i for i in range(len(ours.vocab)) if not ours.decode([i]).strip()]
  assert all(token_text(ours, i) == ours.vocab[i] for i in blank)  # whitespace: the entry
  words = [i for i in marked if ours.vocab[i][1:].isascii() and ours.vocab[i][1:].isalpha()]
  assert len(words) > 50 and all(token_text(ours, i) == ours.vocab[i][1:] for i in words)
