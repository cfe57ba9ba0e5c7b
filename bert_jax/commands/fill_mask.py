"""Fill-mask: the MLM head's most likely tokens for each [MASK] in a text.

  python -m bert_jax.commands.fill_mask --model=runs/tiny "the cat sat on the [MASK] ." [--top_k=5]

PATH is anything `load_pretrained` reads that carries the MLM head (a bert_jax pretraining
workdir or checkpoint, a prompt-tuned GLUE workdir, an HF BertForPreTraining/BertForMaskedLM
folder, a Google TF checkpoint), with its tokenizer files beside the weights. Each text may
hold several [MASK]s (the tokenizer's mask token: `<mask>` for byte-level BPE, RoBERTa's and
ModernBERT's here); each is scored on its own (the others stay [MASK]), as HF's fill-mask
pipeline does.
The probabilities are the softmax over the whole vocabulary. Each prediction is shown as
its decoded text, as HF's fill-mask pipeline shows `token_str` (byte-level BPE's `Ġit` and
SentencePiece's `▁it` read `it`; a WordPiece continuation keeps its `##`);
`--raw_pieces` shows the vocabulary's entries instead.
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from bert_jax.startup import cli
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import model_tokenizer
from bert_jax.models.headed import BertForPreTraining, BertForPromptClassification
from bert_jax.weights import load_pretrained


@functools.partial(jax.jit, static_argnames=("model",))
def _mlm_probabilities(model, variables, batch, positions):
  inputs = (batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], positions)
  if isinstance(model, BertForPromptClassification):  # its MLM head, the whole vocabulary
    logits = model.apply(variables, *inputs, method="masked_lm")
  else:
    logits = model.apply(variables, *inputs).mlm_logits
  return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)  # [B, P, V]


def token_text(tokenizer, token_id: int) -> str:
  """One vocabulary entry as text: the tokenizer's decoding of it alone, without the
  space that marks a word start (HF's fill-mask `token_str`); an entry that decodes to
  whitespace only (byte-BPE's `ĉ`, a tab) is shown as the entry."""
  return tokenizer.decode([token_id]).strip() or tokenizer.vocab[token_id]


def fill_mask(model, variables, tokenizer, texts, top_k: int = 5, max_length: int = 128,
              raw_pieces: bool = False) -> list[list[list[tuple[str, float]]]]:
  """For each text, for each [MASK] in it (left to right): top_k (token, probability); a
  token is `token_text` (decoded), or the vocabulary entry with `raw_pieces`."""
  if not isinstance(model, (BertForPreTraining, BertForPromptClassification)):
    raise ValueError(f"fill_mask needs a model with its MLM head (BertForPreTraining, or "
                     f"a prompt-tuned BertForPromptClassification), got "
                     f"{type(model).__name__}: this checkpoint has no MLM head")
  if top_k < 1:
    raise ValueError(f"top_k={top_k}: expected >= 1")
  max_length = min(max_length, model.config.max_position_embeddings)
  batch = tokenizer.encode_for_model(list(texts), max_length=max_length)
  mask_positions = [np.flatnonzero(ids == tokenizer.mask_id) for ids in batch["input_ids"]]
  for row, (text, positions) in enumerate(zip(texts, mask_positions)):
    if not len(positions):
      raise ValueError(f"text {row} has no {tokenizer.vocab[tokenizer.mask_id]} (this "
                       f"model's mask token) within its first {max_length} tokens: {text!r}")
  # The MLM head runs on the [MASK] positions only: [B, P], padded with position 0.
  padded = np.zeros((len(texts), max(map(len, mask_positions))), np.int32)
  for row, positions in enumerate(mask_positions):
    padded[row, :len(positions)] = positions
  probabilities = np.asarray(_mlm_probabilities(model, variables, batch, padded))
  results = []
  for row, positions in enumerate(mask_positions):
    per_mask = []
    for slot in range(len(positions)):
      best = np.argsort(-probabilities[row, slot], kind="stable")[:top_k]
      per_mask.append([(tokenizer.vocab[i] if raw_pieces else token_text(tokenizer, i),
                        float(probabilities[row, slot, i])) for i in best])
    results.append(per_mask)
  return results


if __name__ == "__main__":  # flags exist only when run as a program
  _MODEL = flags.DEFINE_string("model", None, "Workdir, checkpoint, HF folder or TF checkpoint.")
  _TOP_K = flags.DEFINE_integer("top_k", 5, "Predictions shown per [MASK].")
  _MAX_LENGTH = flags.DEFINE_integer("max_length", 128, "Tokens per text (truncated).")
  _RAW_PIECES = flags.DEFINE_bool("raw_pieces", False, "Show vocabulary entries (`Ġit`, "
                                  "`▁it`) instead of their decoded text (`it`).")


def main(argv):
  texts = argv[1:]
  if not texts:
    raise app.UsageError("give one or more texts with [MASK] in them")
  model, variables = load_pretrained(_MODEL.value)
  tokenizer = model_tokenizer(_MODEL.value, tokenizer_kinds(model.config.family))
  for text, masks in zip(texts, fill_mask(model, variables, tokenizer, texts, _TOP_K.value,
                                          _MAX_LENGTH.value, _RAW_PIECES.value)):
    print(text)
    for i, predictions in enumerate(masks):
      shown = "  ".join(f"{token} {probability:.3f}" for token, probability in predictions)
      print(f"  [MASK] {i + 1}: {shown}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["model"])
  cli.run(main, urls=("model",))
