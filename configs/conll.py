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
Feature-based taggers (configs/common.py): `--config.freeze_encoder=true
--config.feature_layers=-4,-3,-2,-1 [--config.feature_mix=scalar_mix]
[--config.feature_head=bilstm] [--config.trainable_layers=-1]`.
`python bench/hf_tagging_reference.py` with the same config and overrides fine-tunes
HF's BertForTokenClassification on the same features and scores it the same way.

Measured from all-MiniLM-L6-v2 on valid.txt (a short run: 2,000 random training
sentences, 1 epoch = 62 steps of 32 sentences, lr 1e-4, T=64; 2-core CPU shared with
other jobs, 2026-11-28):
  column=pos:   eval_accuracy 0.6545 (eval_cut_words 370 of 51,362), 31.5 min wall
                (10.4 min of it compiling six packed-batch shapes; packed_rows_multiple=16
                compiles one)
  python -m bert_jax.train --config=configs/conll.py:column=pos,train_examples=2000 \
      --config.data.max_seq_length=64 --config.num_train_epochs=1 \
      --config.optim.learning_rate=1e-4 --workdir=runs/conll_pos
  column=chunk: eval_f1 0.6917 (precision 0.650, recall 0.739; NP 0.741, PP 0.883, VP
                0.472, the rarer types 0), 29.9 min wall
  python -m bert_jax.train --config=configs/conll.py:column=chunk,train_examples=2000 \
      --config.data.max_seq_length=64 --config.num_train_epochs=1 \
      --config.optim.learning_rate=1e-4 --config.data.packed_rows_multiple=16 \
      --workdir=runs/conll_chunk
Both are still climbing at the last step (training accuracy 0.67 / 0.77): short runs that
show the tasks learn, not converged scores (the whole training set and a few epochs are).
With 4,000 sentences at lr 2e-4 (125 steps, `packed_rows_multiple=16`, 7-8 min each,
2026-11-29): pos eval_accuracy 0.8831, chunk eval_f1 0.8629, ner eval_f1 0.7595; HF's
BertForTokenClassification at the same settings (bench/hf_tagging_reference.py) 0.8919
and 0.8710 (docs/results/finetuning.md, with the commands).
"""
from bert_jax.finetune import conll_reader
from bert_jax.configs.common import finetuning_config, parse_arg, shrink_for_runlocal


def get_config(arg=None):
  arg = parse_arg(arg, column="ner", eval="dev", train_examples=0, runlocal=False)
  conll_reader.get_column(arg.column)  # an unknown column: one line, before anything runs
  config = finetuning_config("conll", dict(conll_reader.DEFAULT_FILES),  # every split
                             column=arg.column)  # the tag column learned: ner, pos or chunk
  config.data.eval_split = arg.eval
  config.data.train_examples = arg.train_examples
  config.data.pack_each_batch = True  # dynamic padding's losses, far fewer pad tokens
  config.optim.learning_rate = 5e-5
  return shrink_for_runlocal(config) if arg.runlocal else config
