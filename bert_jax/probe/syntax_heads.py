r"""Which attention heads track syntax: Clark et al. (2019)'s per-head dependency probe.

  python -m bert_jax.probe.syntax_heads --model=PATH [--random_init] \
      [--treebank=nltk_corpora/dependency_treebank.zip] [--alignment=first] \
      [--max_length=128] [--output=result.json]

For each sentence of the Penn Treebank dependency sample (text/dependency_treebank.py),
the model reads `[CLS] words [SEP]` (one word's pieces as in running text), and every
layer's attention maps (L x [N, T, T]) become word-to-word maps by the --alignment:
  first   attention from a word is its first piece's; attention to a word is to its
          first piece (the word-level view of first-piece tagging);
  mean    as Clark et al.'s released code: attention to a word is the sum over its
          pieces, attention from a word the mean over its pieces.
[CLS] and [SEP] are left out and a word's attention to itself is zeroed, then for every
relation of probe/relations.py and every layer x head:
  dep->gov  the share of the relation's dependents whose most-attended word (argmax of
            their row) is their governor;
  gov->dep  the share of dependents whose governor is the word that attends most to them
            (argmax of their column; Clark et al.'s "head<-dep").
Beside it the fixed-offset baseline: the share of dependents whose governor is the word
at relative position k, for the best k in OFFSETS. Sentences whose pieces do not fit in
--max_length tokens are left out and counted in the output.

The printed table names heads layer-head, both 1-based, as Clark et al. do. Their
numbers for BERT-Base (CLARK_2019) stand beside ours; they used Stanford Dependencies on
the WSJ dev set, where this sample's arcs come from head rules (relations.py).
--random_init probes the same architecture with freshly initialised weights (--seed).
--output writes the whole result (every head's accuracy per relation) as JSON.
"""
import dataclasses
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np
from absl import flags

from bert_jax.files import storage
from bert_jax.startup import cli
from bert_jax.models.layers import attention_probs
from bert_jax.probe import relations as relation_rules
from bert_jax.text.dependency_treebank import DEFAULT_PATH
from bert_jax.text.dependency_treebank import DependencySentence
from bert_jax.text.dependency_treebank import read_treebank
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import model_tokenizer
from bert_jax.weights import load_pretrained

OFFSETS = tuple(k for k in range(-5, 6) if k)
DIRECTIONS = ("dep->gov", "gov->dep")
# Treebank escapes -> the characters of running text.
PTB_ESCAPES = {"-LRB-": "(", "-RRB-": ")", "-LCB-": "{", "-RCB-": "}", "``": '"',
               "''": '"', "`": "'"}
# Clark et al. (2019), BERT-Base on the WSJ dev set (Stanford Dependencies), from the
# outputs of the authors' Syntax_Analysis notebook (their Table 1), heads 1-based:
# relation -> (layer-head, direction, accuracy %, best offset, offset accuracy %).
# Their "aux" is Stanford's aux alone (auxpass, 94.1 at 4-10, is a row of its own).
CLARK_2019 = {
    "all": ("7-6", "dep->gov", 34.7, 1, 26.7),
    "prep": ("7-4", "dep->gov", 66.7, -1, 61.8),
    "pobj": ("9-6", "gov->dep", 76.3, -2, 34.6),
    "det": ("8-11", "dep->gov", 94.3, 1, 51.7),
    "nn": ("4-10", "dep->gov", 70.4, 1, 70.2),
    "nsubj": ("8-2", "dep->gov", 58.5, 1, 45.5),
    "amod": ("4-10", "dep->gov", 75.6, 1, 68.3),
    "dobj": ("8-10", "dep->gov", 86.8, -2, 40.0),
    "advmod": ("7-6", "dep->gov", 48.8, 1, 40.2),
    "aux": ("4-10", "dep->gov", 81.1, 1, 71.5),
    "num": ("8-11", "dep->gov", 67.4, 1, 56.4),
    "poss": ("7-6", "dep->gov", 80.5, 1, 47.7),
    "mark": ("8-2", "dep->gov", 50.7, 2, 14.5),
    "prt": ("6-7", "dep->gov", 99.1, -1, 91.4),
}


