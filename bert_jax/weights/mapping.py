"""Our param tree <-> HF state-dict names, per family, kept as data.

Every family shares our module tree (bert_jax/models), so a family's mapping is only the
HF name of each of our modules (`Names`, one entry per family in `NAMES`); how a tensor
changes layout follows from the kind of our module (`_ENCODER`, `_LAYER`, `_HEADS`).
HF names are the hub between formats: a Google TF1 checkpoint is renamed to HF BERT
names (tf_checkpoint.py) and then goes through the same table.

Layouts: HF `nn.Linear.weight` is [out, in]; our Dense kernel is [in, out]; our attention
projections are DenseGeneral kernels [H, N, D] (q/k/v) and [N, D, H] (output); ModernBERT's
fused Wqkv is [H, 3, N, D] and its GeGLU Wi [H, 2, I].
A row is (our path, HF name, Layout).
"""
import dataclasses
from typing import Callable

import numpy as np

from bert_jax.models.config import BertConfig

Params = dict  # nested {name: {...: np.ndarray}}


@dataclasses.dataclass(frozen=True)
class Layout:
  """How one tensor goes from HF layout to ours (`to_ours`) and back (`to_hf`)."""
  to_ours: Callable[[np.ndarray, BertConfig], np.ndarray]
  to_hf: Callable[[np.ndarray, BertConfig], np.ndarray]


SAME = Layout(lambda w, c: w, lambda w, c: w)
LINEAR = Layout(lambda w, c: w.T, lambda w, c: w.T)
QKV_KERNEL = Layout(
    lambda w, c: w.T.reshape(c.hidden_size, c.num_attention_heads, c.head_dim),
    lambda w, c: w.reshape(w.shape[0], -1).T)
QKV_BIAS = Layout(
    lambda w, c: w.reshape(c.num_attention_heads, c.head_dim),
    lambda w, c: w.reshape(c.hidden_size))
def _fused_kernel(split):
  """HF [sum of parts, H] (parts stacked on the output rows) -> ours [H, *split(config)]."""
  return Layout(lambda w, c: w.T.reshape((c.hidden_size,) + split(c)),
                lambda w, c: w.reshape(c.hidden_size, -1).T)


def _fused_bias(split):
  return Layout(lambda w, c: w.reshape(split(c)), lambda w, c: w.reshape(-1))


# ModernBERT: Wqkv rows q | k | v, each N x D -> [H, 3, N, D]; GeGLU Wi rows input | gate.
_QKV_PARTS = lambda c: (3, c.num_attention_heads, c.head_dim)  # noqa: E731
_GLU_PARTS = lambda c: (2, c.intermediate_size)  # noqa: E731
FUSED_QKV_KERNEL, FUSED_QKV_BIAS = _fused_kernel(_QKV_PARTS), _fused_bias(_QKV_PARTS)
GLU_IN_KERNEL, GLU_IN_BIAS = _fused_kernel(_GLU_PARTS), _fused_bias(_GLU_PARTS)
ATTN_OUT_KERNEL = Layout(
    lambda w, c: w.T.reshape(c.num_attention_heads, c.head_dim, c.hidden_size),
    lambda w, c: w.reshape(-1, w.shape[-1]).T)

