"""The BERT family: what each member changes in the one model code, as a table.

`BertConfig.family` names an entry of `FAMILIES`; the model code reads a member's
differences only through its entry (no `if family == ...` in bert.py, heads.py or
headed.py). A new member is one entry here, plus a small function where its inputs
differ (e.g. how position ids are made), plus its HF names in `bert_jax.weights.hf_families`.

What is plain data stays in the config, not here: a family without segment embeddings
has `type_vocab_size=0` (DistilBERT), one with a single segment row has 1 (RoBERTa);
LayerNorm epsilon, sizes and activations are config fields too.

Shape legend: B batch, T sequence length.
"""
import dataclasses
from typing import Any, Callable, Optional

import jax
import jax.numpy as jnp

# A model config (models/config.py's BertConfig). config.py imports this module to validate
# `family`, so this one names the type without importing it (no import circle).
Config = Any


def absolute_positions(input_ids: jax.Array, config: Config) -> jax.Array:
  """[B, T] -> [1, T]: 0, 1, ..., T - 1 for every row (BERT, DistilBERT)."""
  del config
  return jnp.arange(input_ids.shape[1])[None, :]


def padding_offset_positions(input_ids: jax.Array, config: Config) -> jax.Array:
  """[B, T] -> [B, T]: RoBERTa's (fairseq's) position ids, made from the input ids.

  Real tokens count up from pad_token_id + 1, skipping pad tokens; every pad token gets
  pad_token_id. (HF `create_position_ids_from_input_ids`.)
  """
  real = (input_ids != config.pad_token_id).astype(jnp.int32)
  return jnp.cumsum(real, axis=1) * real + config.pad_token_id


# Family fields that were renamed: old name -> new. A Family given an old one is refused.
RENAMED_FIELDS = {"task_head": "prediction_head", "task_head_from": "prediction_head_from"}


@dataclasses.dataclass(frozen=True)
class Family:
  """How one member of the BERT family differs inside the model code.

  Attributes:
    description: one line, for tables and errors.
    position_ids: (input_ids [B, T], config) -> position ids [B or 1, T].
    first_position: config -> the first position id a real token can get (the rows of the
      position table before it are never used by a sequence's own tokens).
    pooler: `BertModel`'s default `add_pooling_layer` (whether HF's encoder has one).
    sentence_heads: `BertForPreTraining`'s default sentence-level heads.
    pretraining_pooler: the pretraining model's encoder has a pooler even when no
      sentence head reads it (HF's BertForPreTraining does; RobertaForMaskedLM and
      DistilBertForMaskedLM do not).
    pooler_activation: the pooler's activation (a `layers.activation` name): BERT's tanh;
      where HF's encoder has none, that of HF's sequence-classification head, whose
      dense layer the classifiers' pooler is (DistilBERT's pre_classifier + ReLU,
      ELECTRA's dense + GELU).
    mlm_activation: the MLM transform's activation; None: the config's hidden_act
      (RoBERTa's LM head and ELECTRA's generator head always use exact GELU).
    always_project: a config with `embedding_size` set gets the E -> H projection even
      when E == H (ALBERT's encoder always has one); otherwise only when E != H.
    architecture: the modules that build the embeddings and the layer stack, a key of
      `bert_jax.models.bert.ARCHITECTURES`: "bert" (bert.py: learned positions, post-LN
      layers), "modernbert" (modernbert.py: RoPE, pre-norm GeGLU layers, local attention)
      or "reformer" (reformer.py: axial positions, LSH / local attention, reversible layers).
    unrolled_layers: under `scan_layers`, the leading layers that stay `layer_i` (their params
      differ from the rest: ModernBERT's layer 0 has no attention LayerNorm); the others
      are stacked (`bert_jax.models.layout`).
    prediction_head: the module every fine-tuning classifier reads its features through
      (`heads.PREDICTION_HEADS`): "" none (BERT's kind: sentence tasks read the pooler, token
      tasks the last layer), or "prediction" (ModernBERT: dense + act + norm, HF's
      ModernBertPredictionHead, on the [CLS] row or the mean for sentence tasks and on
      every token for tagging and QA; such a family's classifiers add no pooler).
    prediction_head_from: the pretraining head whose transform starts the prediction head when
      fine-tuning from a pretraining checkpoint ("" none). HF's ModernBERT task classes
      name their head as its MLM head's transform (`head.dense`, `head.norm`), so HF's
      from_pretrained of an MLM checkpoint starts the classifier's head from it.
    mlm_head: the MLM head, a key of `bert_jax.models.heads.MLM_HEADS`: "tied" (dense +
      act + LayerNorm, decoder tied to the word embeddings: BERT's kind) or "linear" (one
      untied linear layer without bias: Reformer's, on its 2H-wide output).
    task_types: its embeddings can hold a task-type table (config.task_type_vocab_size >
      0: ERNIE 3.0's use_task_id; the "bert" architecture's embeddings have one).
    packed_rows: its attention takes packed rows (several examples in one row, kept apart
      by segment ids: `data.packing`, fine-tuning's `data.pack_each_batch`); Reformer's
      bucketed LSH and chunked local attention take a key mask only.
    tokenizers: the tokenizer kinds (names in `bert_jax.text.tokenizers.KINDS`) a model of
      the member is read with, its released vocabulary's first: a vocabulary folder must
      hold exactly one of them, and is read with that kind's layout and options (a
      config's data.tokenizer names one instead). The members here also take the kinds
      learned by `bert_jax.text.learn_vocab` for any of them (`released_first`).
  """
  description: str
  position_ids: Callable[[jax.Array, Config], jax.Array]
  first_position: Callable[[Config], int]
  pooler: bool
  sentence_heads: tuple[str, ...]
  pretraining_pooler: bool
  mlm_activation: Optional[str] = None
  pooler_activation: str = "tanh"
  always_project: bool = False
  architecture: str = "bert"
  unrolled_layers: int = 0
  prediction_head: str = ""
  prediction_head_from: str = ""
  mlm_head: str = "tied"
  task_types: bool = True
  packed_rows: bool = True
  tokenizers: tuple[str, ...] = ()

  def __new__(cls, *args, **fields):
    """Refuses a renamed field with a one-line pointer to its new name (the generated
    __init__ would only say that the keyword is unexpected)."""
    old = next((name for name in fields if name in RENAMED_FIELDS), None)
    if old:
      raise ValueError(f"Family({old}=...): the field is now {RENAMED_FIELDS[old]!r}")
    return super().__new__(cls)