# ------------------------------------------------------------------------------------
# Words -> pieces.
# ------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Encoded:
  """One sentence as the model reads it."""
  sentence: DependencySentence
  ids: list[int]                    # [CLS] pieces [SEP]
  spans: list[tuple[int, int]]      # each word's pieces: ids[start:end]


def encode(sentences, tokenizer, max_length: int) -> tuple[list[Encoded], int]:
  """(the sentences that fit in max_length tokens, how many did not)."""
  flat = tokenizer.encode_words([PTB_ESCAPES.get(w, w) for s in sentences for w in s.words])
  encoded, left_out, start = [], 0, 0
  for sentence in sentences:
    ids, spans = [tokenizer.cls_id], []
    for pieces in flat[start:start + len(sentence.words)]:
      pieces = pieces or [tokenizer.unk_id]  # a word with no piece still has a position
      spans.append((len(ids), len(ids) + len(pieces)))
      ids.extend(pieces)
    ids.append(tokenizer.sep_id)
    start += len(sentence.words)
    if len(ids) > max_length:
      left_out += 1
    else:
      encoded.append(Encoded(sentence, ids, spans))
  return encoded, left_out


# ------------------------------------------------------------------------------------
# Token attention -> word attention.
# ------------------------------------------------------------------------------------
def _first_piece(probs: np.ndarray, spans) -> np.ndarray:
  """[..., T, T] -> [..., W, W]: from and to each word's first piece."""
  first = np.array([s for s, _ in spans])
  return probs[..., first[:, None], first[None, :]]


def _sum_to_mean_from(probs: np.ndarray, spans) -> np.ndarray:
  """[..., T, T] -> [..., W, W]: summed over the pieces attended to, averaged over the
  pieces attending (Clark et al.'s code, mode "mean")."""
  to_words = np.stack([probs[..., s:e].sum(-1) for s, e in spans], axis=-1)   # [..., T, W]
  return np.stack([to_words[..., s:e, :].mean(-2) for s, e in spans], axis=-2)


ALIGNMENTS = {"first": _first_piece, "mean": _sum_to_mean_from}


def word_attention(probs: np.ndarray, spans, alignment: str = "first") -> np.ndarray:
  """Token maps [L, N, T, T] (one sentence, T its real length) -> word maps
  [L, N, W, W], each word's attention to itself zeroed."""
  if alignment not in ALIGNMENTS:
    raise ValueError(f"unknown alignment {alignment!r}; expected one of "
                     f"{', '.join(ALIGNMENTS)}")
  words = ALIGNMENTS[alignment](probs, spans).copy()
  diagonal = np.arange(len(spans))
  words[..., diagonal, diagonal] = 0.0
  return words


