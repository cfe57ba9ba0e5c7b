r"""Where a pretrained model's attention heads look, on held-out pretraining batches.

  python -m experiments.attention_report --config=configs/tiny.py --workdir=runs/tiny

Loads the weights in --workdir (any path `load_pretrained` reads), runs --batches held-out
batches of the config's pretraining input, and prints per layer and head: the entropy of
the attention rows (nats; uniform over T keys is ln T), the mean weight on the keys at
offsets -2..+2 from the query (a trained BERT has "previous/next token" heads with most
of their weight on -1 or +1), and the mean weight on [CLS], [SEP] and [MASK] keys.

This is how the tiny run's plateau was read (README, Status): its heads attend by content
or sink onto [MASK] tokens, never by position.
"""
import numpy as np
from absl import app
from absl import flags
from absl import logging
from ml_collections import config_flags

from bert_jax import weights as pretrained
from bert_jax.pretrain import pipeline as pretraining
from bert_jax.text.tokenizers import make_tokenizer
from bert_jax.models.layers import attention_probs

_CONFIG = config_flags.DEFINE_config_file("config", None, "A pretraining config file.")
_WORKDIR = flags.DEFINE_string("workdir", None, "Pretrained weights (a workdir, HF folder...).")
_BATCHES = flags.DEFINE_integer("batches", 2, "Held-out batches to look at.")
_OFFSETS = (-2, -1, 0, 1, 2)


def head_statistics(probs: np.ndarray, input_ids: np.ndarray, attention_mask: np.ndarray,
                    special_ids: dict[str, int]) -> list[dict[str, float]]:
  """probs [B, N, F, T] of one layer -> one dict per head, over the real query tokens."""
  real = attention_mask.astype(bool)                                        # [B, F]
  rows = []
  for head in range(probs.shape[1]):
    p = probs[:, head]                                                       # [B, F, T]
    entropy = -(p * np.log(np.maximum(p, 1e-12))).sum(-1)                    # [B, F]
    stats = {"entropy": float(entropy[real].mean())}
    for offset in _OFFSETS:
      diagonal = np.diagonal(p, offset=offset, axis1=1, axis2=2)             # [B, T - |o|]
      queries = real[:, max(0, -offset):real.shape[1] - max(0, offset)]
      keys = real[:, max(0, offset):real.shape[1] - max(0, -offset)]
      stats[f"offset{offset:+d}"] = float(diagonal[queries & keys].mean())
    for name, token_id in special_ids.items():
      to_token = (p * (input_ids == token_id)[:, None, :]).sum(-1)           # [B, F]
      stats[name] = float(to_token[real].mean())
    rows.append(stats)
  return rows


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)  # orbax's restore logs
  config = _CONFIG.value
  model, variables = pretrained.load_pretrained(_WORKDIR.value, heads="none")
  model_config = model.config
  config.data.eval_held_out_docs = config.data.eval_held_out_docs or 20
  tokenizer = make_tokenizer(config.data)
  _, held_out = pretraining.make_inputs(config.data, tokenizer=tokenizer)
  special_ids = {name: tokenizer.vocab.index(name) for name in ("[CLS]", "[SEP]", "[MASK]")}
  per_layer = [[] for _ in range(model_config.num_hidden_layers)]
  for i, batch in enumerate(held_out.epoch_batches(0)):
    if i >= _BATCHES.value:
      break
    _, state = model.apply(variables, batch["input_ids"], batch["token_type_ids"],
                           batch["attention_mask"], mutable=["intermediates"])
    for layer, probs in enumerate(attention_probs(state["intermediates"],
                                                  model_config.num_hidden_layers)):
      per_layer[layer].append(head_statistics(np.asarray(probs), batch["input_ids"],
                                              batch["attention_mask"], special_ids))
  seq_len = config.data.max_seq_length
  print(f"{_WORKDIR.value}: {len(per_layer[0])} held-out batches of {seq_len} tokens "
        f"(uniform attention: entropy {np.log(seq_len):.2f}, {1 / seq_len:.3f} per key)")
  columns = ["entropy"] + [f"offset{o:+d}" for o in _OFFSETS] + list(special_ids)
  print("layer head " + " ".join(f"{c:>9s}" for c in columns))
  for layer, batches in enumerate(per_layer):
    for head in range(len(batches[0])):
      values = [np.mean([b[head][c] for b in batches]) for c in columns]
      print(f"{layer:5d} {head:4d} " + " ".join(f"{v:9.3f}" for v in values))


if __name__ == "__main__":
  flags.mark_flags_as_required(["config", "workdir"])
  app.run(main)
