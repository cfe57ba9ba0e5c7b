r"""What a pretrained encoder offers SST-2 before fine-tuning, beside the same shape at random.

  python -m experiments.payoff_diagnosis --model=runs/payoff/wp8k [--model=runs/payoff/wp30k]

For each model folder (any path `load_pretrained` reads) and for random weights of the
same shape and vocabulary (the model's own initialiser, --seed), with no training of the
encoder at all:
  probe accuracy   SST-2 dev accuracy of an L2-regularised logistic regression (fixed
                   strength, Newton's method, standardised features; nothing tuned on dev)
                   trained on --train_examples training sentences, read from the pooled
                   output, the last layer's [CLS] vector, the mean of the last layer over
                   the sentence's tokens, and the mean of the embedding layer's;
  [CLS] attention  per layer, averaged over heads and sentences: the weight the [CLS] row
                   puts on [CLS] itself, on [SEP], and on the sentence's words, and the
                   row's entropy as a share of uniform attention's (1.0 = uniform).
The fine-tuning classifier reads the pooled output (tanh(W h_[CLS])), so the first row is
what fine-tuning starts from; the mean rows say whether the words' vectors carry the
sentiment that [CLS] may not be collecting.
"""
import numpy as np
from absl import app
from absl import flags
from absl import logging

import jax
import jax.numpy as jnp

from bert_jax import weights as pretrained
from bert_jax.finetune import glue_reader
from bert_jax.models.layers import attention_probs
from bert_jax.text import tokenizers

_MODEL = flags.DEFINE_multi_string("model", None, "Pretrained model folders (workdirs, HF).")
_TRAIN = flags.DEFINE_integer("train_examples", 4000, "SST-2 training sentences for the probe.")
_MAX_LEN = flags.DEFINE_integer("max_seq_length", 64, "Tokens per sentence.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the random weights and the subset.")
_L2 = 1.0  # the probe's L2 strength on standardised features (fixed, not tuned)
_BATCH = 256


def logistic_probe(x_train, y_train, x_eval, y_eval, l2: float = _L2,
                   iterations: int = 30) -> float:
  """Eval accuracy of binary logistic regression (Newton's method, L2 on the weights)."""
  mean, std = x_train.mean(0), x_train.std(0) + 1e-6
  add_bias = lambda x: np.concatenate([(x - mean) / std, np.ones((len(x), 1))], 1)  # noqa: E731
  a, b = add_bias(x_train).astype(np.float64), add_bias(x_eval).astype(np.float64)
  w = np.zeros(a.shape[1])
  penalty = np.full(a.shape[1], l2)
  penalty[-1] = 0.0  # the bias is not penalised
  for _ in range(iterations):
    p = 1.0 / (1.0 + np.exp(-a @ w))
    grad = a.T @ (p - y_train) + penalty * w
    hess = (a * (p * (1 - p))[:, None]).T @ a + np.diag(penalty + 1e-9)
    w -= np.linalg.solve(hess, grad)
  return float(((b @ w > 0) == (y_eval == 1)).mean())