# Kinds of our modules: (our leaf, HF leaf, layout) per tensor ("" = the module is the param).
_KINDS = {
    "embedding": (("embedding", "weight", SAME),),
    "dense": (("kernel", "weight", LINEAR), ("bias", "bias", SAME)),
    "qkv": (("kernel", "weight", QKV_KERNEL), ("bias", "bias", QKV_BIAS)),
    "attention_out": (("kernel", "weight", ATTN_OUT_KERNEL), ("bias", "bias", SAME)),
    "fused_qkv": (("kernel", "weight", FUSED_QKV_KERNEL), ("bias", "bias", FUSED_QKV_BIAS)),
    "glu_in": (("kernel", "weight", GLU_IN_KERNEL), ("bias", "bias", GLU_IN_BIAS)),
    "norm": (("scale", "weight", SAME), ("bias", "bias", SAME)),
    "vector": (("", "", SAME),),
}
# Our modules holding params, by kind: the encoder's (outside the layers), one layer's, heads'.
_ENCODER = {
    "embeddings/word_embeddings": "embedding", "embeddings/position_embeddings": "embedding",
    "embeddings/token_type_embeddings": "embedding", "embeddings/layer_norm": "norm",
    "embeddings/task_type_embeddings": "embedding",
    "embeddings/projection": "dense", "pooler/dense": "dense",
    "encoder/final_layer_norm": "norm", "encoder/layer_norm": "norm",
    "embeddings/axial_0": "vector", "embeddings/axial_1": "vector",
    "embeddings/axial_2": "vector", "embeddings/axial_3": "vector",
}
_LAYER = {
    "attention/query": "qkv", "attention/key": "qkv", "attention/value": "qkv",
    "attention/out": "attention_out", "attention_layer_norm": "norm",
    "intermediate": "dense", "output": "dense", "output_layer_norm": "norm",
    "attention/qkv": "fused_qkv", "mlp_layer_norm": "norm", "mlp/wi": "glu_in",
    "mlp/wo": "dense", "attention/query_key": "qkv", "attention/layer_norm": "norm",
    "feed_forward/chunks/layer_norm": "norm", "feed_forward/chunks/dense": "dense",
    "feed_forward/chunks/output": "dense",
}
_HEADS = {
    "mlm_head/transform": "dense", "mlm_head/transform_layer_norm": "norm",
    "mlm_head/output_bias": "vector", "nsp_head/dense": "dense", "sop_head/dense": "dense",
    "rtd_head/dense": "dense", "rtd_head/prediction": "dense",
    "classifier/dense": "dense", "qa_outputs/dense": "dense",
    "head/dense": "dense", "head/layer_norm": "norm", "mlm_head/decoder": "dense",
}
# The fine-tuning heads' HF names in the families that have HF task classes for them.
_TASK_HEADS = {"classifier/dense": "classifier", "qa_outputs/dense": "qa_outputs"}
# ModernBERT's prediction head (`Family.prediction_head`). HF calls it `head`, as its MLM
# transform: a name of its own here, renamed in the task classes (Names.task_names), keeps
# the two apart.
_PREDICTION_HEAD = {"head/dense": "prediction_head.dense",
                    "head/layer_norm": "prediction_head.norm"}
_FINE_TUNING_MODULES = tuple(_TASK_HEADS) + tuple(_PREDICTION_HEAD)
_FINE_TUNING_TASKS = ("sequence_classification", "token_classification", "question_answering",
                      "multiple_choice")


@dataclasses.dataclass(frozen=True)
class Names:
  """One family's HF names for our modules.

  prefix: the encoder's name inside HF's headed models ("bert" in BertForPreTraining).
  encoder: our encoder module -> HF name under the prefix (modules the family lacks,
    e.g. DistilBERT's segment table and pooler, are simply absent).
  layer: HF name of layer `{i}` under the prefix; layer_modules: our module in a layer ->
    HF name under it. ALBERT's one shared layer (`encoder/shared_layer`) is its layer 0.
  heads: our head module -> HF name (top level, no prefix): the heads of the family's HF
    pretraining classes (ELECTRA's generator MLM head and discriminator RTD head alike).
  tied: HF tensors that are copies of another HF tensor (MLM decoders tied to the word
    embeddings): not written, and checked equal to their source when read.
  task_names: per headed model, HF names that its HF class gives other modules (a module's
    default HF name -> the class's; RoBERTa's sequence classifier keeps our pooler as
    `classifier.dense` and our classifier as `classifier.out_proj`).
  unused: HF tensors its forward never reads (Reformer's `lm_head.bias`) -> their shape
    for a config: dropped when read (refused unless zero), written as zeros.
  """
  prefix: str
  encoder: dict[str, str]
  layer: str
  layer_modules: dict[str, str]
  heads: dict[str, str]
  tied: dict[str, str]
  task_names: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
  unused: dict[str, Callable[[BertConfig], tuple[int, ...]]] = dataclasses.field(
      default_factory=dict)

  @property
  def encoder_roots(self) -> tuple[str, ...]:
    """First components of the HF names of a bare encoder (no prefix), e.g. "embeddings."."""
    names = list(self.encoder.values()) + [self.layer]
    return tuple(sorted({name.split(".")[0] + "." for name in names}))

  @property
  def head_roots(self) -> tuple[str, ...]:
    """First components of the HF head names, e.g. "cls." (BERT), "lm_head." (RoBERTa)."""
    return tuple(sorted({name.split(".")[0] + "." for name in self.heads.values()}))


