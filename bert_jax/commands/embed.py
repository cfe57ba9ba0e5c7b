r"""Feature extraction: one embedding per input line (or per token).

  python -m bert_jax.commands.embed --model=PATH --input=sentences.txt --output=out.npy \
      [--layers=-1 | --layers=-4,-3,-2,-1] [--pooling=cls|mean|none] [--normalize]

PATH is anything `load_pretrained` reads, with its tokenizer (vocab.txt, vocab.json +
merges.txt or a SentencePiece .model) beside the weights. Layers are
indices into hidden_states (0 = embeddings, -1 = last layer) and are concatenated on the
feature axis. Output: float32 [N, D * len(layers)] for cls/mean pooling, or
[N, max_length, D * len(layers)] for pooling=none (zeros at padding positions).
"""
import functools
import io

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from bert_jax.startup import cli
from bert_jax.files import storage
from bert_jax.models import features as features_lib
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import model_tokenizer
from bert_jax.weights import load_pretrained

# --pooling: (hidden [B, T, D], attention_mask [B, T]) -> [B, D], or [B, T, D] for "none"
# (zeros at padding). The sentence vectors are the headed models' (models/features.py).
EMBEDDING_POOLINGS = {
    "cls": lambda hidden, mask: features_lib.cls_vectors(hidden),
    "mean": features_lib.token_mean,
    "none": lambda hidden, mask: hidden * mask[..., None].astype(hidden.dtype),
}


def parse_layers(spec: str) -> tuple[int, ...]:
  try:
    return tuple(int(x) for x in spec.split(","))
  except ValueError:
    raise ValueError(f"--layers={spec!r}: expected comma-separated integers like -4,-3,-2,-1")


@functools.partial(jax.jit, static_argnames=("model", "layers", "pooling", "normalize"))
def _features(model, variables, batch, layers, pooling, normalize):
  out = model.apply(variables, batch["input_ids"], batch["token_type_ids"],
                    batch["attention_mask"], output_hidden_states=True)
  hidden = jnp.concatenate([out.hidden_states[i] for i in layers], axis=-1)  # [B, T, D]
  features = EMBEDDING_POOLINGS[pooling](hidden, batch["attention_mask"])
  if normalize:
    norm = jnp.linalg.norm(features, axis=-1, keepdims=True)
    features = features / jnp.maximum(norm, 1e-12)
  return features.astype(jnp.float32)


def embed_sentences(model, variables, tokenizer, sentences, layers=(-1,), pooling="mean",
                    max_length=128, batch_size=32, normalize=False) -> np.ndarray:
  """Embeds `sentences` in fixed-size batches (one compile); returns float32 numpy."""
  if pooling not in EMBEDDING_POOLINGS:
    raise ValueError(f"pooling={pooling!r}: expected one of {tuple(EMBEDDING_POOLINGS)}")
  num_layers = model.config.num_hidden_layers
  for i in layers:
    if not -(num_layers + 1) <= i <= num_layers:
      raise ValueError(f"layer {i} out of range for a {num_layers}-layer model "
                       f"(hidden_states has {num_layers + 1} entries)")
  chunks = []
  for start in range(0, len(sentences), batch_size):
    part = list(sentences[start:start + batch_size])
    real = len(part)
    part += [""] * (batch_size - real)  # pad the last batch: one compiled shape
    batch = tokenizer.encode_for_model(part, max_length=max_length)
    feats = _features(model, variables, batch, tuple(layers), pooling, normalize)
    chunks.append(np.asarray(feats)[:real])
  return np.concatenate(chunks) if chunks else np.zeros((0,), np.float32)


def read_lines(path: str) -> list[str]:
  try:
    with storage.open_file(path) as f:
      lines = [line.rstrip("\n") for line in f]
  except FileNotFoundError:
    raise FileNotFoundError(f"--input: {path} not found") from None
  except UnicodeDecodeError as e:
    raise ValueError(f"--input: {path} is not valid UTF-8 ({e})") from None
  if not lines:
    raise ValueError(f"--input: {path} is empty")
  return lines


if __name__ == "__main__":  # flags exist only when run as a program
  _MODEL = flags.DEFINE_string("model", None, "HF folder, TF checkpoint or bert_jax checkpoint.")
  _INPUT = flags.DEFINE_string("input", None, "Text file, one sentence per line.")
  _OUTPUT = flags.DEFINE_string("output", None, "Where to write the .npy array.")
  _LAYERS = flags.DEFINE_string("layers", "-1", "hidden_states indices to concatenate.")
  _POOLING = flags.DEFINE_enum("pooling", "cls", list(EMBEDDING_POOLINGS),
                               "How to pool tokens.")
  _NORMALIZE = flags.DEFINE_bool("normalize", False, "L2-normalise each embedding.")
  _MAX_LENGTH = flags.DEFINE_integer("max_length", 128, "Tokens per sentence (truncated).")
  _BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sentences per forward pass.")


def main(argv):
  del argv
  sentences = read_lines(_INPUT.value)  # a bad --input fails before the model loads
  layers = parse_layers(_LAYERS.value)
  model, variables = load_pretrained(_MODEL.value, heads="none")
  tokenizer = model_tokenizer(_MODEL.value, tokenizer_kinds(model.config.family))
  features = embed_sentences(model, variables, tokenizer, sentences, layers, _POOLING.value,
                             _MAX_LENGTH.value, _BATCH_SIZE.value, _NORMALIZE.value)
  data = io.BytesIO()
  np.save(data, features)
  storage.write_bytes(_OUTPUT.value, data.getvalue())  # local, or a bucket's object
  print(f"Wrote {features.shape} float32 to {_OUTPUT.value}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["model", "input", "output"])
  cli.run(main, urls=("model", "input", "output"))
