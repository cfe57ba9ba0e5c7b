"""Fine-tuning end to end through the trainer: every family on real data, a few steps.

A small random BERT with the real uncased vocab stands in for pretrained weights (fast
compiles); tests/test_finetune_quality.py checks real scores from real weights.
"""
import os

import numpy as np
import pytest

import bert_jax
from bert_jax import weights
from bert_jax.run import trainer
from bert_jax.finetune import base, glue_reader
from bert_jax.models import headed
from bert_jax.text.tokenizers import make_tokenizer
from bert_jax.models.config import BertConfig
from configs import conll, glue, squad, swag
from tests.helpers.runs import run_finetune


@pytest.mark.slow
def test_glue_sst2_classification_and_predictions(small_bert, tmp_path):
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.predict = True
  results = run_finetune(config, tmp_path, small_bert)
  assert 0.0 <= results["eval_accuracy"] <= 1.0 and results["step"] == 8
  with open(tmp_path / "predictions_sst2.tsv") as f:
    rows = f.read().splitlines()
  assert rows[0] == "index\tprediction" and len(rows) == 873  # every dev example once
  assert {r.split("\t")[1] for r in rows[1:]} <= {"0", "1"}
  # The fine-tuned workdir reloads as its classifier and gives the predictions it wrote.
  model, variables = bert_jax.load_pretrained(str(tmp_path))
  assert isinstance(model, headed.BertForSequenceClassification)
  tokenizer = make_tokenizer(config.data, model_dir=str(tmp_path))
  features, _ = glue_reader.load_split(config.data, "dev", tokenizer, config.data.max_seq_length)
  logits = model.apply(variables, *(features[k] for k in base.MODEL_INPUTS)).logits
  assert [r.split("\t")[1] for r in rows[1:]] == [str(i) for i in np.argmax(logits, -1)]


def test_glue_stsb_regression(small_bert, tmp_path):
  results = run_finetune(glue.get_config("dataset=stsb,runlocal=True"), tmp_path, small_bert)
  assert {"eval_pearson", "eval_spearman"} <= set(results)


def test_glue_mrpc_reads_the_bom_file(small_bert, tmp_path):
  config = glue.get_config("dataset=mrpc,runlocal=True")
  config.data.sources.dev = config.data.sources.train  # MRPC dev is withheld
  config.data.eval_split = "train"
  results = run_finetune(config, tmp_path, small_bert)
  assert {"eval_f1", "eval_accuracy"} <= set(results)


@pytest.mark.slow
@pytest.mark.parametrize("column,metric", [("ner", "eval_f1"), ("pos", "eval_accuracy")])
def test_conll_tagging(small_bert, tmp_path, column, metric):
  from bert_jax.finetune import conll_reader
  workdir = tmp_path / "conll"
  config = conll.get_config(f"column={column},runlocal=True")
  config.predict = True
  results = run_finetune(config, workdir, small_bert)
  assert 0.0 <= results[metric] <= 1.0
  labels = list(conll_reader.COLUMNS[column].labels)
  rows = (workdir / conll_reader.COLUMNS[column].predictions_file).read_text().splitlines()
  # `word gold predicted`: valid.txt's first line is `CRICKET NNP B-NP O`; words cut off
  # at max_seq_length are predicted "O" (no POS tag: scored as errors).
  assert rows[0].split()[:2] == ["CRICKET", {"ner": "O", "pos": "NNP"}[column]]
  assert {r.split()[2] for r in rows if r} <= {*labels, "O"}
  # The tags are recorded in order and become an HF export's id2label (what HF's
  # token-classification pipeline prints), then come back from the HF folder.
  from bert_jax.commands.convert import convert
  transformers = pytest.importorskip("transformers")
  assert weights.label_names(str(workdir)) == labels
  convert(str(workdir), str(tmp_path / "hf"), to="hf")
  exported = transformers.AutoModelForTokenClassification.from_pretrained(str(tmp_path / "hf"))
  assert [exported.config.id2label[i] for i in range(len(labels))] == labels
  assert transformers.AutoTokenizer.from_pretrained(str(tmp_path / "hf")).vocab_size == 30522
  convert(str(tmp_path / "hf"), str(tmp_path / "back"))
  assert weights.label_names(str(tmp_path / "back")) == labels


@pytest.mark.slow
@pytest.mark.parametrize("version,key", [("1.1", "eval_exact_match"), ("2.0", "eval_best_f1")])
def test_squad(small_bert, tmp_path, version, key):
  config = squad.get_config(f"version={version},runlocal=True")
  config.data.heldout_fraction = 0.03
  results = run_finetune(config, tmp_path, small_bert)
  assert key in results and "eval_f1" in results


def test_swag_multiple_choice(small_bert, tmp_path):
  results = run_finetune(swag.get_config("runlocal=True"), tmp_path, small_bert)
  assert 0.0 <= results["eval_accuracy"] <= 1.0


def test_init_from_requires_architecture(tmp_path):
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.init_from = ""
  with pytest.raises(ValueError, match="config.init_from is empty"):
    trainer.train_and_evaluate(config, str(tmp_path))


