"""Convert BERT weights between formats.

  python -m bert_jax.convert --input=HF_FOLDER_OR_TF_CKPT --output=DIR          # -> ours
  python -m bert_jax.convert --input=OURS_OR_ANY --output=DIR --to=hf             # -> HF

Input may be an HF folder (config.json + model.safetensors), a Google TF checkpoint
(bert_config.json + bert_model.ckpt.*), a bert_jax saved model or a training workdir
(latest checkpoint). A vocab.txt beside the input is copied to the output.
"""
import os

from absl import flags

from bert_jax import checkpoint
from bert_jax import cli
from bert_jax.convert import hf
from bert_jax.weights import load_params

if __name__ == "__main__":  # flags exist only when run as a program
  _INPUT = flags.DEFINE_string("input", None, "Weights to read (HF, TF, or bert_jax).")
  _OUTPUT = flags.DEFINE_string("output", None, "Folder to write.")
  _TO = flags.DEFINE_enum("to", "native", ["native", "hf"], "Output format.")
  _HEADS = flags.DEFINE_enum("heads", "auto", ["auto", "pretraining", "none"],
                             "Keep the MLM/NSP heads when present (auto), require or drop them.")


def convert(input_path: str, output: str, to: str = "native", heads: str = "auto") -> None:
  config, params, with_heads = load_params(input_path, heads)
  folder = input_path if os.path.isdir(input_path) else os.path.dirname(input_path)
  vocab = os.path.join(folder, "vocab.txt")
  vocab = vocab if os.path.exists(vocab) else None
  if to == "hf":
    hf.save(output, config.replace(scan_layers=False), params, vocab_path=vocab)
  else:
    checkpoint.save_model(output, config.replace(scan_layers=False), params, vocab_path=vocab)
  print(f"Wrote {to} model to {output} ({'with' if with_heads else 'without'} "
        f"pretraining heads, L{config.num_hidden_layers}/H{config.hidden_size})")


def main(argv):
  del argv
  convert(_INPUT.value, _OUTPUT.value, _TO.value, _HEADS.value)


if __name__ == "__main__":
  flags.mark_flags_as_required(["input", "output"])
  cli.run(main)
