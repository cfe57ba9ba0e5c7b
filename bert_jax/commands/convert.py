"""Convert BERT weights between formats.

  python -m bert_jax.commands.convert --input=HF_FOLDER_OR_TF_CKPT --output=DIR          # -> ours
  python -m bert_jax.commands.convert --input=OURS_OR_ANY --output=DIR --to=hf             # -> HF
  python -m bert_jax.commands.convert --input=FOLDER_WITH_BIN --output=DIR                 # -> safetensors

Input may be an HF folder (config.json + model.safetensors), a Google TF checkpoint
(bert_config.json + bert_model.ckpt.*), a bert_jax saved model or a training workdir
(latest checkpoint), or a Hub id (`org/name[@revision]`, bert_jax/files/hub.py). A fine-tuned
model keeps its task: a workdir's classifier becomes HF's ...ForSequenceClassification,
its class names config.json's id2label, where HF's head is ours (weights/hf_families.py,
`task_classes`), and back. The tokenizer files beside the input (vocab.txt, vocab.json +
merges.txt or spiece.model, and its tokenizer_config.json and tokenizer.json) are copied
to the output. An HF output also gets a tokenizer.json where the input has none (WordPiece
and BPE: transformers 5 reads ModernBERT's tokenizer only from one) and the tokenizer's
special ids in config.json (RoBERTa's and ModernBERT's bos/eos/cls/sep_token_id).

An HF folder with only pytorch_model.bin (older transformers' save_pretrained) becomes the
same folder with model.safetensors (by default; --to=native goes on to ours): the pickle
is read with torch.load(weights_only=True), so torch must be installed for this one step.
"""
import os
import shutil
import tempfile

from absl import flags

from bert_jax.weights import checkpoint
from bert_jax.startup import cli
from bert_jax.files import hub
from bert_jax.files import storage
from bert_jax.weights import hf, hf_files
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text import tokenizers
from bert_jax.weights import label_names, load_params, model_spec, readable_path, resolve

if __name__ == "__main__":  # flags exist only when run as a program
  _INPUT = flags.DEFINE_string("input", None, "Weights to read (HF, TF, or bert_jax).")
  _OUTPUT = flags.DEFINE_string("output", None, "Folder to write.")
  _TO = flags.DEFINE_enum("to", None, ["native", "hf"], "Output format (default: native; "
                          "hf for a folder of pytorch_model.bin).")
  _HEADS = flags.DEFINE_enum("heads", "auto", ["auto", "pretraining", "none"],
                             "Keep the heads when present (auto: pretraining or fine-tuned), "
                             "require the pretraining heads, or keep the encoder alone (none).")


TOKENIZER_SETTINGS = ("tokenizer_config.json", "special_tokens_map.json", "tokenizer.json")


def convert(input_path: str, output: str, to: str = "native", heads: str = "auto") -> None:
  if hf_files.only_bin(_input_folder(input_path)):  # a Hub id: its snapshot's
    return _convert_bin(_input_folder(input_path), output, to, heads)
  source = resolve(input_path)  # format and config read once
  config, params, _ = load_params(source, heads)
  # The headed model (a fine-tuned classifier stays one); heads="none" keeps the encoder.
  spec = model_spec(source, params) if "bert" in params else None
  labels = label_names(source) if spec else None  # e.g. CoNLL's tags, in order
  folder = tokenizers.model_folder(source.path)  # a URL's files copied to a local one
  try:
    kind, files = tokenizers.folder_kind(folder, tokenizer_kinds(config.family))
  except FileNotFoundError:
    kind, files = "no", []  # weights without a tokenizer beside them
  tokenizer = None
  if to == "hf" and files:
    try:
      tokenizer = tokenizers.model_tokenizer(folder, tokenizer_kinds(config.family))
    except ValueError as e:  # e.g. a vocab.txt without BERT's specials: copied as it is
      print(f"Note: {e}; its files are copied as they are, with no tokenizer.json and no "
            "special ids in config.json")

  def write(local: str) -> None:
    """The HF files (to="hf") and the tokenizer's into a local folder (`output`, or one
    copied there: storage.write_folder)."""
    if to == "hf":
      token_ids = tokenizer and {"cls_id": tokenizer.cls_id, "sep_id": tokenizer.sep_id}
      hf.save(local, config.replace(scan_layers=False), params, spec=spec, labels=labels,
              token_ids=token_ids)
    settings = [n for n in TOKENIZER_SETTINGS if os.path.isfile(os.path.join(folder, n))]
    for name in sorted(set(files + settings)):
      shutil.copyfile(os.path.join(folder, name), os.path.join(local, name))
    if to == "hf" and tokenizer and not os.path.isfile(os.path.join(local, "tokenizer.json")):
      tokenizer.save_tokenizer_json(local)  # transformers 5 reads ModernBERT's only from it

  if to != "hf":  # orbax writes the params where `output` is, a bucket's folder too
    checkpoint.save_model(output, config.replace(scan_layers=False), params, spec=spec,
                          labels=labels)
  storage.makedirs(output)
  storage.write_folder(output, write)
  print(f"Wrote {to} model to {output} ({spec['headed_model'] if spec else 'encoder'}, "
        f"L{config.num_hidden_layers}/H{config.hidden_size}, {kind} tokenizer)")


def _convert_bin(folder: str, output: str, to: str, heads: str) -> None:
  """An HF folder of pytorch_model.bin: its tensors as model.safetensors, the rest of the
  folder as it is (to="hf"); to="native" converts that folder on to ours."""
  if to == "hf":  # (bin_to_safetensors makes the folder once the weights have been read)
    count = storage.write_folder(output, lambda local: hf_files.bin_to_safetensors(folder, local))
    resolve(output)  # the folder written loads: config, safetensors whole
    print(f"Wrote {os.path.join(output, 'model.safetensors')} ({count} tensors read from "
          f"{folder}'s pytorch_model.bin with torch.load(weights_only=True))")
    return
  with tempfile.TemporaryDirectory() as staged:
    hf_files.bin_to_safetensors(folder, staged)
    convert(staged, output, to, heads)


def _input_folder(path: str) -> str:
  """Where the input's files are read: a Hub id's snapshot, a URL's HF folder copied to a
  local one (weights.readable_path)."""
  return readable_path(hub.local_path(path))


def main(argv):
  del argv
  to = _TO.value or ("hf" if hf_files.only_bin(_input_folder(_INPUT.value)) else "native")
  convert(_INPUT.value, _OUTPUT.value, to, _HEADS.value)


if __name__ == "__main__":
  flags.mark_flags_as_required(["input", "output"])
  cli.run(main, urls=("input", "output"))
