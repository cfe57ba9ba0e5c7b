"""A tiny model of each family fine-tunes through the trainer from an HF-format folder
(moved from tests/test_family_parity.py and tests/test_modernbert.py)."""
import json
import os

import jax
import numpy as np
import pytest
from flax import linen as nn

from bert_jax.weights import checkpoint
from bert_jax.weights import hf
from bert_jax.models.config import config_for_size
from bert_jax.models.families import family_of
from bert_jax.models.headed import BertForPreTraining
from bert_jax.weights import load_pretrained


@pytest.mark.slow
@pytest.mark.parametrize("family", ("roberta", "distilbert", "albert", "electra", "modernbert",
                                    "ernie", "reformer"))
def test_tiny_model_fine_tunes_from_an_hf_folder(family, tmp_path, vocab_path):
  """GLUE SST-2 runlocal, 2 steps, from a tiny random model saved as an HF folder with
  BERT's WordPiece vocab (the byte-level BPE tokenizer lands separately; pad id 0 is the
  vocab's [PAD]); Reformer on padded rows (its attention takes no packed rows)."""
  from bert_jax.commands import embed
  from bert_jax.run import trainer
  from bert_jax.text.wordpiece import WordPieceTokenizer
  from configs import glue
  config = config_for_size(f"{family}-tiny", vocab_size=30522, max_position_embeddings=64,
                           pad_token_id=0)
  model = BertForPreTraining(config)
  params = nn.unbox(model.init(jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  folder = str(tmp_path / f"tiny_{family}")
  hf.save(folder, config, jax.device_get(params), vocab_path=vocab_path)
  # `embed` on the folder (what its main does): one mean-pooled [H] vector per sentence.
  encoder, variables = load_pretrained(folder, heads="none")
  vectors = embed.embed_sentences(encoder, variables, WordPieceTokenizer.from_pretrained_dir(
      folder), ["a short sentence .", "another one"], max_length=16, batch_size=2)
  assert vectors.shape == (2, config.hidden_size) and np.isfinite(vectors).all()
  run = glue.get_config("dataset=sst2,runlocal=True")
  run.init_from = folder
  run.num_train_steps = 2
  run.log_every_steps = 1
  workdir = str(tmp_path / "sst2")
  if not family_of(config).packed_rows:  # Reformer: GLUE's packed batches are refused
    with pytest.raises(ValueError, match=r"config.data.pack_each_batch: the reformer family's "
                       r"attention takes no packed rows .*pack_each_batch=false"):
      trainer.train_and_evaluate(run, workdir)
    assert not os.path.exists(workdir)
    run.data.pack_each_batch = False
  trainer.train_and_evaluate(run, workdir)
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    losses = [row["loss"] for row in map(json.loads, f) if "loss" in row]
  assert len(losses) == 2 and all(np.isfinite(losses)), losses
  assert checkpoint.read_model_config(workdir).family == family
  tuned, variables = load_pretrained(workdir)
  assert type(tuned).__name__ == "BertForSequenceClassification"
  if family_of(config).prediction_head:  # ModernBERT: its head on the [CLS] row, no pooler
    assert "head" in variables["params"] and "pooler" not in variables["params"]["bert"]
  else:
    assert "pooler" in variables["params"]["bert"]  # the classifier's, freshly initialised
