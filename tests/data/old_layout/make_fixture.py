r"""Writes this folder's checkpoints with the code of commit 685a8e2 (the last before the
modules were reorganised into bert_jax/run/ and split), for tests/test_old_layout_checkpoints.py.

Run at commit 685a8e2 on 2026-11-28 (CPU, jax 0.10.2, flax 0.12.8, orbax-checkpoint 0.12.8),
from a checkout of that commit beside the data root (../shared/data), so that
`import bert_jax` is the old package:

  git worktree add /tmp/old685 685a8e2 && ln -s /work/shared /tmp/shared
  cd /tmp/old685 && PYTHONPATH=. JAX_PLATFORMS=cpu \
      python /path/to/bert_jax/tests/data/old_layout/make_fixture.py \
      --output=/path/to/bert_jax/tests/data/old_layout

It writes, beside itself:
  vocab.txt     a 96-piece WordPiece vocabulary: BERT's specials, the letters (whole and
                ##-continued), digits, punctuation and a few common words: no text is [UNK]
  corpus.txt    the plain pretraining format: the first sentences of the first articles of
                wikitext-2/valid.txt (the data root's), as `bert_jax.text.prepare` writes them
  saved_model/  `checkpoint.save_model`'s layout: model_config.json (BertConfig fields and
                the task model spec), params/ (orbax) and vocab.txt. A BERT with pretraining
                heads (MLM + NSP), L1/H16/A2/I32, its initial params each moved by noise so
                that no two tensors of a kind are alike (ones and zeros would hide a swap)
  workdir/      a 3-step run of the old trainer (configs/tiny.py at L2/H24/A2/I48, T32,
                batch 4, the vocabulary above): model_config.json, config.json, the tokenizer
                files, metrics.jsonl, eval_results.json and checkpoints/3/ (state + data);
                its TensorBoard files and run report are deleted (not needed to load or
                resume; the report describes the machine it ran on)
  expected.npz  the old code's outputs of both models on fixed inputs: `<model>/<output>`
                for model saved_model / workdir and output sequence_output, pooled_output,
                mlm_logits, nsp_logits, plus the inputs themselves

The corpus and vocabulary paths in the workdir's config.json are relative to the data root
(config.data.data_dir ""), which was this folder while the run trained (BERT_JAX_DATA_DIR),
so a test points its data root at its copy of the folder and resumes the run. Orbax's
commit_success.txt markers name the folder they were written in; nothing reads them.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import flax.linen as nn
import jax
import numpy as np

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
LETTERS = [chr(c) for c in range(ord("a"), ord("z") + 1)]
WORDS = ["the", "of", "and", "in", "to", "was", "is", "he", "for", "on", "as", "with",
         "by", "his", "at", "that"]
PUNCTUATION = list(".,;:'\"()-@=!?")
DIGITS = list("0123456789")

# Articles and sentences per article taken from wikitext-2/valid.txt.
ARTICLES, SENTENCES = 8, 6

# The workdir's run: configs/tiny.py's runlocal variant at these fields.
RUN_FIELDS = {
    "model.vocab_size": 96, "model.hidden_size": 24, "model.num_hidden_layers": 2,
    "model.num_attention_heads": 2,
    "model.intermediate_size": 48, "model.max_position_embeddings": 32,
    "data.max_seq_length": 32, "data.max_predictions_per_seq": 5, "data.batch_size": 4,
    "data.eval_held_out_docs": 0, "data.cache_dir": "", "data.data_dir": "",
    "data.train_files": ("corpus.txt",), "data.vocab_path": "vocab.txt",
    "num_train_steps": 3, "log_every_steps": 1, "eval_every_steps": 0,
    "checkpoint_every_steps": 3, "max_checkpoints_to_keep": 1,
}


def write_vocab(path: str) -> list[str]:
  pieces = SPECIALS + LETTERS + [f"##{c}" for c in LETTERS] + DIGITS + PUNCTUATION + WORDS
  assert len(pieces) == len(set(pieces)) == 96, len(pieces)
  with open(path, "w") as f:
    f.write("".join(p + "\n" for p in pieces))
  return pieces


def write_corpus(path: str, data_root: str) -> None:
  """The first SENTENCES sentences of the first ARTICLES documents, prepared by the old
  `bert_jax.text.prepare` (its own process, as the command is meant to be run)."""
  with tempfile.TemporaryDirectory() as tmp:
    full = os.path.join(tmp, "pretrain.txt")
    subprocess.run([sys.executable, "-m", "bert_jax.text.prepare",
                    f"--source={os.path.join(data_root, 'wikitext-2', 'valid.txt')}",
                    f"--output={full}"], check=True, capture_output=True)
    with open(full, encoding="utf-8") as f:
      documents = f.read().split("\n\n")
  kept = ["\n".join(doc.strip("\n").split("\n")[:SENTENCES]) for doc in documents[:ARTICLES]]
  with open(path, "w", encoding="utf-8") as f:
    f.write("\n\n".join(kept) + "\n")


def fixed_inputs() -> dict:
  """Two rows of T16: a sentence pair and a shorter single sentence padded with [PAD]."""
  input_ids = np.array(
      [[2, 5, 31, 82, 9, 17, 3, 73, 76, 18, 22, 15, 65, 3, 0, 0],
       [2, 58, 14, 6, 40, 89, 77, 31, 28, 4, 11, 3, 0, 0, 0, 0]], np.int32)
  token_type_ids = np.array([[0] * 7 + [1] * 7 + [0] * 2, [0] * 16], np.int32)
  attention_mask = (input_ids != 0).astype(np.int32)
  return {"input_ids": input_ids, "token_type_ids": token_type_ids,
          "attention_mask": attention_mask}


def outputs(model, variables, inputs: dict) -> dict:
  out = model.apply(variables, inputs["input_ids"], inputs["token_type_ids"],
                    inputs["attention_mask"], deterministic=True)
  return {"sequence_output": out.sequence_output, "pooled_output": out.pooled_output,
          "mlm_logits": out.mlm_logits, "nsp_logits": out.sentence_logits["nsp"]}


def write_saved_model(directory: str, vocab: str) -> None:
  from bert_jax import checkpoint
  from bert_jax.models import task_models
  from bert_jax.models.config import BertConfig
  config = BertConfig(vocab_size=96, hidden_size=16, num_hidden_layers=1,
                      num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
  spec = {"task_model": "pretraining", "sentence_heads": ["nsp"]}
  model = task_models.build(config, spec)
  inputs = fixed_inputs()
  variables = model.init(jax.random.PRNGKey(0), inputs["input_ids"])
  params = jax.device_get(nn.unbox(variables)["params"])  # plain arrays, no axis names
  leaves, treedef = jax.tree.flatten(params)
  keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
  leaves = [np.asarray(x + 0.05 * jax.random.normal(k, x.shape), np.float32)
            for x, k in zip(leaves, keys)]
  checkpoint.save_model(directory, config, jax.tree.unflatten(treedef, leaves),
                        vocab_path=vocab, spec=spec)


def write_workdir(workdir: str, root: str) -> None:
  from configs import tiny
  from bert_jax import trainer
  os.environ["BERT_JAX_DATA_DIR"] = root  # the run's relative data paths resolve here
  config = tiny.get_config(f"corpus={os.path.join(root, 'corpus.txt')},runlocal=True")
  for key, value in RUN_FIELDS.items():
    node = config
    *parents, leaf = key.split(".")
    for name in parents:
      node = node[name]
    node[leaf] = value
  trainer.train_and_evaluate(config, workdir)
  shutil.rmtree(os.path.join(workdir, "tensorboard"))
  os.remove(os.path.join(workdir, "run_report.json"))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--output", default=os.path.dirname(os.path.abspath(__file__)))
  parser.add_argument("--data_root", default=os.path.abspath(os.path.join("..", "shared",
                                                                          "data")))
  args = parser.parse_args()
  root = os.path.abspath(args.output)
  for name in ("saved_model", "workdir"):
    shutil.rmtree(os.path.join(root, name), ignore_errors=True)
  vocab = os.path.join(root, "vocab.txt")
  write_vocab(vocab)
  write_corpus(os.path.join(root, "corpus.txt"), args.data_root)
  write_saved_model(os.path.join(root, "saved_model"), vocab)
  write_workdir(os.path.join(root, "workdir"), root)

  import bert_jax
  inputs = fixed_inputs()
  arrays = dict(inputs)
  for name in ("saved_model", "workdir"):
    model, variables = bert_jax.load_pretrained(os.path.join(root, name))
    print(name, type(model).__name__)
    for key, value in outputs(model, variables, inputs).items():
      arrays[f"{name}/{key}"] = np.asarray(value, np.float32)
  np.savez(os.path.join(root, "expected.npz"), **arrays)


if __name__ == "__main__":
  main()
