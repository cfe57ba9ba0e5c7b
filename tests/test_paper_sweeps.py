"""The papers' ablation sweeps (experiments/sweeps/): every run's train and stage commands
parse as configs, and each sweep changes what its docstring says it changes.

No training: the commands are parsed as bert_jax.train parses them (absl + config_flags).
"""
import os

import numpy as np
import pytest
from absl import flags
from ml_collections import config_flags

from bert_jax import trainer
from experiments import report
from experiments import run as runner
from experiments import sweeps
from experiments import tables
from experiments.sweeps import _ablation as ablation

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VOCAB_SIZE = 123


@pytest.fixture
def prepared(tmp_path, monkeypatch):
  """A cwd with the ablation sweeps' prepared files: a 123-line vocab."""
  monkeypatch.chdir(tmp_path)
  os.makedirs("runs/corpus")
  open("runs/corpus/pretrain.txt", "w").close()
  with open(ablation.VOCAB, "w") as f:
    f.writelines(f"piece{i}\n" for i in range(VOCAB_SIZE))


def parse(command: list[str]):
  """The config a `python -m bert_jax.train ...` command line trains with."""
  assert command[:3] == ["python", "-m", "bert_jax.train"]
  argv = ["train"] + [arg.replace("--config=configs/", f"--config={REPO}/configs/")
                       for arg in command[3:]]
  values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=values, lock_config=True,
                                  sys_argv=argv)  # the overrides are found in argv
  flags.DEFINE_string("workdir", None, "", flag_values=values)
  values(argv)
  return values.config, values.workdir


def configs_of(sweep: str) -> dict:
  """{run: (config, workdir, {stage: config})} of every run of the sweep."""
  out = {}
  for run, spec in sweeps.load(sweep).get_sweep().items():
    config, workdir = parse(runner.command(sweep, run, spec))
    stages = {}
    for stage, command in runner.stage_commands(sweep, run, spec):
      stages[stage], stage_workdir = parse(command)
      assert stages[stage].init_from == workdir and stage_workdir == f"{workdir}.{stage}"
    trainer.resolve_model_config(config)  # the model config is valid (BertConfig checks)
    out[run] = (config, workdir, stages)
  return out


def _runs(module):
  return [f"{v}_s{seed}" for v in module.VARIANTS for seed in ablation.SEEDS]


def test_spanbert_masking_varies_the_masking_and_sbo_and_adds_squad(prepared):
  module = sweeps.load("spanbert_masking")
  runs = configs_of("spanbert_masking")
  assert sorted(runs) == sorted(_runs(module))
  for run, (config, _, stages) in runs.items():
    masking = {"token": "token", "whole": "whole_word", "span": "span"}[run.split("_")[0]]
    assert config.data.masking == masking
    assert config.objectives == ("mlm,sbo" if "_sbo_" in run else "mlm")
    assert config.data.example_builder == "doc_sentences" and config.model.vocab_size == 123
    assert config.num_train_steps == ablation.STEPS
    assert list(stages) == ["sst2", "mrpc", "conll", "conll_features", "squad"]
    squad = stages["squad"]
    assert squad.task == "squad" and squad.data.train_examples == 4000
    assert squad.data.max_seq_length == 128 and squad.data.eval_split == "heldout"
  assert module.COLUMNS[-1][0] == "SQuAD v1.1 held-out F1"


def test_albert_sweeps_vary_the_sentence_task_sharing_and_embedding_width(prepared):
  sop = configs_of("albert_sop")
  assert sorted(sop) == sorted(_runs(sweeps.load("albert_sop")))
  assert {(c.data.example_builder, c.objectives) for c, _, _ in sop.values()} == {
      ("doc_sentences", "mlm"), ("nsp_pairs", "mlm,nsp"), ("sop", "mlm,sop")}
  sharing = configs_of("albert_sharing")
  for run, (config, _, _) in sharing.items():
    assert config.model.layer_sharing == run.rsplit("_s", 1)[0]
    assert config.model.num_hidden_layers == 4 and config.model.embedding_size == 64
    assert config.model.family == "albert" and config.data.vocab_path.endswith(ablation.VOCAB)
  assert len(sharing) == 8
  embedding = configs_of("albert_embedding")
  widths = {(c.model.embedding_size, c.model.layer_sharing) for c, _, _ in embedding.values()}
  assert widths == {(e, s) for e in (32, 64, 128) for s in ("none", "all")}
  assert len(embedding) == 12