_BERT_ENCODER = {
    "embeddings/word_embeddings": "embeddings.word_embeddings",
    "embeddings/position_embeddings": "embeddings.position_embeddings",
    "embeddings/token_type_embeddings": "embeddings.token_type_embeddings",
    "embeddings/layer_norm": "embeddings.LayerNorm",
    "pooler/dense": "pooler.dense",
}
_BERT_LAYER = {
    "attention/query": "attention.self.query", "attention/key": "attention.self.key",
    "attention/value": "attention.self.value", "attention/out": "attention.output.dense",
    "attention_layer_norm": "attention.output.LayerNorm",
    "intermediate": "intermediate.dense", "output": "output.dense",
    "output_layer_norm": "output.LayerNorm",
}

_BERT_HEADS = {"mlm_head/transform": "cls.predictions.transform.dense",
               "mlm_head/transform_layer_norm": "cls.predictions.transform.LayerNorm",
               "mlm_head/output_bias": "cls.predictions.bias",
               "nsp_head/dense": "cls.seq_relationship", **_TASK_HEADS}


def _bert_tied(prefix: str) -> dict[str, str]:
  """BERT's MLM decoder, tied to the word embeddings of the encoder named `prefix`."""
  return {"cls.predictions.decoder.weight": f"{prefix}.embeddings.word_embeddings.weight",
          "cls.predictions.decoder.bias": "cls.predictions.bias"}


