"""The console scripts that `pip install` puts on PATH, one per command-line program.

  bert-jax-train --config=configs/tiny.py --workdir=runs/tiny     # = python -m bert_jax.train
  bert-jax-fill-mask --model=runs/tiny "the cat sat on the [MASK] ."

Each runs its module exactly as `python -m MODULE` does (the module is `__main__`, so its
flags, its error handling and its `--help` are the same), with the script's name in its
error lines. `python -m` keeps working everywhere.
"""
import runpy
import sys

# Script name (pyproject.toml [project.scripts]) -> the module it runs.
PROGRAMS = {
    "bert-jax-train": "bert_jax.train",
    "bert-jax-fill-mask": "bert_jax.commands.fill_mask",
    "bert-jax-embed": "bert_jax.commands.embed",
    "bert-jax-convert": "bert_jax.commands.convert",
    "bert-jax-prepare": "bert_jax.text.prepare",
    "bert-jax-learn-vocab": "bert_jax.text.learn_vocab",
    "bert-jax-word-vectors": "bert_jax.pretrain.word_vectors",
    "bert-jax-inspect": "bert_jax.pretrain.inspect",
    "bert-jax-download": "bert_jax.commands.download",
}


def _run(script: str) -> None:
  sys.argv[0] = script
  runpy.run_module(PROGRAMS[script], run_name="__main__", alter_sys=True)


def train():
  _run("bert-jax-train")


def fill_mask():
  _run("bert-jax-fill-mask")


def embed():
  _run("bert-jax-embed")


def convert():
  _run("bert-jax-convert")


def prepare():
  _run("bert-jax-prepare")


def learn_vocab():
  _run("bert-jax-learn-vocab")


def word_vectors():
  _run("bert-jax-word-vectors")


def inspect():
  _run("bert-jax-inspect")


def download():
  _run("bert-jax-download")
