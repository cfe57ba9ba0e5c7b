"""The papers' ablation sweeps (experiments/sweeps/): every run's train and stage commands
parse as configs, and each sweep changes what its docstring says it changes.

No training: the commands are parsed as bert_jax.train parses them (absl + config_flags).
"""
import os

import numpy as np
import pytest
from absl import flags
from ml_collections import config_flags

from bert_jax.run import tasks
from bert_jax.run import trainer
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


def test_ernie_masking_varies_only_the_knowledge_masking(prepared):
  module = sweeps.load("ernie_masking")
  runs = configs_of("ernie_masking")
  assert sorted(runs) == sorted(_runs(module))
  mixtures = {"token": "", "token_phrase": "token:1,phrase:1",
              "token_phrase_entity": "token:1,phrase:1,entity:1"}
  for run, (config, _, stages) in runs.items():
    variant = ablation.variant_of(run)
    assert config.data.masking == ("token" if variant == "token" else "mixture")
    assert config.data.masking_mixture == mixtures[variant]
    assert config.model.family == "ernie" and config.data.spans
    assert config.data.train_files == (os.path.abspath(module.KNOWLEDGE),)  # all variants
    assert config.model.vocab_size == 123 and config.num_train_steps == ablation.STEPS
    assert list(stages) == ["sst2", "mrpc", "conll", "conll_features"]
  # The corpus's span file comes from taggers the sweep fine-tunes first (in this order).
  outputs = [output for output, _ in module.PREPARE]
  assert outputs.index("runs/conll_ner/eval_results.json") < outputs.index(
      "runs/corpus/knowledge.spans.jsonl")


def test_a_tagger_a_missing_file_needs_is_prepared_before_the_runs(prepared, monkeypatch):
  """The files phase runs the taggers the span file's command names, then the tagging;
  with the span file there, neither is asked for."""
  module = sweeps.load("ernie_masking")
  with pytest.raises(SystemExit) as exit_info:
    runner._prepare("ernie_masking", module, print_only=True)
  message = str(exit_info.value)
  assert "runs/conll_ner/eval_results.json" in message
  assert "runs/conll_chunk/eval_results.json" in message
  assert message.index("conll_ner/eval_results") < message.index("knowledge.spans.jsonl")
  for output in (module.KNOWLEDGE, "runs/corpus/knowledge.spans.jsonl"):
    open(output, "w").close()
  runner._prepare("ernie_masking", module, print_only=True)  # nothing missing


def test_albert_sweeps_vary_the_sentence_task_sharing_and_embedding_width(prepared):
  sop = configs_of("albert_sop")
  assert sorted(sop) == sorted(_runs(sweeps.load("albert_sop")))
  assert {(c.data.example_builder, c.objectives) for c, _, _ in sop.values()} == {
      ("doc_sentences", "mlm"), ("nsp_pairs", "mlm,nsp"), ("sop", "mlm,sop"),
      ("sop_equal_lengths", "mlm,sop")}
  # The paper's cross columns: the NSP and SOP runs evaluate their own head on the other
  # task's pairs of the same held-out documents, training nothing.
  for run, (config, _, stages) in sop.items():
    cross = stages.get("cross")
    if run.startswith(("nsp_", "sop_s")):
      assert (cross.data.example_builder, cross.objectives) == (
          {"nsp": ("sop", "mlm,nsp_on_sop"), "sop": ("nsp_pairs", "mlm,sop_on_nsp")}[
              run.split("_")[0]])
      assert cross.num_train_steps == 0
      assert (cross.seed, cross.data.seed, cross.data.eval_held_out_docs) == (
          config.seed, config.data.seed, config.data.eval_held_out_docs)
    else:
      assert cross is None, run
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
    task = tasks.make_task(config, model_config)
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
  rows = [row("token_s0", 10.0), row("token_s1", 12.0), row("span_s0", 15.0),
          row("span_s1", 16.0)]
  lines = report.render("spanbert_masking", module, rows, str(tmp_path)).splitlines()
  assert ("| variant | seeds | held-out MLM acc | SST-2 dev acc | MRPC held-out F1 | "
          "CoNLL dev F1 (fine-tuned) | CoNLL dev F1 (features) | SQuAD v1.1 held-out F1 | "
          "paper: SQuAD 2.0 dev F1, Table 6 (bi-sequence + NSP) | "
          "paper: SQuAD 2.0 dev F1, Table 7 (single sequences) |" in lines)
  assert ("| subword tokens, MLM | 2 | 20.00 [20.00, 20.00] |  |  |  |  | 11.00 [10.00, 12.00] "
          "| 83.8 |  |") in lines
  assert ("| random spans, MLM | 2 | 20.00 [20.00, 20.00] |  |  |  |  | 15.50 [15.00, 16.00] "
          "| 85.4 | 86.7 |") in lines
  # The paper's worst and best SQuAD 2.0 rows (Table 6: tokens 83.8, spans 85.4) are compared.
  assert ("**Direction here: held (span above token on squad eval_f1, every seed).**"
          in lines)
  table = tables.markdown(module.COLUMNS, rows).splitlines()
  assert table[0].endswith("| SQuAD v1.1 held-out F1 |") and table[2].endswith("| 10.00 |")


