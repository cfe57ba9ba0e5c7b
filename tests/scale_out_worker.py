"""The subprocess half of tests/test_scale_out.py: trainer runs on simulated devices.

JAX fixes the device count when it starts, so runs on an 8-device mesh need a process of
their own; one process runs several meshes in turn (start-up is much of the cost):

  XLA_FLAGS=--xla_force_host_platform_device_count=8 python tests/scale_out_worker.py \
      --corpus=PRETRAIN.txt --out=DIR --mesh=2,4,1 --mesh=8,1,1 [--shardings=base]

Each --mesh=D,F,T trains `small_config(corpus)` on the (data, fsdp, tensor) mesh into
DIR/DxFxT (its metrics.jsonl holds the losses), then creates DIR/DxFxT.done.
--shardings=SIZE writes DIR/shardings.json: every param of a SIZE pretraining model on the
--shardings_mesh mesh, with its total bytes and the bytes one device holds (from the
shardings alone; nothing is allocated).
"""
import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import jax  # noqa: E402
import numpy as np  # noqa: E402

from bert_jax.run import trainer  # noqa: E402
from configs import tiny  # noqa: E402
from configs.common import pretraining_config  # noqa: E402

# configs/tiny.py:runlocal=True shrunk to seconds a run; every scale-out run uses it.
SMALL = {
    "model.hidden_size": 32,
    "model.intermediate_size": 64,
    "model.max_position_embeddings": 64,
    "data.max_seq_length": 32,
    "data.max_predictions_per_seq": 5,
    "data.batch_size": 16,
    "data.eval_held_out_docs": 0,  # no eval: the comparisons are about training
    "data.num_shards": 2,  # fixed, so 1 and 2 processes read the same global batches
    "num_train_steps": 20,
    "log_every_steps": 1,
    "eval_every_steps": 0,
    "checkpoint_every_steps": 10,
    # Constant after the warmup, so a longer run's first 20 steps equal a 20-step run's.
    "optim.learning_rate": 3e-3,
    "optim.end_learning_rate": 3e-3,
}


def token_cache(corpus: str) -> str:
  """Tokenized corpora are cached beside the corpus, shared by every run of the test suite."""
  return os.path.join(os.path.dirname(os.path.abspath(corpus)), "token_cache")


def small_changes(corpus: str, **changes) -> dict:
  """SMALL + the token cache + `changes`, as dotted config keys."""
  return {**SMALL, "data.cache_dir": token_cache(corpus), **changes}


def small_config(corpus: str, **changes):
  """The tiny config shrunk by SMALL; `changes` maps dotted keys to values."""
  config = tiny.get_config(f"corpus={corpus},runlocal=True")
  for key, value in small_changes(corpus, **changes).items():
    node = config
    *parents, leaf = key.split(".")
    for parent in parents:
      node = node[parent]
    node[leaf] = value
  return config


def mesh_changes(mesh: str) -> dict:
  """'2,4,1' -> the config.mesh keys of that (data, fsdp, tensor) mesh."""
  data, fsdp, tensor = (int(n) for n in mesh.split(","))
  return {"mesh.data": data, "mesh.fsdp": fsdp, "mesh.tensor": tensor}


def param_shardings(size: str, mesh: str) -> list[dict]:
  """Every param of a pretraining model of `size`: path, spec, total and per-device bytes."""
  config = pretraining_config(size)
  for key, value in mesh_changes(mesh).items():
    config.mesh[key.split(".")[1]] = value
  setup = trainer.build(config)
  flat = jax.tree_util.tree_flatten_with_path(setup.abstract_state.params)[0]
  rows = []
  for (path, leaf), named in zip(flat, jax.tree.leaves(setup.state_sharding.params)):
    itemsize = leaf.dtype.itemsize
    rows.append({"path": jax.tree_util.keystr(path), "spec": str(named.spec),
                 "bytes": int(np.prod(leaf.shape)) * itemsize,
                 "device_bytes": int(np.prod(named.shard_shape(leaf.shape))) * itemsize})
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--corpus", required=True)
  parser.add_argument("--out", required=True)
  parser.add_argument("--mesh", action="append", default=[], help="data,fsdp,tensor")
  parser.add_argument("--shardings", default="", help="model size whose shardings to write")
  parser.add_argument("--shardings_mesh", default="1,8,1")
  args = parser.parse_args()
  for mesh in args.mesh:
    workdir = os.path.join(args.out, mesh.replace(",", "x"))
    trainer.train_and_evaluate(small_config(args.corpus, **mesh_changes(mesh)), workdir)
    open(workdir + ".done", "w").close()  # tests may use this run before the others end
  if args.shardings:
    with open(os.path.join(args.out, "shardings.json"), "w") as f:
      json.dump(param_shardings(args.shardings, args.shardings_mesh), f, indent=1)


if __name__ == "__main__":
  main()
