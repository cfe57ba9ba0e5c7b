r"""CoNLL-2003 tagging fine-tuning (first sub-token of each word), from all-MiniLM-L6-v2.

  python -m bert_jax.train --config=configs/conll.py[:column=pos] --workdir=runs/conll \
      [--config.init_from=PATH]

column: the tag column learned (config.data.column; finetune/conll_reader.py COLUMNS):
"ner" (named entities, seqeval-style entity F1: eval_f1), "pos" (Penn Treebank
part-of-speech tags, token accuracy: eval_accuracy) or "chunk" (syntactic chunks,
conlleval chunk F1: eval_f1). Trains on conll2003/train.txt, evaluates on valid.txt (the
"dev" split; `eval=test` scores test.txt); "tfds:conll2003" reads tfds instead.
`train_examples=N` uses a random N-sentence subset; `runlocal=True` is a smoke test.
Training batches are packed (`data.pack_each_batch`; false = padded rows, the same losses).
"""
from bert_jax.finetune import conll_reader
from configs.common import finetuning_config, parse_arg, shrink_for_runlocal


def get_config(arg=None):
  arg = parse_arg(arg, column="ner", eval="dev", train_examples=0, runlocal=False)
  conll_reader.get_column(arg.column)  # an unknown column: one line, before anything runs
  config = finetuning_config("conll", dict(conll_reader.DEFAULT_FILES),  # every split
                             column=arg.column)
  config.data.eval_split = arg.eval
  config.data.train_examples = arg.train_examples
  config.data.pack_each_batch = True  # dynamic padding's losses, far fewer pad tokens
  config.optim.learning_rate = 5e-5
  return shrink_for_runlocal(config) if arg.runlocal else config