def _ablations():
  return [name for name in sweeps.names() if hasattr(sweeps.load(name), "VARIANTS")]


@pytest.mark.parametrize("sweep", _ablations())
def test_paper_numbers_name_existing_variants_and_give_a_direction(sweep):
  """PAPER's columns (values, then each "also") key existing variants with numbers, and
  the verdict has a pair to compare: the best and worst of "values", or "order"."""
  module = sweeps.load(sweep)
  paper = module.PAPER
  assert paper["source"] and paper["metric"] and paper["ours"]
  for column in (paper, *paper.get("also", ())):
    assert column["metric"] and set(column["values"]) <= set(module.VARIANTS), column
    assert all(isinstance(x, float) for x in column["values"].values()), column
  pair = paper.get("order") or (len(paper["values"]) >= 2 and tuple(paper["values"]))
  assert pair and set(pair) <= set(module.VARIANTS)
  assert "not retrieved" not in paper["source"]


def test_bert_masking_split_variants_are_table_8_rows():
  """Each name is Table 8's MASK / SAME / RND row (in %), and its overrides give that split."""
  module = sweeps.load("bert_masking_split")
  rows = set()
  for name, (overrides, _) in module.VARIANTS.items():
    mask, same, rnd = (int(x) for x in name.split("_")[1:])
    assert mask + same + rnd == 100
    assert overrides == {"data.mask_token_prob": mask / 100, "data.random_token_prob": rnd / 100}
    rows.add((mask, same, rnd))
  assert rows == {(80, 10, 10), (100, 0, 0), (80, 0, 20), (80, 20, 0), (0, 20, 80), (0, 0, 100)}
  # The paper's worst feature-based NER row is all-[MASK] (94.0), its best BERT's (94.9).
  values = module.PAPER["values"]
  assert (min(values, key=values.get), max(values, key=values.get)) == (
      "mask_100_0_0", "mask_80_10_10")


def test_results_page_shows_the_papers_numbers_before_a_sweep_runs(tmp_path):
  lines = report.render("albert_sop", sweeps.load("albert_sop"), [], str(tmp_path)).splitlines()
  assert lines[2] == ("| variant | paper: SST-2 dev accuracy | paper: downstream Avg | "
                      "paper: intrinsic accuracy of its own head (NSP on NSP, SOP on SOP) | "
                      "paper: its head on the other task (NSP on SOP, SOP on NSP) |")
  assert "| MLM only (single segments) | 89.9 | 79.0 |  |  |" in lines
  assert "| MLM + SOP (ALBERT) | 90.3 | 80.1 | 86.5 | 78.9 |" in lines
  assert any(line.startswith("Paper: Lan et al. 2019 (ALBERT") for line in lines)
  assert lines[-1] == "Not run yet: `python -m experiments.run albert_sop`."
  assert not os.listdir(tmp_path)  # no plots without runs
  # Sizes not the paper's: no table, the direction in words.
  text = report.render("bert_model_size", sweeps.load("bert_model_size"), [], str(tmp_path))
  assert "| variant |" not in text and "24/1024/16 3.23 93.7" in text


def _frozen_sweep_configs(sweep: str) -> dict:
  """{run: config} of a frozen-against-fine-tuned sweep, each refused or accepted by its
  task as the trainer's would be (the MiniLM runs' model config from the real weights)."""
  from configs.common import default_init_from
  out = {}
  for run, spec in sweeps.load(sweep).get_sweep().items():
    config, workdir = parse(runner.command(sweep, run, spec))
    assert workdir == f"runs/{sweep}/{run}"
    if config.init_from == default_init_from() and config.init_from:
      tasks.make_task(config, trainer.resolve_model_config(config))
    out[run] = config
  return out