def test_frozen_encoder_trains_only_the_head(small_bert, tmp_path):
  from bert_jax.weights.mapping import flatten
  from bert_jax.weights import load_params
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.freeze_encoder = True
  config.feature_layers = "-2,-1"
  run_finetune(config, tmp_path, small_bert)
  _, before, _ = load_params(small_bert)
  _, after, _ = load_params(str(tmp_path))
  enc_before, enc_after = flatten(before), flatten(after["bert"])
  assert enc_before.keys() == enc_after.keys()
  for k in enc_before:
    np.testing.assert_array_equal(enc_before[k], enc_after[k], err_msg=k)
  assert after["classifier"]["dense"]["kernel"].shape == (64, 2)  # 2 layers x H=32


def test_random_init_takes_the_architecture_but_not_the_weights(small_bert, tmp_path):
  from bert_jax.weights.mapping import flatten
  from bert_jax.weights import load_params
  config = glue.get_config("dataset=sst2,runlocal=True")
  config.random_init = True
  config.num_train_epochs = 0.01  # one step: the weights stay near their initialisation
  run_finetune(config, tmp_path, small_bert)
  _, pretrained, _ = load_params(small_bert)
  _, trained, _ = load_params(str(tmp_path))
  embeddings = flatten(trained["bert"])["embeddings/word_embeddings/embedding"]
  assert embeddings.shape == flatten(pretrained)["embeddings/word_embeddings/embedding"].shape
  assert np.abs(embeddings - flatten(pretrained)["embeddings/word_embeddings/embedding"]).max() > 0.01


@pytest.mark.slow
def test_zero_steps_evaluates_a_fine_tuned_model_as_it_is(small_bert, tmp_path):
  """num_train_steps=0 with num_train_epochs=0 from a fine-tuned model: its own eval, no
  step taken; from a model without the task's head: refused before anything is written."""
  config = glue.get_config("dataset=sst2,runlocal=True")
  tuned = run_finetune(config, tmp_path / "tuned", small_bert)
  again = glue.get_config("dataset=sst2,runlocal=True")
  again.num_train_epochs = 0
  results = run_finetune(again, tmp_path / "eval_only", str(tmp_path / "tuned"))
  assert results == {"step": 0, "eval_accuracy": tuned["eval_accuracy"]}
  # GLUE's submission file for an unlabeled test file: predictions, no metrics.
  test = tmp_path / "test.tsv"
  test.write_text("index\tsentence\n0\ta gripping film .\n1\ta dull mess .\n")
  submit = glue.get_config("dataset=sst2,runlocal=True")
  submit.num_train_epochs, submit.predict = 0, True
  submit.data.sources.test, submit.data.eval_split = str(test), "test"
  assert run_finetune(submit, tmp_path / "test_run", str(tmp_path / "tuned")) == {"step": 0}
  rows = (tmp_path / "test_run" / "predictions_sst2.tsv").read_text().splitlines()
  assert rows[0] == "index\tprediction" and len(rows) == 3
  fresh = glue.get_config("dataset=sst2,runlocal=True")
  fresh.num_train_epochs = 0
  with pytest.raises(ValueError, match=r"evaluates init_from .* as it is, but the model would "
                     r"have newly initialised \[.*'classifier'\]"):
    run_finetune(fresh, tmp_path / "refused", small_bert)
  assert not os.path.exists(tmp_path / "refused")


@pytest.mark.slow
@pytest.mark.parametrize("name,arg,prompt", [
    ("glue", "dataset=sst2", False), ("glue", "dataset=stsb", False), ("glue", "dataset=sst2", True),
    ("conll", "", False), ("squad", "", False), ("swag", "", False)])
def test_compile_only_reports_every_fine_tuning_task(small_bert, name, arg, prompt):
  """--compile_only compiles the train step of each task's batch, labels included."""
  from bert_jax.run.compile_report import compile_report
  config = {"glue": glue, "conll": conll, "squad": squad, "swag": swag}[name].get_config(
      ",".join(filter(None, [arg, "runlocal=True"])))
  config.init_from = small_bert
  config.data.max_seq_length = 32
  if prompt:
    config.data.prompt_template, config.data.prompt_verbalizer = "it was {mask} .", "bad,good"
  report = compile_report(config)
  assert report["seq_len"] == 32 and report["params_total_bytes"] > 0
  assert report["xla_flops_per_device"] > 0 and report["model_flops_per_step"] > 0


@pytest.mark.parametrize("name,field,value", [
    ("conll", "classifier_pooling", "mean"), ("squad", "feature_layers", "-2,-1"),
    ("swag", "classifier_pooling", "mean"), ("squad", "classifier_pooling", "mean"),
    ("squad", "feature_head", "bilstm"), ("swag", "feature_mix", "scalar_mix")])
def test_a_head_option_the_task_does_not_read_is_refused(name, field, value):
  """Not silently ignored: e.g. a mean-pooled classifier makes no sense for tagging."""
  from bert_jax.finetune import conll as conll_task, squad as squad_task, swag as swag_task
  config = {"conll": conll, "squad": squad, "swag": swag}[name].get_config("runlocal=True")
  config[field] = value
  task = {"conll": conll_task.ConllTask, "squad": squad_task.SquadTask,
          "swag": swag_task.SwagTask}[name]
  with pytest.raises(ValueError, match=rf"config.{field}='{value}': the {name} task's model "
                     "does not read it"):
    task(config, BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1,
                            num_attention_heads=1, intermediate_size=8))