# The kinds of vocabulary bert_jax reads and learns (text/tokenizers.py's DEFAULT_KINDS).
_LEARNED_KINDS = ("wordpiece", "bpe", "sentencepiece", "tokenizer_json")


def released_first(kind: str) -> tuple[str, ...]:
  """`kind` (the released vocabulary's), then the other kinds bert_jax learns and reads."""
  return (kind,) + tuple(k for k in _LEARNED_KINDS if k != kind)


FAMILIES = {
    "bert": Family(
        description="BERT (Devlin et al. 2018): post-LN encoder, segments, pooler, MLM + NSP",
        position_ids=absolute_positions, first_position=lambda c: 0, pooler=True,
        sentence_heads=("nsp",), pretraining_pooler=True,
        tokenizers=released_first("wordpiece")),
    "roberta": Family(
        description="RoBERTa (Liu et al. 2019): BERT's encoder, positions offset past "
                    "padding, one segment row, MLM only",
        position_ids=padding_offset_positions, first_position=lambda c: c.pad_token_id + 1,
        pooler=True, sentence_heads=(), pretraining_pooler=False, mlm_activation="gelu",
        tokenizers=released_first("bpe")),
    "distilbert": Family(
        description="DistilBERT (Sanh et al. 2019): 6-layer BERT, no segments, no pooler, "
                    "MLM only",
        position_ids=absolute_positions, first_position=lambda c: 0, pooler=False,
        sentence_heads=(), pretraining_pooler=False, pooler_activation="relu",
        tokenizers=released_first("wordpiece")),
    "albert": Family(
        description="ALBERT (Lan et al. 2019): factorized embeddings (E -> H), one layer "
                    "shared by all L, pooler, MLM + SOP",
        position_ids=absolute_positions, first_position=lambda c: 0, pooler=True,
        sentence_heads=("sop",), pretraining_pooler=True, always_project=True,
        tokenizers=released_first("sentencepiece")),
    "electra": Family(
        description="ELECTRA (Clark et al. 2020): BERT's encoder with E -> H projection when "
                    "E != H, no pooler; generator (MLM) + discriminator (replaced tokens)",
        position_ids=absolute_positions, first_position=lambda c: 0, pooler=False,
        sentence_heads=(), pretraining_pooler=False, mlm_activation="gelu",
        pooler_activation="gelu",
        tokenizers=released_first("wordpiece")),
    "modernbert": Family(
        description="ModernBERT (Warner et al. 2024): RoPE, pre-norm GeGLU layers without "
                    "biases, alternating global/local attention, no segments, MLM only",
        position_ids=absolute_positions, first_position=lambda c: 0, pooler=False,
        sentence_heads=(), pretraining_pooler=False, architecture="modernbert", task_types=False,
        unrolled_layers=1, prediction_head="prediction", prediction_head_from="mlm_head",
        tokenizers=released_first("tokenizer_json")),
    # Its task-type table is plain data (config.task_type_vocab_size, as type_vocab_size).
    "ernie": Family(
        description="ERNIE (Sun et al. 2019): BERT's encoder and heads, plus a task-type "
                    "embedding (3.0's use_task_id); knowledge masking in pretraining",
        position_ids=absolute_positions, first_position=lambda c: 0, pooler=True,
        sentence_heads=("nsp",), pretraining_pooler=True,
        tokenizers=released_first("wordpiece")),
    "reformer": Family(
        description="Reformer (Kitaev et al. 2020): axial positions, local and LSH attention, "
                    "reversible layers, chunked feed-forward, 2H-wide output, MLM only",
        position_ids=absolute_positions, first_position=lambda c: 0, pooler=False,
        sentence_heads=(), pretraining_pooler=False, architecture="reformer", task_types=False,
        mlm_head="linear", packed_rows=False,
        tokenizers=released_first("sentencepiece")),
}


def register(name: str, family: Family) -> None:
  """Adds the family member `name` to FAMILIES (a member from outside the package; its HF
  side goes into `bert_jax.weights.hf_families` with `register` there). A name already here
  is refused."""
  if name in FAMILIES:
    raise ValueError(f"family {name!r} is already in bert_jax.models.families.FAMILIES")
  FAMILIES[name] = family


def unregister(name: str) -> None:
  """Removes a member `register` added (a test's teardown)."""
  FAMILIES.pop(name, None)


def family_of(config: Config) -> Family:
  """The `Family` entry of a config (validated when the config is made)."""
  return FAMILIES[config.family]


def tokenizer_kinds(name: str) -> tuple[str, ...]:
  """The tokenizer kinds of the family member `name` (`Family.tokenizers`); a one-line
  error for an unknown member."""
  if name not in FAMILIES:
    raise ValueError(f"family {name!r} is not one of {sorted(FAMILIES)}")
  return FAMILIES[name].tokenizers