NAMES = {
    "bert": Names(
        prefix="bert", encoder=_BERT_ENCODER, layer="encoder.layer.{i}",
        layer_modules=_BERT_LAYER, heads=_BERT_HEADS, tied=_bert_tied("bert")),
    "roberta": Names(
        prefix="roberta", encoder=_BERT_ENCODER, layer="encoder.layer.{i}",
        layer_modules=_BERT_LAYER,
        heads={"mlm_head/transform": "lm_head.dense",
               "mlm_head/transform_layer_norm": "lm_head.layer_norm",
               "mlm_head/output_bias": "lm_head.bias", **_TASK_HEADS},
        tied={"lm_head.decoder.weight": "roberta.embeddings.word_embeddings.weight",
              "lm_head.decoder.bias": "lm_head.bias"},
        task_names={"sequence_classification": {"roberta.pooler.dense": "classifier.dense",
                                                "classifier": "classifier.out_proj"}}),
    "distilbert": Names(
        prefix="distilbert",
        encoder={"embeddings/word_embeddings": "embeddings.word_embeddings",
                 "embeddings/position_embeddings": "embeddings.position_embeddings",
                 "embeddings/layer_norm": "embeddings.LayerNorm",
                 "pooler/dense": "pooler.dense"},  # only a classifier's: pre_classifier
        layer="transformer.layer.{i}",
        layer_modules={"attention/query": "attention.q_lin", "attention/key": "attention.k_lin",
                       "attention/value": "attention.v_lin", "attention/out": "attention.out_lin",
                       "attention_layer_norm": "sa_layer_norm", "intermediate": "ffn.lin1",
                       "output": "ffn.lin2", "output_layer_norm": "output_layer_norm"},
        heads={"mlm_head/transform": "vocab_transform",
               "mlm_head/transform_layer_norm": "vocab_layer_norm",
               "mlm_head/output_bias": "vocab_projector.bias", **_TASK_HEADS},
        tied={"vocab_projector.weight": "distilbert.embeddings.word_embeddings.weight"},
        task_names={task: {"distilbert.pooler.dense": "pre_classifier"}
                    for task in ("sequence_classification", "multiple_choice")}),
    "albert": Names(
        prefix="albert",
        encoder={**{k: v for k, v in _BERT_ENCODER.items() if k != "pooler/dense"},
                 "embeddings/projection": "encoder.embedding_hidden_mapping_in",
                 "pooler/dense": "pooler"},
        layer="encoder.albert_layer_groups.{i}.albert_layers.0",
        layer_modules={"attention/query": "attention.query", "attention/key": "attention.key",
                       "attention/value": "attention.value", "attention/out": "attention.dense",
                       "attention_layer_norm": "attention.LayerNorm", "intermediate": "ffn",
                       "output": "ffn_output", "output_layer_norm": "full_layer_layer_norm"},
        heads={"mlm_head/transform": "predictions.dense",
               "mlm_head/transform_layer_norm": "predictions.LayerNorm",
               "mlm_head/output_bias": "predictions.bias",
               "sop_head/dense": "sop_classifier.classifier", **_TASK_HEADS},
        tied={"predictions.decoder.weight": "albert.embeddings.word_embeddings.weight",
              "predictions.decoder.bias": "predictions.bias"}),
    "electra": Names(
        prefix="electra",
        encoder={**_BERT_ENCODER,  # the pooler only a classifier's: classifier.dense
                 "embeddings/projection": "embeddings_project"},
        layer="encoder.layer.{i}", layer_modules=_BERT_LAYER,
        heads={"mlm_head/transform": "generator_predictions.dense",
               "mlm_head/transform_layer_norm": "generator_predictions.LayerNorm",
               "mlm_head/output_bias": "generator_lm_head.bias",
               "rtd_head/dense": "discriminator_predictions.dense",
               "rtd_head/prediction": "discriminator_predictions.dense_prediction", **_TASK_HEADS},
        tied={"generator_lm_head.weight": "electra.embeddings.word_embeddings.weight"},
        task_names={"sequence_classification": {"electra.pooler.dense": "classifier.dense",
                                                "classifier": "classifier.out_proj"},
                    "multiple_choice": {"electra.pooler.dense": "sequence_summary.summary"}}),
    # Biases and layer 0's attention norm are absent where the model has none
    # (norm_bias, attention_bias, mlp_bias, mlm_transform_bias all false in the releases).
    "modernbert": Names(
        prefix="model",
        encoder={"embeddings/word_embeddings": "embeddings.tok_embeddings",
                 "embeddings/layer_norm": "embeddings.norm",
                 "encoder/final_layer_norm": "final_norm"},
        layer="layers.{i}",
        layer_modules={"attention_layer_norm": "attn_norm", "attention/qkv": "attn.Wqkv",
                       "attention/out": "attn.Wo", "mlp_layer_norm": "mlp_norm",
                       "mlp/wi": "mlp.Wi", "mlp/wo": "mlp.Wo"},
        heads={"mlm_head/transform": "head.dense", "mlm_head/transform_layer_norm": "head.norm",
               "mlm_head/output_bias": "decoder.bias", **_TASK_HEADS, **_PREDICTION_HEAD},
        tied={"decoder.weight": "model.embeddings.tok_embeddings.weight"},
        # Every task class: head (dense, act, norm) then `classifier`, QA's too.
        task_names={task: {"prediction_head": "head", "qa_outputs": "classifier"}
                    for task in _FINE_TUNING_TASKS}),
    # BERT's names under `ernie.`, plus the task-type table (3.0's use_task_id).
    "ernie": Names(
        prefix="ernie",
        encoder={**_BERT_ENCODER,
                 "embeddings/task_type_embeddings": "embeddings.task_type_embeddings"},
        layer="encoder.layer.{i}", layer_modules=_BERT_LAYER, heads=_BERT_HEADS,
        tied=_bert_tied("ernie")),

    # Projections without biases; the pooler only a classifier's (classifier.dense).
    "reformer": Names(
        prefix="reformer",
        encoder={"embeddings/word_embeddings": "embeddings.word_embeddings",
                 **{f"embeddings/axial_{i}": f"embeddings.position_embeddings.weights.{i}"
                    for i in range(4)},
                 "embeddings/position_embeddings": "embeddings.position_embeddings.embedding",
                 "encoder/layer_norm": "encoder.layer_norm", "pooler/dense": "pooler.dense"},
        layer="encoder.layers.{i}",
        layer_modules={"attention/layer_norm": "attention.layer_norm",
                       "attention/query_key": "attention.self_attention.query_key",
                       "attention/query": "attention.self_attention.query",
                       "attention/key": "attention.self_attention.key",
                       "attention/value": "attention.self_attention.value",
                       "attention/out": "attention.output.dense",
                       "feed_forward/chunks/layer_norm": "feed_forward.layer_norm",
                       "feed_forward/chunks/dense": "feed_forward.dense.dense",
                       "feed_forward/chunks/output": "feed_forward.output.dense"},
        heads={"mlm_head/decoder": "lm_head.decoder", **_TASK_HEADS},
        tied={}, unused={"lm_head.bias": lambda c: (c.vocab_size,)},
        task_names={"sequence_classification": {"reformer.pooler.dense": "classifier.dense",
                                                "classifier": "classifier.out_proj"}}),
}


