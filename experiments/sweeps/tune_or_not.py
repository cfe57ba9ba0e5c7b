r"""To tune or not to tune, at CPU scale: frozen features (❄️) against fine-tuning (🔥).

Peters, Ruder & Smith (2019), "To Tune or Not to Tune?", BERT-base: fine-tuning beats
feature extraction (a scalar mix of the layers into a task model) on every task, by 0.2 on
CoNLL-2003 NER, 0.5 on SST-2, 0.0 on MNLI, 1.0 on SICK-E, 2.3 on SICK-R, 6.7 on MRPC and
4.2 on STS-B: most on the sentence-pair similarity tasks. Here all-MiniLM-L6-v2 (the
configs' default init_from), the recipes of experiments/sweeps/_frozen.py: ❄️ is the scalar
mix of all six transformer layers into the BiLSTM head, 🔥 the fine-tuned model with its
linear head. The tasks whose data is here:

  conll  CoNLL-2003 NER, 2,000 random training sentences, seq 64, validation entity F1
         (the same runs as feature_based_ner's minilm_wsum_all and minilm_finetune: the
         runner takes their rows, same_as, when those ran first);
  sst2   SST-2, 2,000 random training sentences, seq 64, dev accuracy;
  mrpc   MRPC, 2,000 random pairs of 90% of its training file, seq 128, F1 on the other
         10% (configs/glue.py heldout=0.1: its dev file is not here); fine-tuned with
         BERT's recipe (3 epochs, batch 16, lr 5e-5), as one epoch at lr 1e-4 ends at the
         majority class (docs/results/finetuning.md, before these runs);
  stsb   STS-B, 2,000 random training pairs, seq 128, dev Pearson correlation.

MNLI (only 16-shot samples and its first dev rows are here) and SICK (not in the data) are
not run; their paper numbers stay on the page.

A third arm, `bert_recipe`, was added after the first two arms' results: the 1-epoch 🔥
recipe had undertrained CoNLL and STS-B (the regression head ended near the labels' mean),
so every task is fine-tuned again with the recipe MRPC already had, BERT's (3 epochs, lr
5e-5; batch 32, MRPC's 16 as before: its runs are mrpc_finetune's, same_as). The first two
arms are kept as they ran; the page gives the verdict for both fine-tuning recipes.

  python -m experiments.run tune_or_not                  # every run without a row
  python -m experiments.run tune_or_not sst2_frozen_s0   # one run
  python -m experiments.tables tune_or_not               # the per-run table
  python -m experiments.report                           # the page's section
"""
from experiments import tables
from experiments.sweeps import _frozen as frozen

METRICS = frozen.METRICS
ALL_LAYERS = frozen.frozen("1,2,3,4,5,6", "scalar_mix")  # MiniLM's six layers, mixed
# Task -> (config, overrides, metric, its name on the page, the paper's 🔥 - ❄️ delta);
# config None: no data here.
TASKS = {
    "conll": ("configs/conll.py:train_examples=2000", {"data.max_seq_length": 64},
              "eval_f1", "CoNLL-2003 NER (dev F1)", 0.2),
    "sst2": ("configs/glue.py:dataset=sst2,train_examples=2000", {"data.max_seq_length": 64},
             "eval_accuracy", "SST-2 (dev accuracy)", 0.5),
    "mnli": (None, {}, None, "MNLI (no data here)", 0.0),
    "sick_e": (None, {}, None, "SICK-E (no data here)", 1.0),
    "sick_r": (None, {}, None, "SICK-R (no data here)", 2.3),
    "mrpc": ("configs/glue.py:dataset=mrpc,heldout=0.1,train_examples=2000",
             {"data.max_seq_length": 128}, "eval_f1", "MRPC (held-out 10% F1)", 6.7),
    "stsb": ("configs/glue.py:dataset=stsb,train_examples=2000", {"data.max_seq_length": 128},
             "eval_pearson", "STS-B (dev Pearson)", 4.2),
}
# BERT's fine-tuning recipe (Devlin et al. 2019, section A.3: batch 32, lr 5e-5 of its
# grid's four, 3 epochs); MRPC at batch 16 (2,000 pairs).
BERT_RECIPE = {"num_train_epochs": 3, "optim.learning_rate": "5e-5"}
ARMS = {"frozen": ALL_LAYERS, "finetune": frozen.FINETUNE, "bert_recipe": BERT_RECIPE}
# (task, arm) -> the arm's recipe changed for that task.
MRPC_RECIPE = {**BERT_RECIPE, "data.batch_size": 16}
RECIPES = {("mrpc", "finetune"): MRPC_RECIPE, ("mrpc", "bert_recipe"): MRPC_RECIPE}
# The fine-tuned arms, each against the frozen one: (arm, its name on the page).
FINETUNED = (("finetune", "🔥 1 epoch, lr 1e-4"), ("bert_recipe", "🔥 BERT's recipe"))


