r"""Extractive QA on your own SQuAD-format JSON files: a question and its context -> the answer span.

  python -m bert_jax.train --workdir=runs/myqa \
      --config=configs/qa.py:train=train.json,dev=dev.json[,version=2]
  python -m bert_jax.train --workdir=runs/myqa \
      --config=configs/qa.py:train=train.json,dev=dev.json,test=test.json --config.predict=true

train, dev, test: SQuAD v1.1 / v2.0 JSON files ({"data": [{"title", "paragraphs": [{"context",
"qas": [{"id", "question", "answers": [{"text", "answer_start"}], "is_impossible"}]}]}]}).
Their paths are relative to the current directory (absolute allowed): your files, not the
data root. The test file's answers are not read (it may have none). `version=2` allows
unanswerable questions (is_impossible, an empty answers list); unset, it is 2 where the
training file has one. A bad question (a missing field such as `answers`, an answer that
is not the context's text at its answer_start) stops the run with `<file>: data[i].
paragraphs[j].qas[k] (id <id>): ...`; `skip_bad_rows=true` skips such questions and prints
each file's count once.

Prints the training lines, then the dev file's official scores (evaluate-v1.1.py's
eval_exact_match and eval_f1; v2: evaluate-v2.0.py's eval_exact, eval_f1, eval_HasAns_*,
eval_NoAns_* and eval_best_f1 with its null-score threshold) into WORKDIR/eval_results.json;
with --config.predict=true, WORKDIR/predictions_<test file's name>.json {question id: answer}
(the dev file's without test=; v2 adds null_odds_<name>.json). `train_examples=N` trains on
N random windows; `runlocal=True` is a smoke test. The other settings are configs/squad.py's
(seq 384, doc stride 128, 2 epochs, lr 5e-5) and the fine-tuning defaults (configs/common.py).
"""
from bert_jax.configs import squad
from bert_jax.configs.common import finetuning_config, parse_arg, user_file_sources


def get_config(arg=None):
  arg = parse_arg(arg, train="", dev="", test="", version="", skip_bad_rows=False,
                  train_examples=0, runlocal=False)
  sources = user_file_sources(arg, "configs/qa.py", "train=train.json,dev=dev.json")
  config = finetuning_config("qa", sources, version=arg.version,
                             skip_bad_rows=arg.skip_bad_rows,
                             predict_split="test",  # predicted with --config.predict=true
                             **squad.SPAN_SEARCH)
  return squad.squad_settings(config, arg.train_examples, arg.runlocal)