def encode(model, variables, features) -> dict[str, np.ndarray]:
  """Sentence features [S, H] of each kind, and the [CLS] rows' attention statistics."""
  out = {"pooled": [], "cls": [], "mean_last": [], "mean_embeddings": []}
  attention = []
  num_layers = model.config.num_hidden_layers

  @jax.jit
  def forward(ids, types, mask):
    enc, state = model.apply(variables, ids, types, mask, output_hidden_states=True,
                             mutable=["intermediates"])
    return enc, attention_probs(state["intermediates"], num_layers)

  for start in range(0, len(features["input_ids"]), _BATCH):
    batch = {k: jnp.asarray(v[start:start + _BATCH]) for k, v in features.items()
             if k in ("input_ids", "token_type_ids", "attention_mask")}
    enc, probs = forward(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"])
    mask = np.asarray(batch["attention_mask"], np.float32)                    # [B, T]
    ids = np.asarray(batch["input_ids"])
    mean = lambda h: (np.asarray(h) * mask[..., None]).sum(1) / mask.sum(1, keepdims=True)  # noqa: E731
    out["pooled"].append(np.asarray(enc.pooled_output))
    out["cls"].append(np.asarray(enc.sequence_output[:, 0]))
    out["mean_last"].append(mean(enc.sequence_output))
    out["mean_embeddings"].append(mean(enc.hidden_states[0]))
    attention.append([np.asarray(p[:, :, 0]) for p in probs])               # L x [B, N, T]
    out.setdefault("ids", []).append(ids)
    out.setdefault("mask", []).append(mask)
  result = {k: np.concatenate(v) for k, v in out.items()}
  result["cls_attention"] = [np.concatenate([a[layer] for a in attention])
                             for layer in range(num_layers)]
  return result


def cls_attention_stats(rows: np.ndarray, ids: np.ndarray, mask: np.ndarray,
                        cls_id: int, sep_id: int) -> dict[str, float]:
  """rows [S, N, T] (the [CLS] query's weights) -> mean shares over heads and sentences."""
  on = lambda which: float((rows * which[:, None, :]).sum(-1).mean())  # noqa: E731
  words = (mask > 0) & (ids != cls_id) & (ids != sep_id)
  entropy = -(rows * np.log(np.maximum(rows, 1e-12))).sum(-1)                # [S, N]
  uniform = np.log(mask.sum(1))[:, None]
  return {"on_cls": on(ids == cls_id), "on_sep": on(ids == sep_id), "on_words": on(words),
          "entropy_vs_uniform": float((entropy / uniform).mean())}


def main(argv):
  del argv
  logging.set_verbosity(logging.WARNING)
  rng = np.random.default_rng(_SEED.value)
  train = glue_reader.read_examples("sst2", "train")
  train = [train[i] for i in rng.permutation(len(train))[:_TRAIN.value]]
  dev = glue_reader.read_examples("sst2", "dev")
  for path in _MODEL.value:
    tokenizer = tokenizers.model_tokenizer(path)
    feats = {split: glue_reader.featurize(examples, "sst2", tokenizer, _MAX_LEN.value)
             for split, examples in (("train", train), ("dev", dev))}
    model, trained = pretrained.load_pretrained(path, heads="none")
    ids = jnp.asarray(feats["train"]["input_ids"][:2])
    random = model.init(jax.random.PRNGKey(_SEED.value), ids, jnp.zeros_like(ids),
                        jnp.ones_like(ids))
    print(f"\n{path}: SST-2 probe on {len(train)} training sentences, dev {len(dev)} "
          f"(majority {max(np.mean(feats['dev']['label']), 1 - np.mean(feats['dev']['label'])):.4f})")
    print(f"{'weights':10s} {'pooled':>8s} {'[CLS]':>8s} {'mean last':>10s} {'mean emb':>9s}")
    stats = {}
    for name, variables in (("pretrained", trained), ("random", random)):
      enc = {split: encode(model, variables, f) for split, f in feats.items()}
      accs = [logistic_probe(enc["train"][kind], feats["train"]["label"],
                             enc["dev"][kind], feats["dev"]["label"])
              for kind in ("pooled", "cls", "mean_last", "mean_embeddings")]
      print(f"{name:10s} " + " ".join(f"{a:8.4f}" for a in accs[:2]) +
            f" {accs[2]:10.4f} {accs[3]:9.4f}")
      stats[name] = [cls_attention_stats(rows, enc["dev"]["ids"], enc["dev"]["mask"],
                                         tokenizer.cls_id, tokenizer.sep_id)
                     for rows in enc["dev"]["cls_attention"]]
    print(f"{'weights':10s} layer {'on [CLS]':>9s} {'on [SEP]':>9s} {'on words':>9s} "
          f"{'entropy/uniform':>16s}")
    for name, layers in stats.items():
      for layer, s in enumerate(layers):
        print(f"{name:10s} {layer:5d} {s['on_cls']:9.3f} {s['on_sep']:9.3f} "
              f"{s['on_words']:9.3f} {s['entropy_vs_uniform']:16.3f}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["model"])
  app.run(main)
