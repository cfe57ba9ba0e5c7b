r"""Fine-tuning from pre-tokenized shards: a task's tokenized splits written once where
TensorFlow is (the tokenizers run in it), read back with numpy alone.

Write them with the run's config (the task reads and featurizes each split as a run does):

  python -m bert_jax.commands.finetune_shards --config=configs/glue.py:dataset=sst2 \
      --output=runs/shards/sst2

writes PREFIX-<split>.npz for config.data.train_split, eval_split and (with config.predict
and a source for it) predict_split. Then train anywhere, TensorFlow or not:

  python -m bert_jax.train --config=configs/glue.py:dataset=sst2 --workdir=runs/sst2 \
      --config.data.shards=runs/shards/sst2

A split file (numpy .npz, through bert_jax/files/storage.py, so gs:// works) holds the
reader's feature arrays as they were made ("feature_<name>", each its dtype and shape), the
split's examples ("examples": UTF-8 JSON as uint8, the records of what the task scores
against: GLUE's, classify's and SWAG's rows, CoNLL's and tag's sentences) and "meta" (JSON: the
task, the split, the tokenizer's kind and vocabulary sha256, the config.data fields that
shape features, the task's own state such as classify's problem and labels, and the writing
run's notes of skipped bad rows). A run reads each split's file instead of its source and
checks the meta against its config and tokenizer, one line for the first disagreement; from
there on it is the same run (batching, packing, scores), so its numbers equal the run from
the files.

Tasks with a shard form: glue, classify, conll, tag, swag (FinetuningTask.example_type).
SQuAD's (squad, qa) are refused in one line.
"""
import dataclasses
import io
import json

import numpy as np

from bert_jax.files import storage
from bert_jax.text import tokenizers

# config.data fields that do not change a split's features: where the files are, the
# batching and the order (read after the features), and the tokenizer's names (its
# kind and vocabulary digest are checked instead).
RUN_FIELDS = frozenset((
    "shards", "data_dir", "sources", "dataset_splits", "train_split", "eval_split",
    "predict_split", "batch_size", "eval_batch_size", "train_examples", "seed",
    "pad_to_multiple_of", "packing", "pack_each_batch", "packed_rows_multiple",
    "select_fraction", "vocab_path", "tokenizer", "prompt_verbalizer"))
_FEATURE = "feature_"


def split_path(prefix: str, split: str) -> str:
  """The shard file of `split` under `prefix`."""
  return f"{prefix}-{split}.npz"


def feature_fields(data_config) -> dict:
  """The config.data fields that shape a split's features (all but RUN_FIELDS)."""
  return {k: v for k, v in data_config.to_dict().items() if k not in RUN_FIELDS}


def tokenizer_meta(data_config, tokenizer) -> dict:
  return {"kind": tokenizer.kind,
          "vocab_sha256": tokenizers.vocab_fingerprint(data_config, tokenizer)}


# ------------------------------------------------------------------- examples as JSON
def records(examples) -> list[dict]:
  """Frozen dataclass examples -> JSON-able dicts (tuples become lists)."""
  return [dataclasses.asdict(example) for example in examples]


def from_records(example_type, rows: list[dict]) -> list:
  """records' inverse: each dict back into example_type, its lists tuples again."""
  return [example_type(**{k: tuple(v) if isinstance(v, list) else v for k, v in row.items()})
          for row in rows]


# ------------------------------------------------------------------- the files
def write_split(task, split: str, tokenizer, prefix: str) -> str:
  """The task's `split`, read and featurized as a run does, as one shard file; its path."""
  data = task.config.data
  if data.get("shards"):
    raise ValueError(f"config.data.shards={data.shards!r}: writing shards reads the "
                     "sources; leave it empty")
  task.check_shardable()
  features, metadata = task.load_split(split, tokenizer)
  meta = {"task": task.name, "split": split, "fields": feature_fields(data),
          "tokenizer": tokenizer_meta(data, tokenizer), "task_state": task.shard_state(),
          "source": (data.get("sources") or {}).get(split, ""),
          "data_notes": list(task.data_notes())}
  examples = json.dumps(task.examples_record(metadata)).encode()
  arrays = {**{_FEATURE + k: np.asarray(v) for k, v in features.items()},
            "examples": np.frombuffer(examples, np.uint8),
            "meta": np.array(json.dumps(meta, sort_keys=True))}
  buffer = io.BytesIO()
  np.savez(buffer, **arrays)
  path = split_path(prefix, split)
  storage.write_bytes(path, buffer.getvalue())
  return path


def read_split(config, split: str, tokenizer=None) -> tuple[dict, list, dict]:
  """(features, example records, meta) of `split`'s file under config.data.shards, checked
  against config (and, given, the run's tokenizer)."""
  path = split_path(config.data.shards, split)
  if not storage.exists(path):
    raise ValueError(f"config.data.shards={config.data.shards!r}: no {path} (split "
                     f"{split!r}; python -m bert_jax.commands.finetune_shards writes it)")
  try:
    arrays = np.load(io.BytesIO(storage.read_bytes(path)))
    meta = json.loads(str(arrays["meta"]))
    rows = json.loads(arrays["examples"].tobytes().decode())
    features = {k[len(_FEATURE):]: arrays[k] for k in arrays.files if k.startswith(_FEATURE)}
  except (OSError, ValueError, KeyError) as error:
    raise ValueError(f"{path}: not a fine-tuning shard file ({error})") from None
  check_meta(path, meta, config, split, tokenizer)
  return features, rows, meta


def check_meta(path: str, meta: dict, config, split: str, tokenizer=None) -> None:
  """One line for the first way the file was written other than this run reads it."""
  written = {"config.task": meta.get("task"), "split": meta.get("split")}
  expected = {"config.task": config.task, "split": split}
  fields, mine = meta.get("fields", {}), feature_fields(config.data)
  for key in sorted(set(fields) | set(mine)):
    written[f"config.data.{key}"] = fields.get(key)
    expected[f"config.data.{key}"] = mine.get(key)
  if tokenizer is not None:
    mine = tokenizer_meta(config.data, tokenizer)
    for key, value in mine.items():
      written[f"the tokenizer's {key}"] = meta.get("tokenizer", {}).get(key)
      expected[f"the tokenizer's {key}"] = value
  for key, value in expected.items():
    if json.dumps(written[key]) != json.dumps(value):
      raise ValueError(f"{path}: written with {key}={written[key]!r}, this run has "
                       f"{value!r}")
