r"""SQuAD v1.1 / v2.0 fine-tuning (extractive QA), from all-MiniLM-L6-v2.

  python -m bert_jax.train --config=configs/squad.py:version=1.1 --workdir=runs/squad11
  python -m bert_jax.train --config=configs/squad.py:version=2.0 --workdir=runs/squad20

v1.1 trains on the training articles of squad/du2017_split/test-v1.1.json (SQuAD v1.1
*training* data) and reports EM/F1 on a held-back 10% of its articles; v2.0 does the same
with squad/v2.0_train_subset/train-v2.0.json (unanswerable questions included; the
best null-score threshold is reported). Sources may be "tfds:squad/v1.1" etc.
`train_examples=N` uses N random training windows; `runlocal=True` is a smoke test.

Measured (docs/results/finetuning.md; a 2-core AMD EPYC shared with other jobs,
2026-11-22 to 2026-11-24, a7ca5d3): v1.1 with `--config.data.max_seq_length=256
--config.num_train_epochs=1 --config.optim.learning_rate=1e-4`, 374 steps, 114.9 min:
F1 60.69, exact match 41.76 on 1,111 held-back questions.
"""
from bert_jax.configs.common import finetuning_config, parse_arg, shrink_for_runlocal

_FILES = {"1.1": "squad/du2017_split/test-v1.1.json",
          "2.0": "squad/v2.0_train_subset/train-v2.0.json"}
# The official dev sets' names (not in ../shared/data): `--config.data.eval_split=dev`
# scores one placed under the data root, or any path given as --config.data.sources.dev.
_DEV_FILES = {"1.1": "squad/dev-v1.1.json", "2.0": "squad/dev-v2.0.json"}


def get_config(arg=None):
  arg = parse_arg(arg, version="1.1", train_examples=0, runlocal=False)
  if arg.version not in _FILES:
    raise ValueError(f"version={arg.version!r}: expected one of {sorted(_FILES)}")
  config = finetuning_config(
      "squad", {"train": _FILES[arg.version], "dev": _DEV_FILES[arg.version]},
      # > 0: this seeded share of the training articles is held out and scored (split
      # "heldout") and the rest trained on; heldout_seed draws them.
      heldout_fraction=0.1, heldout_seed=0,
      version_2_with_negative=arg.version == "2.0",  # questions may have no answer (v2.0)
      **SPAN_SEARCH)
  config.data.eval_split = "heldout"
  return squad_settings(config, arg.train_examples, arg.runlocal)


# The windows' and the answer search's settings (BERT's run_squad), shared with configs/qa.py.
SPAN_SEARCH = dict(
    doc_stride=128,  # a long context is read in windows that start this many tokens apart
    max_query_length=64,  # question tokens kept (the rest cut)
    n_best_size=20,  # the start and end positions per window that answer spans come from
    max_answer_length=30,  # the longest answer span, in tokens
    null_score_threshold=0.0,  # v2.0: no answer where null - best span score exceeds this
)


def squad_settings(config, train_examples: int, runlocal: bool):
  """SQuAD's training settings (seq 384, 2 epochs, lr 5e-5); runlocal: the smoke test's."""
  config.data.max_seq_length = 384
  config.data.train_examples = train_examples
  config.optim.learning_rate = 5e-5
  config.num_train_epochs = 2.0
  if runlocal:
    shrink_for_runlocal(config)
    config.data.max_seq_length = 128
    config.data.doc_stride = 64
  return config