def test_feature_based_ner_runs_are_table_7s_choices_on_two_encoders():
  configs = _frozen_sweep_configs("feature_based_ner")
  assert len(configs) == 2 * (7 + 6)  # two seeds; the L4 encoder's "all" is its last four
  layers = {run: (c.feature_layers, c.feature_mix) for run, c in configs.items()
            if run.endswith("_s0")}
  assert layers["minilm_embeddings_s0"] == ("0", "concat")
  assert layers["minilm_second_to_last_s0"] == ("-2", "concat")
  assert layers["minilm_wsum_last4_s0"] == ("-4,-3,-2,-1", "scalar_mix")
  assert layers["minilm_concat_last4_s0"] == ("-4,-3,-2,-1", "concat")
  assert layers["minilm_wsum_all_s0"] == ("1,2,3,4,5,6", "scalar_mix")
  assert layers["minilm_finetune_s0"] == ("", "concat") and "mini_wsum_all_s0" not in layers
  for run, config in configs.items():
    frozen = "finetune" not in run
    assert (config.freeze_encoder, config.cache_features) == (frozen, frozen), run
    assert config.feature_head == ("bilstm" if frozen else "linear"), run
    assert config.data.train_examples == 2000 and config.data.max_seq_length == 64
    assert config.init_from.endswith("model") != run.startswith("mini_"), run
  assert configs["mini_last_s1"].init_from == "runs/feature_based_ner_mini"
  assert (configs["mini_last_s1"].seed, configs["mini_last_s1"].data.seed) == (1, 1)


def test_tune_or_not_pairs_frozen_and_fine_tuned_runs_on_the_tasks_with_data():
  configs = _frozen_sweep_configs("tune_or_not")
  assert sorted({run.split("_")[0] for run in configs}) == ["conll", "mrpc", "sst2", "stsb"]
  assert len(configs) == 4 * 3 * 2  # three arms, two seeds
  assert configs["mrpc_frozen_s0"].data.eval_split == "heldout"
  bert = {task: (c.num_train_epochs, c.optim.learning_rate, c.data.batch_size)
          for task in ("conll", "sst2", "stsb", "mrpc")
          for c in [configs[f"{task}_bert_recipe_s1"]]}
  assert bert == {"conll": (3, 5e-5, 32), "sst2": (3, 5e-5, 32), "stsb": (3, 5e-5, 32),
                  "mrpc": (3, 5e-5, 16)}
  assert (configs["mrpc_finetune_s0"].num_train_epochs, configs["mrpc_finetune_s0"].data.batch_size,
          configs["mrpc_frozen_s0"].data.batch_size) == (3, 16, 32)
  # The CoNLL pair is feature_based_ner's: the runner takes those rows (same_as).
  ner = sweeps.load("feature_based_ner").get_sweep()
  ours = sweeps.load("tune_or_not").get_sweep()
  assert ours["conll_frozen_s0"] == ner["minilm_wsum_all_s0"]
  assert ours["conll_finetune_s1"] == ner["minilm_finetune_s1"]
  # MRPC's first fine-tuning arm already had BERT's recipe: one run, two names.
  assert ours["mrpc_bert_recipe_s0"] == ours["mrpc_finetune_s0"]


@pytest.mark.parametrize("sweep", ["feature_based_ner", "tune_or_not"])
def test_frozen_sweeps_show_the_papers_numbers_and_their_verdicts(sweep, tmp_path):
  module = sweeps.load(sweep)
  empty = module.render([], str(tmp_path))
  assert "96.4" in empty or "+6.7" in empty
  assert "not run" in empty
  run = "minilm_{}_s{}" if sweep == "feature_based_ner" else "conll_{}_s{}"
  better, worse = ("finetune", "embeddings") if sweep == "feature_based_ner" else (
      "finetune", "frozen")
  rows = [{"run": run.format(arm, seed), "metrics": {"eval_f1": f1}}
          for arm, f1s in ((better, (0.8, 0.7)), (worse, (0.4, 0.5)))
          for seed, f1 in enumerate(f1s)]
  text = module.render(rows, str(tmp_path))
  assert f"held ({run.format(better, '')[:-2]} above {run.format(worse, '')[:-2]} on eval_f1, " \
         "every seed)" in text
  assert "75.00 [70.00, 80.00]" in text