# ------------------------------------------------------------------------------------
# Counting.
# ------------------------------------------------------------------------------------
class Tally:
  """Hits of every head (both directions) and every offset, per relation."""

  def __init__(self, num_layers: int, num_heads: int, relation_names=None):
    self.names = tuple(relation_names or relation_rules.RELATIONS)
    self.rules = {name: relation_rules.relation(name) for name in self.names}
    self.pairs = dict.fromkeys(self.names, 0)
    self.hits = {(name, d): np.zeros((num_layers, num_heads), np.int64)
                 for name in self.names for d in DIRECTIONS}
    self.offset_hits = {name: dict.fromkeys(OFFSETS, 0) for name in self.names}
    self.sentences = 0

  def add(self, sentence: DependencySentence, words: np.ndarray) -> None:
    """One sentence's word maps [L, N, W, W]."""
    attends_to = words.argmax(-1)     # [L, N, W]: each word's most-attended word
    attended_by = words.argmax(-2)    # [L, N, W]: the word attending most to each word
    self.sentences += 1
    for name, rule in self.rules.items():
      pairs = rule(sentence)
      if not pairs:
        continue
      dependents, governors = np.array(pairs).T
      self.pairs[name] += len(pairs)
      self.hits[name, "dep->gov"] += (attends_to[..., dependents] == governors).sum(-1)
      self.hits[name, "gov->dep"] += (attended_by[..., dependents] == governors).sum(-1)
      for k in OFFSETS:
        self.offset_hits[name][k] += int((governors - dependents == k).sum())

  def summary(self) -> dict:
    """relation -> pairs, per-head accuracies, the best head and the best offset (ties go
    to the first: dep->gov, the lower layer, the lower head; the nearer offset)."""
    out = {}
    for name in self.names:
      n = self.pairs[name]
      if not n:
        out[name] = {"pairs": 0}
        continue
      accuracy = {d: self.hits[name, d] / n for d in DIRECTIONS}
      best = max(((float(accuracy[d][layer, head]), layer, head, d) for d in DIRECTIONS
                  for layer, head in np.ndindex(accuracy[d].shape)), key=lambda b: b[0])
      offset = max(OFFSETS, key=lambda k: (self.offset_hits[name][k], -abs(k)))
      out[name] = {
          "pairs": n,
          "accuracy": {d: np.round(a, 4).tolist() for d, a in accuracy.items()},
          "best_head": {"layer": best[1] + 1, "head": best[2] + 1, "direction": best[3],
                        "accuracy": round(best[0], 4)},
          "best_offset": {"offset": offset,
                          "accuracy": round(self.offset_hits[name][offset] / n, 4)},
      }
    return out


# ------------------------------------------------------------------------------------
# The model.
# ------------------------------------------------------------------------------------
@functools.partial(jax.jit, static_argnames=("model",))
def _attention(model, variables, input_ids, attention_mask):
  """[L, B, N, T, T] float32 attention probabilities."""
  _, state = model.apply(variables, input_ids, jnp.zeros_like(input_ids), attention_mask,
                         mutable=["intermediates"])
  probs = attention_probs(state["intermediates"], model.config.num_hidden_layers)
  return jnp.stack(probs).astype(jnp.float32)


