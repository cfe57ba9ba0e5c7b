"""Extension is proven, not claimed: a family member, a masking scheme and a fine-tuning
task, each one file of tests/extension/ plus its registration, with no change to the
package; each is trained a few steps through `trainer.train_and_evaluate`.

  tests/extension/xlm_roberta.py        XLM-RoBERTa: RoBERTa's encoder, HF model_type
                                        "xlm-roberta", fairseq's SentencePiece ids
  tests/extension/fragment_masking.py   MASS's one contiguous fragment per row
  tests/extension/tsv_classification.py text<TAB>label classification, accuracy
"""
import json
import os

import jax
import ml_collections
import numpy as np
import pytest
from flax import linen as nn

from bert_jax.weights import checkpoint
from bert_jax.run import tasks
from bert_jax.weights import hf
from bert_jax.models.bert import BertModel
from bert_jax.models.config import BertConfig
from bert_jax.models.families import tokenizer_kinds
from bert_jax.models.headed import BertForPreTraining
from bert_jax.pretrain import pipeline, selectors
from bert_jax.run import trainer
from bert_jax.text.tokenizers import make_tokenizer, model_tokenizer
from bert_jax.weights import load_config, load_pretrained
from configs import roberta
from configs.common import finetuning_config
from tests.helpers.runs import set_fields, TINY_PRETRAINING, tiny_pretraining_config
from tests.extension import fragment_masking, tsv_classification, xlm_roberta
from tests.helpers.hf_reference import hf_state, random_hf_model
from tests.helpers.family_tables import assert_every_param_maps

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

TOL = 1e-5
FEW_STEPS = {"num_train_steps": 4, "log_every_steps": 1, "checkpoint_every_steps": 4,
             "data.batch_size": 4}
# A tiny XLM-R (a config of the member can only be made once it is registered).
XLMR = dict(family="xlm-roberta", vocab_size=97, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=37, max_position_embeddings=40,
            type_vocab_size=1, pad_token_id=1, layer_norm_eps=1e-5)


@pytest.fixture
def xlmr():
  """The member registered for the test: a tiny XLM-R config."""
  xlm_roberta.register()
  yield BertConfig(**XLMR)
  xlm_roberta.unregister()


def _train(config, workdir) -> dict:
  results = trainer.train_and_evaluate(config, str(workdir))
  assert np.isfinite(results["loss"]), results
  return results


def _padded_batch(config, lengths, width, seed):
  rng = np.random.default_rng(seed)
  ids = rng.integers(config.pad_token_id + 1, config.vocab_size, (len(lengths), width))
  mask = (np.arange(width)[None] < np.array(lengths)[:, None]).astype(np.int32)
  return np.where(mask == 1, ids, config.pad_token_id).astype(np.int32), mask


def _assert_parity(ours, theirs, mask):
  diffs = [np.abs(np.asarray(a) - b.numpy())[mask == 1].max()
           for a, b in zip(ours.hidden_states, theirs.hidden_states)]
  diffs.append(np.abs(np.asarray(ours.mlm_logits) - theirs.logits.numpy())[mask == 1].max())
  assert max(diffs) < TOL, diffs


def test_xlm_roberta_member_converts_and_equals_hf_both_ways(xlmr, tmp_path):
  XLMR = xlmr  # noqa: N806
  assert_every_param_maps(XLMR)
  ids, mask = _padded_batch(XLMR, [9, 4, 1], 9, seed=0)
  torch_inputs = dict(input_ids=torch.tensor(ids, dtype=torch.long),
                      attention_mask=torch.tensor(mask, dtype=torch.long),
                      output_hidden_states=True)
  # HF -> ours.
  theirs = random_hf_model(XLMR, seed=0, cls_name="XLMRobertaForMaskedLM")
  state = hf.normalize_names(hf_state(theirs), "hf", XLMR.family)
  params, with_heads = hf.state_to_params(state, XLMR, "hf")
  assert with_heads
  ours = BertForPreTraining(XLMR).apply({"params": params}, ids, np.zeros_like(ids), mask,
                                        output_hidden_states=True)
  with torch.no_grad():
    _assert_parity(ours, theirs(**torch_inputs), mask)
  # Ours -> HF: the saved folder is HF's XLM-R.
  rng = np.random.default_rng(1)  # other values than HF's, so the export is what is read
  params = jax.tree.map(lambda x: np.asarray(x) + rng.normal(0, 0.05, np.shape(x)).astype(
      np.float32), params)
  hf.save(str(tmp_path), XLMR, params)
  raw = json.loads((tmp_path / "config.json").read_text())
  assert (raw["model_type"], raw["architectures"]) == ("xlm-roberta", ["XLMRobertaForMaskedLM"])
  theirs = transformers.AutoModelForMaskedLM.from_pretrained(
      str(tmp_path), attn_implementation="eager").eval()
  assert type(theirs).__name__ == "XLMRobertaForMaskedLM"
  ours = BertForPreTraining(XLMR).apply({"params": params}, ids, np.zeros_like(ids), mask,
                                        output_hidden_states=True)
  with torch.no_grad():
    _assert_parity(ours, theirs(**torch_inputs), mask)
  assert load_config(str(tmp_path)) == XLMR


