"""The family's pretraining configs run end to end from the command line, each with the
vocabulary kind its family uses (learned here from the test corpus), and the pretrained
workdir fine-tunes on SST-2 through the same CLI with the tokenizer it saved (ModernBERT's
also exports to HF with equal logits)."""
import json
import os

import pytest

from tests.helpers.runs import learn_vocab, run_python


def _fine_tunes_on_sst2(workdir, data_dir, finetuned):
  """configs/glue.py's runlocal SST-2 run from the pretrained workdir scores its dev set."""
  run_python("-m", "bert_jax.train", "--config=configs/glue.py:dataset=sst2,runlocal=True",
       f"--config.init_from={workdir}", f"--config.data.data_dir={data_dir}",
       f"--workdir={finetuned}")
  with open(os.path.join(finetuned, "eval_results.json")) as f:
    assert 0.0 <= json.load(f)["eval_accuracy"] <= 1.0


@pytest.fixture(scope="module")
def sentencepiece_vocab(corpus, tmp_path_factory):
  return learn_vocab("sentencepiece", corpus, tmp_path_factory)


@pytest.mark.slow
def test_albert_config_pretrains_and_its_workdir_fine_tunes(corpus, sentencepiece_vocab,
                                                            data_dir, tmp_path):
  """configs/albert.py pretrains with its shared layer scanned; the workdir fine-tunes on
  SST-2 unrolled (the params are the same tree either way)."""
  workdir = str(tmp_path / "albert")
  run_python("-m", "bert_jax.train",
       f"--config=configs/albert.py:corpus={corpus},vocab={sentencepiece_vocab},"
       "vocab_size=1000,runlocal=True", f"--workdir={workdir}",
       "--config.num_train_steps=6", "--config.eval_every_steps=0", "--config.data.cache_dir=",
       "--config.model.scan_layers=True")
  with open(os.path.join(workdir, "eval_results.json")) as f:
    results = json.load(f)
  assert {"eval_mlm_accuracy", "eval_sop_accuracy"} <= set(results)
  with open(os.path.join(workdir, "model_config.json")) as f:
    model = json.load(f)
  assert (model["family"], model["layer_sharing"], model["embedding_size"],
          model["scan_layers"]) == ("albert", "all", 64, True)
  assert os.path.isfile(os.path.join(workdir, "spiece.model"))  # the tokenizer travels along

  _fine_tunes_on_sst2(workdir, data_dir, str(tmp_path / "albert_sst2"))


@pytest.fixture(scope="module")
def bpe_vocab(corpus, tmp_path_factory):
  return learn_vocab("bpe", corpus, tmp_path_factory)