def get_sweep():
  runs = {}
  for task, (config, overrides, *_) in TASKS.items():
    for arm, changes in ARMS.items():
      if config is not None:
        runs.update(frozen.seeded(f"{task}_{arm}", config, {
            **overrides, **changes, **RECIPES.get((task, arm), {})}))
  return runs


COLUMNS = frozen.COLUMNS


def _gap(rows, task: str, arm: str) -> str:
  stats = [frozen.cell(rows, f"{task}_{arm_}", (TASKS[task][2],)) for arm_ in ("frozen", arm)]
  if not all(stats):
    return ""
  means = [float(s.split(" ")[0]) for s in stats]
  return f"{means[1] - means[0]:+.2f}"


def render(rows: list[dict], plots_dir: str) -> str:
  """The page's section: per task, ❄️ and each 🔥 recipe here, their gaps, the paper's
  gap, the verdicts, and the plot."""

  def said(task, arm):
    if TASKS[task][0] is None:
      return "no data here"
    return frozen.direction(rows, f"{task}_frozen", f"{task}_{arm}", (TASKS[task][2],))

  def here(column):  # a cell of a task with data, "" for the others
    return lambda t: column(t) if TASKS[t][0] else ""

  columns = [("task (metric)", lambda t: TASKS[t][3]),
             ("seeds", here(lambda t: frozen.seeds_cell(rows, f"{t}_frozen"))),
             ("frozen ❄️ here", here(lambda t: frozen.cell(rows, f"{t}_frozen",
                                                          (TASKS[t][2],))))]
  for arm, name in FINETUNED:
    columns.append((f"{name} here", here(lambda t, arm=arm: frozen.cell(
        rows, f"{t}_{arm}", (TASKS[t][2],)))))
  for arm, name in FINETUNED:
    columns.append((f"{name} - ❄️", here(lambda t, arm=arm: _gap(rows, t, arm))))
  columns.append(("🔥 - ❄️ paper (BERT-base)", lambda t: f"{TASKS[t][4]:+.1f}"))
  for arm, name in FINETUNED:
    columns.append((f"direction, {name} above ❄️", lambda t, arm=arm: said(t, arm)))
  table = tables.markdown(columns, list(TASKS))
  plot = frozen.bars(plots_dir, "tune_or_not", rows, {
      TASKS[t][3]: {arm: (f"{t}_{arm}", (TASKS[t][2],)) for arm in ARMS}
      for t in TASKS if TASKS[t][0]}, {})
  return "\n".join([
      table, "",
      "Paper: Peters, Ruder & Smith 2019 (\"To Tune or Not to Tune?\"), BERT-base, fine-tuned "
      "minus feature extraction. The direction: fine-tuning above the frozen features on "
      "every task, most on the pair-similarity tasks (MRPC, STS-B, SICK-R).",
      "Runs: `python -m experiments.run tune_or_not`; per run: "
      "`python -m experiments.tables tune_or_not`."] + (["", plot] if plot else []))