@pytest.mark.slow
def test_xlm_roberta_reads_its_own_tokenizer_and_trains(xlmr, corpus, tmp_path):
  folder = xlm_roberta.train_vocab(corpus, str(tmp_path / "vocab"))
  data = ml_data(vocab_path=folder)
  tokenizer = make_tokenizer(data, kinds=tokenizer_kinds("xlm-roberta"))
  assert isinstance(tokenizer, xlm_roberta.XlmRobertaTokenizer)
  assert (tokenizer.cls_id, tokenizer.pad_id, tokenizer.sep_id, tokenizer.unk_id,
          tokenizer.mask_id, tokenizer.vocab_size) == (0, 1, 2, 3, 301, 302)
  # HF's XLM-R tokenizer of the same model gives the same ids (the kind, not the files,
  # decides: ALBERT's kind refuses this model, which lacks its [CLS]/[SEP]/[MASK]).
  reference = transformers.XLMRobertaTokenizer.from_pretrained(folder)
  assert len(reference) == tokenizer.vocab_size
  lines = ["The game began development in 2010 .", "a b c", "Zürich 1,000 ¿"]
  assert tokenizer.encode(lines) == reference(lines, add_special_tokens=False)["input_ids"]
  pair = tokenizer.encode_for_model(lines[:1], lines[1:2], max_length=20)
  assert pair["input_ids"][0].tolist() == reference(
      lines[0], lines[1], padding="max_length", truncation=True, max_length=20)["input_ids"]
  with pytest.raises(ValueError, match="lacks the piece"):
    make_tokenizer(data, kinds=tokenizer_kinds("albert"))

  config = roberta.get_config(f"corpus={corpus},vocab={folder},vocab_size=302,runlocal=True")
  set_fields(config, {**TINY_PRETRAINING, **FEW_STEPS, "model.family": "xlm-roberta",
                      "data.cache_dir": str(tmp_path / "cache")})
  _train(config, tmp_path / "run")
  # The workdir reloads as the member, with its own tokenizer kind.
  model, _ = load_pretrained(str(tmp_path / "run"))
  assert model.config.family == "xlm-roberta"
  again = model_tokenizer(str(tmp_path / "run"), tokenizer_kinds(model.config.family))
  assert again.encode(lines) == tokenizer.encode(lines)


def ml_data(**fields):
  """config.data of a vocabulary alone."""
  return ml_collections.ConfigDict({"data_dir": "", "vocab_path": "", "lower_case": False,
                                    "tokenizer": "", **fields})


def test_fragment_masking_masks_one_contiguous_fragment_and_trains(corpus, tmp_path,
                                                                    monkeypatch):
  monkeypatch.setitem(selectors.SELECTORS, fragment_masking.NAME, fragment_masking.SELECTOR)
  config = tiny_pretraining_config(corpus, **FEW_STEPS, **{"data.masking": "fragment"})
  tokenizer = make_tokenizer(config.data)
  train, _ = pipeline.make_inputs(config.data, tokenizer)
  specials = np.array([tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id])
  starts = []
  for _ in range(24):
    batch = next(train)
    for row in range(len(batch["masked_lm_ids"])):
      real = batch["masked_lm_weights"][row] > 0
      positions = batch["masked_lm_positions"][row][real]
      original = batch["input_ids"][row].copy()
      original[positions] = batch["masked_lm_ids"][row][real]
      eligible = np.flatnonzero(~np.isin(original, specials))
      rank = np.searchsorted(eligible, positions)
      assert np.array_equal(eligible[rank], positions)  # only eligible tokens
      assert np.array_equal(rank, np.arange(rank[0], rank[0] + len(rank)))  # one run
      budget = min(config.data.max_predictions_per_seq,
                   max(1, round(config.data.masked_lm_prob * len(eligible))))
      assert len(positions) == budget
      starts.append(rank[0] / max(len(eligible) - budget, 1))
  # The start is uniform over the places a fragment fits: mean 1/2, sd 1/sqrt(12).
  assert len(starts) >= 90 and abs(np.mean(starts) - 0.5) < 0.12, np.mean(starts)
  assert 0.18 < np.std(starts) < 0.40, np.std(starts)
  _train(config, tmp_path / "run")


def test_tsv_classification_task_trains_and_scores(vocab_path, data_dir, tmp_path,
                                                    monkeypatch):
  model_config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64,
                            max_position_embeddings=64)
  params = nn.unbox(BertModel(model_config).init(jax.random.key(0),
                                                 np.zeros((1, 4), np.int32))["params"])
  checkpoint.save_model(str(tmp_path / "bert"), model_config, jax.device_get(params),
                        vocab_path=vocab_path)
  with open(os.path.join(data_dir, "glue", "SST-2", "train.tsv"), encoding="utf-8") as f:
    lines = f.read().splitlines()[1:]
  sources = {}
  for split, rows in (("train", lines[:40]), ("dev", lines[40:60])):
    sources[split] = str(tmp_path / f"{split}.tsv")
    with open(sources[split], "w", encoding="utf-8") as f:
      f.write("".join(f"{line.split(chr(9))[0].strip()}\t{'neg pos'.split()[int(line[-1])]}\n"
                      for line in rows))
  monkeypatch.setitem(tasks.TASKS, tsv_classification.NAME,
                      tsv_classification.TsvClassificationTask)
  config = finetuning_config(tsv_classification.NAME, sources)
  set_fields(config, {**FEW_STEPS, "init_from": str(tmp_path / "bert"),
                      "data.max_seq_length": 32, "data.eval_batch_size": 8})
  results = _train(config, tmp_path / "run")
  model, variables = load_pretrained(str(tmp_path / "run"))
  tokenizer = make_tokenizer(config.data, model_dir=str(tmp_path / "run"))
  texts, labels = tsv_classification.read_tsv(sources["dev"])
  features = tokenizer.encode_for_model(texts, max_length=32)
  logits = model.apply(variables, features["input_ids"], features["token_type_ids"],
                       features["attention_mask"]).logits
  assert np.asarray(logits).shape == (20, 2)
  gold = np.array([("neg", "pos").index(label) for label in labels])
  assert results["eval_accuracy"] == pytest.approx(np.mean(logits.argmax(-1) == gold))