def names_of(config: BertConfig) -> Names:
  if config.family not in NAMES:
    raise ValueError(f"family {config.family!r} has no HF names (known: {sorted(NAMES)})")
  return NAMES[config.family]


def _expand(ours: str, hf: str, kind: str):
  return [(f"{ours}/{leaf}" if leaf else ours, f"{hf}.{hf_leaf}" if hf_leaf else hf, layout)
          for leaf, hf_leaf, layout in _KINDS[kind]]


def _layers(config: BertConfig) -> list[tuple[str, int]]:
  """(our layer module, its HF layer index): every layer, or ALBERT's one shared layer."""
  if config.layer_sharing == "all":
    return [("shared_layer", 0)]
  if config.layer_sharing != "none":
    raise ValueError(f"layer_sharing={config.layer_sharing!r} has no HF equivalent (HF "
                     "shares whole layers only); this model cannot be exported to HF")
  return [(f"layer_{i}", i) for i in range(config.num_hidden_layers)]


def family_rows(config: BertConfig, encoder_prefix: str, headed_model: str | None = None):
  """Every row a model of `config.family` can have, pooler and heads included.

  encoder_prefix: where the encoder sits in our tree ("bert/" in headed models, "" for
  BertModel); HF encoder names always carry the family's prefix (canonical names).
  headed_model: the HF names of that headed model's class (`Names.task_names`).
  """
  rows = _default_rows(config, encoder_prefix)
  renames = names_of(config).task_names.get(headed_model, {})
  def renamed(hf):
    for old, new in renames.items():
      if hf.startswith(old + "."):
        return new + hf[len(old):]
    return hf
  return [(ours, renamed(hf), layout) for ours, hf, layout in rows]


def _default_rows(config: BertConfig, encoder_prefix: str):
  names = names_of(config)
  rows = []
  for module, hf in names.encoder.items():
    rows += _expand(encoder_prefix + module, f"{names.prefix}.{hf}", _ENCODER[module])
  for ours_layer, i in _layers(config):
    layer = names.layer.format(i=i)
    for module, hf in names.layer_modules.items():
      rows += _expand(f"{encoder_prefix}encoder/{ours_layer}/{module}",
                      f"{names.prefix}.{layer}.{hf}", _LAYER[module])
  for module, hf in names.heads.items():
    rows += _expand(module, hf, _HEADS[module])
  return rows


def all_rows(config: BertConfig, encoder_prefix: str, with_heads: bool, with_pooler=True):
  """The rows of the family's encoder (with its segment table when type_vocab_size > 0,
  its task-type table when task_type_vocab_size > 0, the pooler when with_pooler) and,
  with_heads, all of the family's pretraining heads."""
  def wanted(ours):
    if ours.startswith(_FINE_TUNING_MODULES):
      return False  # fine-tuning heads: not the pretraining model's
    if ours.startswith(tuple(_HEADS)):
      return with_heads
    if "/pooler/" in f"/{ours}":
      return with_pooler
    if "embeddings/projection" in ours:
      return config.projects_embeddings
    if "task_type_embeddings" in ours:
      return config.task_type_vocab_size > 0
    return config.type_vocab_size > 0 or "token_type_embeddings" not in ours
  return [row for row in family_rows(config, encoder_prefix) if wanted(row[0])]


# --- nested <-> flat ------------------------------------------------------------------

def flatten(params: Params, prefix: str = "") -> dict[str, np.ndarray]:
  flat = {}
  for key, value in params.items():
    path = f"{prefix}{key}"
    if isinstance(value, dict):
      flat.update(flatten(value, path + "/"))
    else:
      flat[path] = value
  return flat


def unflatten(flat: dict[str, np.ndarray]) -> Params:
  nested: Params = {}
  for path, value in flat.items():
    node = nested
    *parents, leaf = path.split("/")
    for name in parents:
      node = node.setdefault(name, {})
    node[leaf] = value
  return nested