@pytest.mark.slow
def test_modernbert_config_pretrains_exports_to_hf_and_fine_tunes(corpus, bpe_vocab, data_dir,
                                                                   tmp_path):
  """configs/modernbert.py, pretrained with scanned layers: its loss falls in 12 steps at 30%
  masking; the workdir (layers 1-2 stacked in its checkpoint) converts to an HF folder that
  ModernBertForMaskedLM loads with our logits; it fine-tunes on SST-2 unrolled."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  import numpy as np
  from bert_jax.weights import load_pretrained

  workdir = str(tmp_path / "modernbert")
  run_python("-m", "bert_jax.train",
       f"--config=configs/modernbert.py:corpus={corpus},vocab={bpe_vocab},vocab_size=1000,"
       "runlocal=True", f"--workdir={workdir}", "--config.num_train_steps=12",
       "--config.log_every_steps=1", "--config.eval_every_steps=0", "--config.data.cache_dir=",
       "--config.model.scan_layers=True")
  with open(os.path.join(workdir, "metrics.jsonl")) as f:
    losses = [row["mlm_loss"] for row in map(json.loads, f) if "mlm_loss" in row]
  assert len(losses) == 12 and np.mean(losses[-3:]) < np.mean(losses[:3]) - 0.3, losses
  with open(os.path.join(workdir, "eval_results.json")) as f:
    assert 0.0 <= json.load(f)["eval_mlm_accuracy"] <= 1.0
  with open(os.path.join(workdir, "model_config.json")) as f:
    model = json.load(f)
  assert (model["family"], model["num_hidden_layers"], model["global_attn_every_n_layers"],
          model["pad_token_id"], model["attention_bias"], model["scan_layers"]) == (
              "modernbert", 3, 3, 1, False, True)
  assert os.path.isfile(os.path.join(workdir, "merges.txt"))  # the tokenizer travels along

  folder = str(tmp_path / "modernbert_hf")
  run_python("-m", "bert_jax.commands.convert", f"--input={workdir}", f"--output={folder}", "--to=hf")
  hf_model = transformers.ModernBertForMaskedLM.from_pretrained(
      folder, attn_implementation="eager").eval()
  ids = np.random.default_rng(0).integers(4, 1000, size=(2, 40)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 25:] = 0
  model_ours, variables = load_pretrained(workdir)
  ours = np.asarray(model_ours.apply(variables, ids, np.zeros_like(ids), mask).mlm_logits)
  with torch.no_grad():
    theirs = hf_model(input_ids=torch.tensor(ids, dtype=torch.long),
                      attention_mask=torch.tensor(mask)).logits.numpy()
  real = mask.astype(bool)
  np.testing.assert_allclose(ours[real], theirs[real], atol=1e-4, rtol=0)

  _fine_tunes_on_sst2(workdir, data_dir, str(tmp_path / "modernbert_sst2"))


@pytest.mark.slow
def test_continued_pretraining_takes_the_checkpoints_model_tokenizer_and_heads(
    corpus, tmp_path_factory, tmp_path, capsys):
  """configs/continued.py (DAPT / TAPT) on an HF RoBERTa folder with its BPE vocab: the run's
  model is the checkpoint's architecture, its MLM head comes from the checkpoint (nothing
  newly initialised), the objectives are RoBERTa's; ELECTRA is refused in one line."""
  import jax
  import numpy as np
  from flax import linen as nn
  from bert_jax.run import trainer
  from bert_jax.weights import hf_families, hf
  from bert_jax.models.config import config_for_size
  from bert_jax.models.headed import BertForPreTraining
  from bert_jax.text.bpe import BPETokenizer
  from configs import continued
  folder = tmp_path / "roberta"
  tokenizer = BPETokenizer.from_pretrained_dir(learn_vocab("bpe", corpus, tmp_path_factory))
  tokenizer.save(str(folder))
  model_config = config_for_size("roberta-tiny", vocab_size=tokenizer.vocab_size,
                                 pad_token_id=tokenizer.pad_id, num_hidden_layers=1)
  params = nn.unbox(BertForPreTraining(model_config, sentence_heads=()).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  hf.save(str(folder), model_config, jax.device_get(params))
  config = continued.get_config(f"init_from={folder},corpus={corpus},runlocal=True")
  assert (config.objectives, config.data.example_builder) == ("mlm", "full_sentences")
  config.num_train_steps, config.eval_every_steps, config.data.cache_dir = 3, 0, ""
  trainer.train_and_evaluate(config, str(tmp_path / "run"))
  notes = [line for line in capsys.readouterr().out.splitlines() if "Initialised" in line]
  assert notes == [f"Initialised from {folder}"], notes
  with open(tmp_path / "run" / "model_config.json") as f:
    saved = json.load(f)
  assert (saved["family"], saved["vocab_size"], saved["num_hidden_layers"]) == (
      "roberta", tokenizer.vocab_size, 1)
  electra = tmp_path / "electra"
  electra.mkdir()
  (electra / "config.json").write_text(json.dumps(
      hf_families.config_to_hf(config_for_size("electra-tiny"))))
  with pytest.raises(ValueError, match="is electra; continued pretraining covers .* "
                                       r"\(ELECTRA: configs/electra.py\)"):
    continued.get_config(f"init_from={electra}")
