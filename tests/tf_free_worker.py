"""The subprocess half of the TensorFlow-free runs of tests/test_shards.py and
test_finetune_shards.py.

  python tests/tf_free_worker.py --config_json=OVERRIDES --workdir=DIR [--hf_dir=FOLDER] \
      [--config=NAME:ARG]

Any import of tensorflow, tensorflow_text, tensorflow_datasets or tensorboard raises in this
process (a GPU image has none of them). It imports bert_jax, every module of
bert_jax.models, the train step and the trainer; loads --hf_dir (an HF safetensors folder)
when given; compiles configs/NAME.py's get_config(ARG) (--config, default
tiny:runlocal=True) with the --config_json overrides ({"data.shards": PATTERN, ...}) as
--compile_only does; trains it into --workdir; and prints
one JSON line: the result, and the refused modules loaded (none).
"""
import argparse
import importlib
import json
import os
import pkgutil
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
_REFUSED = ("tensorflow", "tensorflow_text", "tensorflow_datasets", "tensorboard")


class _NoTensorFlow:
  """A meta path finder that refuses those packages by name."""

  def find_spec(self, name, path=None, target=None):
    if name.split(".")[0] in _REFUSED:
      raise ImportError(f"{name} imported on a path that must not need TensorFlow")
    return None


sys.meta_path.insert(0, _NoTensorFlow())

MODULES = ("bert_jax", "bert_jax.run.steps", "bert_jax.run.trainer",
           "bert_jax.run.compile_report", "bert_jax.weights", "bert_jax.pretrain.shards",
           "bert_jax.finetune.shards", "bert_jax.train")


def main():
  parser = argparse.ArgumentParser()
  parser.add_argument("--config_json", required=True)
  parser.add_argument("--workdir", required=True)
  parser.add_argument("--hf_dir", default="")
  parser.add_argument("--config", default="tiny:runlocal=True")
  args = parser.parse_args()
  import bert_jax.models
  models = [m.name for m in pkgutil.iter_modules(bert_jax.models.__path__, "bert_jax.models.")]
  for name in MODULES + tuple(models):  # every model family's module among them
    importlib.import_module(name)
  from bert_jax import weights
  from bert_jax.run import compile_report, trainer
  loaded = None
  if args.hf_dir:
    _, variables = weights.load_pretrained(args.hf_dir)
    loaded = sum(x.size for x in __import__("jax").tree.leaves(variables))
  name, _, arg = args.config.partition(":")
  config = importlib.import_module(f"configs.{name}").get_config(arg)
  for key, value in json.loads(args.config_json).items():
    *parents, leaf = key.split(".")
    node = config
    for parent in parents:
      node = node[parent]
    node[leaf] = value
  plan = compile_report.compile_report(config)
  result = trainer.train_and_evaluate(config, args.workdir)
  print(json.dumps({"result": {k: v for k, v in result.items() if isinstance(v, (int, float))},
                    "plan_peak_bytes": plan["peak_bytes_per_device"], "hf_params": loaded,
                    "tensorflow_modules": sorted(m for m in sys.modules
                                                 if m.split(".")[0] in _REFUSED)}))


if __name__ == "__main__":
  main()