def _buckets(encoded: list[Encoded], max_length: int, batch_size: int, pad_id: int):
  """Batches of similar length: (members, input_ids [B, T], attention_mask [B, T]),
  T a multiple of 32 (at most max_length) and B always batch_size (few compiled shapes)."""
  order = sorted(range(len(encoded)), key=lambda i: len(encoded[i].ids))
  for start in range(0, len(order), batch_size):
    members = [encoded[i] for i in order[start:start + batch_size]]
    length = min(max_length, -(-max(len(e.ids) for e in members) // 32) * 32)
    ids = np.full((batch_size, length), pad_id, np.int32)
    mask = np.zeros((batch_size, length), np.int32)
    for row, e in enumerate(members):
      ids[row, :len(e.ids)] = e.ids
      mask[row, :len(e.ids)] = 1
    yield members, ids, mask


def probe(model, variables, tokenizer, sentences, alignment: str = "first",
          max_length: int = 128, batch_size: int = 32) -> dict:
  """The probe's result for `sentences` (module docstring): {"sentences", "left_out",
  "alignment", "relations": Tally.summary()}."""
  if alignment not in ALIGNMENTS:
    raise ValueError(f"--alignment={alignment!r}: expected one of {', '.join(ALIGNMENTS)}")
  limit = model.config.max_position_embeddings
  if max_length > limit:
    raise ValueError(f"--max_length={max_length} is beyond the model's {limit} positions")
  encoded, left_out = encode(sentences, tokenizer, max_length)
  tally = Tally(model.config.num_hidden_layers, model.config.num_attention_heads)
  for members, ids, mask in _buckets(encoded, max_length, batch_size, tokenizer.pad_id):
    probs = np.asarray(_attention(model, variables, ids, mask))      # [L, B, N, T, T]
    for row, e in enumerate(members):
      t = len(e.ids)
      tally.add(e.sentence, word_attention(probs[:, row, :, :t, :t], e.spans, alignment))
  return {"sentences": tally.sentences, "left_out": left_out, "max_length": max_length,
          "alignment": alignment, "relations": tally.summary()}


# ------------------------------------------------------------------------------------
# The table.
# ------------------------------------------------------------------------------------
def format_table(result: dict) -> str:
  """Markdown: per relation, the best head and offset, Clark et al.'s beside them."""
  lines = ["| relation | pairs | best head | direction | accuracy | best offset | "
           "offset accuracy | Clark et al. BERT-Base: head, accuracy (offset, accuracy) |",
           "|---|---:|---|---|---:|---:|---:|---|"]
  for name, r in result["relations"].items():
    clark = CLARK_2019.get(name)
    theirs = (f"{clark[0]} {clark[1]}, {clark[2]:.1f} ({clark[3]:+d}, {clark[4]:.1f})"
              if clark else "")
    if not r["pairs"]:
      lines.append(f"| {name} | 0 | | | | | | {theirs} |")
      continue
    head, offset = r["best_head"], r["best_offset"]
    lines.append(f"| {name} | {r['pairs']:,} | {head['layer']}-{head['head']} | "
                 f"{head['direction']} | {100 * head['accuracy']:.1f} | "
                 f"{offset['offset']:+d} | {100 * offset['accuracy']:.1f} | {theirs} |")
  return "\n".join(lines)


if __name__ == "__main__":  # flags exist only when run as a program
  _MODEL = flags.DEFINE_string("model", None, "HF folder, TF checkpoint or bert_jax workdir.")
  _TREEBANK = flags.DEFINE_string("treebank", DEFAULT_PATH,
                                  "Dependency zip or .dp file (relative to the data root).")
  _ALIGNMENT = flags.DEFINE_enum("alignment", "first", list(ALIGNMENTS),
                                 "How piece attention becomes word attention.")
  _MAX_LENGTH = flags.DEFINE_integer("max_length", 128, "Tokens per sentence, at most.")
  _BATCH_SIZE = flags.DEFINE_integer("batch_size", 32, "Sentences per forward pass.")
  _SENTENCES = flags.DEFINE_integer("sentences", 0, "Probe the first N sentences (0: all).")
  _RANDOM_INIT = flags.DEFINE_bool("random_init", False,
                                   "Fresh random weights of the model's architecture.")
  _SEED = flags.DEFINE_integer("seed", 0, "The --random_init seed.")
  _OUTPUT = flags.DEFINE_string("output", "", "Write the whole result as JSON here.")


def main(argv):
  del argv
  cli.quiet_logs()
  sentences = read_treebank(_TREEBANK.value)  # a bad treebank fails before the model loads
  if _SENTENCES.value:
    sentences = sentences[:_SENTENCES.value]
  model, variables = load_pretrained(_MODEL.value, heads="none")
  if _RANDOM_INIT.value:
    variables = jax.jit(model.init)(jax.random.PRNGKey(_SEED.value), np.zeros((1, 8), np.int32))
  tokenizer = model_tokenizer(_MODEL.value, tokenizer_kinds(model.config.family))
  result = probe(model, variables, tokenizer, sentences, _ALIGNMENT.value, _MAX_LENGTH.value,
                 _BATCH_SIZE.value)
  result = {"model": _MODEL.value, "random_init": _RANDOM_INIT.value, **result}
  weights = f"random init (seed {_SEED.value})" if _RANDOM_INIT.value else "pretrained"
  print(f"{_MODEL.value} ({weights}): {result['sentences']} sentences "
        f"({result['left_out']} longer than {_MAX_LENGTH.value} tokens left out), "
        f"alignment {_ALIGNMENT.value}; heads layer-head, 1-based")
  print(format_table(result))
  if _OUTPUT.value:
    with storage.open_file(_OUTPUT.value, "w") as f:
      json.dump(result, f, indent=1)
    print(f"wrote {_OUTPUT.value}")


if __name__ == "__main__":
  flags.mark_flags_as_required(["model"])
  cli.run(main, urls=("model", "treebank", "output"))