def test_electra_vs_mlm_runs_spend_the_same_flops(prepared):
  runs = configs_of("electra_vs_mlm")
  assert sorted(runs) == ["electra_s0", "electra_s1", "mlm_s0", "mlm_s1"]
  total = {}
  for run, (config, _, _) in runs.items():
    model_config = trainer.resolve_model_config(config)
    task = trainer.make_task(config, model_config)
    batch = {"input_ids": [[0] * config.data.max_seq_length] * config.data.batch_size,
             "masked_lm_positions": [[0] * config.data.max_predictions_per_seq]
                                    * config.data.batch_size}
    per_step = task.step_flops({k: np.asarray(v) for k, v in batch.items()})
    total[run] = (per_step, config.num_train_steps, per_step * config.num_train_steps)
    assert config.task == ("electra" if run.startswith("electra") else "pretraining")
  assert total["electra_s0"][1] == ablation.STEPS
  # MLM spends ELECTRA's FLOPs to within one of its steps (the step count is rounded).
  assert abs(total["mlm_s0"][2] - total["electra_s0"][2]) <= total["mlm_s0"][0] / 2
  assert total["mlm_s0"][1] > ablation.STEPS  # the generator costs ELECTRA extra per step
  assert {k: v[2] for k, v in sweeps.load("electra_vs_mlm").flops_per_run().items()} == {
      "electra": total["electra_s0"][2], "mlm": total["mlm_s0"][2]}


def test_distillation_students_read_the_teacher_pretrained_first(prepared):
  runs = configs_of("distillation")
  order = list(runs)
  assert order[:4] == ["teacher_s0", "distilled_s0", "teacher_init_s0", "scratch_s0"]
  for run, (config, workdir, stages) in runs.items():
    variant, seed = run.rsplit("_s", 1)
    if variant == "teacher":
      assert config.model.family == "bert" and config.objectives == "mlm,nsp"
      assert stages["conll_features"].feature_layers == "0,1,2"
      continue
    teacher = f"runs/distillation/teacher_s{seed}"
    assert order.index(f"teacher_s{seed}") < order.index(run)
    assert config.distillation.teacher == os.path.abspath(teacher)
    assert config.model.family == "distilbert" and config.model.num_hidden_layers == 1
    assert config.model.vocab_size == VOCAB_SIZE
    assert config.distillation.student_layers == ("" if variant == "scratch" else "0")
    assert config.objectives == ("distill:5,mlm:2,cosine:1" if variant == "distilled"
                                 else "mlm")
    assert stages["conll_features"].feature_layers == "0,1"


def test_spanbert_results_page_has_the_squad_column_and_checks_the_order(tmp_path):
  module = sweeps.load("spanbert_masking")

  def row(run, f1):
    return {"sweep": "spanbert_masking", "run": run, "command": "c", "git_revision": "abc",
            "wall_seconds": 1.0, "finished_at": None,
            "metrics": {"eval_mlm_accuracy": 0.2, "squad": {"eval_f1": f1}}}

  # SQuAD F1 in % (the official script's scale), the MLM accuracy a fraction.
  rows = [row("token_s0", 10.0), row("token_s1", 12.0), row("span_sbo_s0", 15.0),
          row("span_sbo_s1", 16.0)]
  lines = report.render("spanbert_masking", module, rows, str(tmp_path)).splitlines()
  assert ("| variant | seeds | held-out MLM acc | SST-2 dev acc | MRPC held-out F1 | "
          "CoNLL dev F1 (fine-tuned) | CoNLL dev F1 (features) | SQuAD v1.1 held-out F1 |"
          in lines)
  assert "| subword tokens, MLM | 2 | 20.00 [20.00, 20.00] |  |  |  |  | 11.00 [10.00, 12.00] |" \
      in lines
  assert ("**Direction here: held (span_sbo above token on squad eval_f1, every seed).**"
          in lines)
  table = tables.markdown(module.COLUMNS, rows).splitlines()
  assert table[0].endswith("| SQuAD v1.1 held-out F1 |") and table[2].endswith("| 10.00 |")
