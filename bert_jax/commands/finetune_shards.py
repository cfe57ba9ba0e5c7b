r"""Writes a fine-tuning config's splits, tokenized, as shard files (bert_jax/finetune/shards.py),
once, where TensorFlow is; a run with --config.data.shards=PREFIX then reads them with no
TensorFlow.

  python -m bert_jax.commands.finetune_shards --config=configs/glue.py:dataset=sst2 \
      --output=runs/shards/sst2

writes runs/shards/sst2-train.npz and runs/shards/sst2-dev.npz (config.data.train_split,
eval_split and, with --config.predict=true and a source for it, predict_split), each split
read and featurized as the run would: the same config (its data fields, init_from's or
vocab_path's tokenizer) as the run's, less data.shards.
"""
from absl import app
from absl import flags

from bert_jax.files import storage
from bert_jax.finetune import shards
from bert_jax.finetune.base import FinetuningTask
from bert_jax.models.families import tokenizer_kinds
from bert_jax.run.tasks import make_task
from bert_jax.run.trainer import resolve_model_config
from bert_jax.startup import cli
from bert_jax.startup import config_flag
from bert_jax.text.tokenizers import make_tokenizer

if __name__ == "__main__":  # flags exist only when run as a program
  _CONFIG = config_flag.define_config("config", "The fine-tuning run's config.")
  _OUTPUT = flags.DEFINE_string("output", None, "Prefix of the shard files to write.")


def write(config, prefix: str) -> list[str]:
  """config's splits as PREFIX-<split>.npz; their paths."""
  task = make_task(config, resolve_model_config(config))
  if not isinstance(task, FinetuningTask):
    raise ValueError(f"config.task={config.task!r}: not a fine-tuning task (pretraining "
                     "writes its shards with python -m bert_jax.pretrain.shards)")
  task.check_shardable()
  tokenizer = make_tokenizer(config.data, model_dir=config.init_from,
                             kinds=tokenizer_kinds(task.model_config.family))
  splits = dict.fromkeys(filter(None, (config.data.train_split, config.data.eval_split,
                                       task.predict_split())))
  folder = storage.parent(prefix)
  if folder:
    storage.makedirs(folder)
  return [shards.write_split(task, split, tokenizer, prefix) for split in splits]


def main(argv):
  del argv
  if _CONFIG.value is None or not _OUTPUT.value:
    raise app.UsageError("--config and --output are required")
  for path in write(_CONFIG.value, _OUTPUT.value):
    print(f"wrote {path}")


if __name__ == "__main__":
  cli.run(main, urls=("output",))
