"""BertConfig: every hyper-parameter of an encoder of the BERT family, with the standard sizes.

Field names follow google-research/bert's `bert_config.json` (which HF's BERT `config.json`
shares), so both files load with `BertConfig.from_json_dict`. `family` names the member
(bert, roberta, distilbert, albert, electra, modernbert, ernie: `bert_jax.models.families`); HF
config.json of every family is read and written by `bert_jax.weights.hf_families`. Fields that
only matter to this
implementation (compute dtype, scan/remat) are ours and are not exported to HF.
"""
import dataclasses
import json
from typing import Any, Optional

import jax.numpy as jnp

from bert_jax.models.families import FAMILIES

# Hidden activations used by released BERT checkpoints: "gelu" is the exact erf form
# (HF "gelu"), "gelu_tanh" the tanh approximation (HF "gelu_new"/"gelu_pytorch_tanh").
HIDDEN_ACTS = ("gelu", "gelu_tanh", "relu")
# Names accepted in JSON: ours and HF's.
_HF_ACT_ALIASES = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
                   "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu"}
# Ours -> the name HF configs write.
HF_ACT_NAMES = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}
REMAT_POLICIES = ("none", "full", "dots")
# Cross-layer parameter sharing (ALBERT, Lan et al. 2019): which sub-layers all L layers
# share; the encoder's table `bert.LAYER_SHARING` says how each is applied.
LAYER_SHARING = ("none", "all", "attention", "ffn")
# Fields BERT's config.json has no name for (ModernBERT's; see BertConfig).
_BIAS_AND_ROPE = ("norm_bias", "mlm_transform_bias", "attention_bias", "mlp_bias",
                  "global_rope_theta", "local_rope_theta", "local_attention",
                  "global_attn_every_n_layers")
# Fields BERT's config.json has no name for (Reformer's; see BertConfig).
REFORMER_FIELDS = ("attn_layers", "attention_head_size", "axial_pos_shape",
                   "axial_pos_embds_dim", "axial_norm_std", "local_attn_chunk_length",
                   "local_num_chunks_before", "local_num_chunks_after", "lsh_attn_chunk_length",
                   "lsh_num_chunks_before", "lsh_num_chunks_after",
                   "lsh_attention_probs_dropout_prob", "num_buckets", "num_hashes", "hash_seed",
                   "chunk_size_feed_forward", "reversible", "lsh_attention_groups")
# How attention is computed (bert_jax.models.layers.ATTENTION_IMPLS; same outputs).
ATTENTION_IMPLS = ("einsum", "xla", "cudnn", "splash")

# How the E -> H embedding projection starts (bert_jax.models.bert.PROJECTION_INITS).
PROJECTION_INITS = ("normal", "fan_in")


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Hyper-parameters of an encoder of the BERT family.

  Frozen (hashable, so a Flax module can hold it); `replace` gives a changed copy;
  `from_json_file` reads a google-research/bert `bert_config.json` or an HF BERT
  `config.json`. Usually made by `config_for_size`:

  ```python
  import jax.numpy as jnp
  from bert_jax import BertConfig, config_for_size

  config = config_for_size("tiny", hidden_dropout_prob=0.0)
  assert (config.num_hidden_layers, config.hidden_size, config.head_dim) == (2, 128, 64)
  assert config.replace(dtype="bfloat16").compute_dtype == jnp.bfloat16
  assert BertConfig.from_json_dict(config.to_json_dict()) == config
  ```

  Attributes:
    vocab_size: rows of the word-embedding table (V).
    hidden_size: width of the residual stream (H).
    num_hidden_layers: number of Transformer layers (L).
    num_attention_heads: attention heads per layer (N); H must divide by N.
    intermediate_size: width of the feed-forward layer (I), 4H in every released model.
    hidden_act: one of HIDDEN_ACTS.
    hidden_dropout_prob: dropout on embeddings and on each sub-layer output.
    attention_probs_dropout_prob: dropout on the attention probabilities.
    max_position_embeddings: rows of the learned position table (max sequence length).
    type_vocab_size: rows of the segment (token type) table; 0: no segment embeddings
      (DistilBERT); 1: one row added to every token, token_type_ids ignored (RoBERTa).
    task_type_vocab_size: rows of the task-type table (ERNIE 2.0/3.0's `use_task_id`: a
      learned vector per task id added to the embeddings, `task_type_ids` [B, T], 0 when
      not given); 0: none. BERT-architecture families only.
    initializer_range: std of the truncated-normal initialiser.
    layer_norm_eps: LayerNorm epsilon (1e-12 in BERT).
    dtype: compute dtype name ("float32" or "bfloat16"); params stay float32 and are cast
      at use; softmax, LayerNorm statistics and logits for losses are computed in float32.
    scan_layers: stack the layers' params on a leading axis and run them with `nn.scan`
      (faster compiles for deep models). The checkpoint layout differs; see
      `bert_jax.models.layout`. With layer_sharing="all" the one shared layer is scanned
      with its params as they are (nothing to stack).
    remat_policy: rematerialisation of each layer: "none", "full" or "dots" (save matmul
      outputs only).
    pre_layer_norm: LayerNorm before each sub-layer plus a final one (an ablation; BERT
      and its released checkpoints are post-LN, and HF cannot load this variant).
    family: the member of the BERT family, a key of `bert_jax.models.families.FAMILIES`
      ("bert", "roberta", "distilbert", "albert", "electra", "modernbert"); it decides
      position ids, pooler, head defaults and the architecture.
    pad_token_id: the padding id (RoBERTa's position ids skip it and start after it).
    embedding_size: width of the embedding tables (E); None: H. With E != H (ALBERT's
      factorized embeddings, ELECTRA's small ones) an E -> H projection follows the
      embeddings' LayerNorm and dropout, and the MLM head maps H -> E before its decoder
      tied to the E-wide table (ALBERT projects even when E == H: `Family.always_project`).
    layer_sharing: cross-layer parameter sharing, one of LAYER_SHARING: "none"; "all" (one
      layer's params applied L times: ALBERT); "attention" or "ffn" (only that sub-layer
      shared, each layer keeps the other: the ALBERT paper's ablation, not in HF).
    norm_bias: LayerNorms have a bias (every norm of the model and its MLM head; ModernBERT's
      have none).
    mlm_transform_bias: the MLM head's dense transform has a bias (HF ModernBERT's
      `classifier_bias`, false there).
    ModernBERT's layers alone read attention_bias, mlp_bias, the rope thetas,
    local_attention and global_attn_every_n_layers (models/modernbert.py; the
    BERT-architecture layers always have biases and learned absolute positions).
    attention_bias: the fused q/k/v projection and the attention output have biases.
    mlp_bias: the GeGLU feed-forward's two projections have biases.
    global_rope_theta: rotary-embedding base of the global-attention layers.
    local_rope_theta: rotary-embedding base of the local (sliding-window) layers.
    local_attention: the local layers' window, in tokens: token i attends to token j only
      when |i - j| <= local_attention // 2 (HF's `local_attention`).
    global_attn_every_n_layers: layer i attends globally when i % n == 0, locally
      otherwise; 1: every layer is global.
    attention_impl: how attention runs, one of ATTENTION_IMPLS (same outputs):
      "einsum" (two einsums + softmax; attention-probability dropout and the
      `attention_probs` intermediates), "xla" (`jax.nn.dot_product_attention`),
      "cudnn" (its cuDNN flash kernel; GPU, bfloat16) or "splash" (Pallas splash
      attention; TPU). See `bert_jax.models.layers.dot_product_attention`.
    Reformer's layers alone read attn_layers ... reversible (REFORMER_FIELDS; HF
    ReformerConfig's names, models/reformer.py; intermediate_size is its
    feed_forward_size and attention_probs_dropout_prob its
    local_attention_probs_dropout_prob).
    attn_layers: each layer's attention, "local" (chunked) or "lsh" (LSH); its length is
      num_hidden_layers.
    attention_head_size: D when it is not H / N (Reformer's N * D need not be H); None: H / N.
    axial_pos_shape: the factors of the axial position table (their product bounds the
      length); empty: a learned [max_position_embeddings, H] table.
    axial_pos_embds_dim: the width of each axial factor's table; they sum to H.
    axial_norm_std: std of the axial tables' normal initialiser.
    local_attn_chunk_length / local_num_chunks_before / local_num_chunks_after: local
      attention's chunk and the neighbouring chunks each chunk also sees.
    lsh_attn_chunk_length / lsh_num_chunks_before / lsh_num_chunks_after: the same for LSH
      attention's sorted chunks.
    lsh_attention_probs_dropout_prob: dropout on LSH attention's probabilities.
    num_buckets: LSH buckets per hash round, an even int or a tuple of even factors (their
      product); None: from the length as HF chooses (2 T / chunk, a power of 2).
    num_hashes: LSH hash rounds.
    hash_seed: None draws the rotations from the dropout rng when training (fixed per layer
      when deterministic); a seed gives every LSH layer the same rotations (as HF's).
    chunk_size_feed_forward: tokens per feed-forward chunk (0: the whole row at once).
    reversible: the backward pass recomputes each layer from the next one's output
      (RevNet) instead of storing activations; False: plain autodiff, same values.
    lsh_attention_groups: LSH attention scores its sorted chunks this many groups at a time
      (in sequence, each group's scores recomputed in the backward pass): its largest
      temporaries / groups, the same outputs (dropout masks drawn per group); 1: all
      chunks at once. It must divide num_hashes x length / lsh_attn_chunk_length.
    projection_init: how the E -> H projection (`projects_embeddings`) starts, one of
      PROJECTION_INITS: "normal" (truncated normal at initializer_range, as HF and
      google-research/albert) or "fan_in" (normal at 1/sqrt(E), so the first layer's input
      starts at unit scale as without a projection; a tiny ALBERT needs it to leave the
      unigram plateau, README). Init only: the forward pass, HF parity and conversion do
      not depend on it.
  """
  vocab_size: int = 30522
  hidden_size: int = 768
  num_hidden_layers: int = 12
  num_attention_heads: int = 12
  intermediate_size: int = 3072
  hidden_act: str = "gelu"
  hidden_dropout_prob: float = 0.1
  attention_probs_dropout_prob: float = 0.1
  max_position_embeddings: int = 512
  type_vocab_size: int = 2
  task_type_vocab_size: int = 0
  initializer_range: float = 0.02
  layer_norm_eps: float = 1e-12
  dtype: str = "float32"
  scan_layers: bool = False
  remat_policy: str = "none"
  pre_layer_norm: bool = False
  family: str = "bert"
  pad_token_id: int = 0
  embedding_size: Optional[int] = None
  layer_sharing: str = "none"
  norm_bias: bool = True
  mlm_transform_bias: bool = True
  attention_bias: bool = True
  mlp_bias: bool = True
  global_rope_theta: float = 160_000.0
  local_rope_theta: float = 10_000.0
  local_attention: int = 128
  global_attn_every_n_layers: int = 1
  attention_impl: str = "einsum"
  projection_init: str = "normal"
  attn_layers: tuple[str, ...] = ()
  attention_head_size: Optional[int] = None
  axial_pos_shape: tuple[int, ...] = ()
  axial_pos_embds_dim: tuple[int, ...] = ()
  axial_norm_std: float = 1.0
  local_attn_chunk_length: int = 64
  local_num_chunks_before: int = 1
  local_num_chunks_after: int = 0
  lsh_attn_chunk_length: int = 64
  lsh_num_chunks_before: int = 1
  lsh_num_chunks_after: int = 0
  lsh_attention_probs_dropout_prob: float = 0.0
  num_buckets: Optional[Any] = None
  num_hashes: int = 1
  hash_seed: Optional[int] = None
  chunk_size_feed_forward: int = 0
  reversible: bool = True
  lsh_attention_groups: int = 1

  def __post_init__(self):
    for name in ("attn_layers", "axial_pos_shape", "axial_pos_embds_dim", "num_buckets"):
      value = getattr(self, name)
      if isinstance(value, list):  # from JSON; tuples keep the config hashable
        object.__setattr__(self, name, tuple(value))
    if self.family not in FAMILIES:
      raise ValueError(f"BertConfig: family={self.family!r} is not one of {sorted(FAMILIES)}")
    if self.type_vocab_size < 0:
      raise ValueError(f"BertConfig: type_vocab_size={self.type_vocab_size} is negative")
    if self.task_type_vocab_size < 0 or (
        self.task_type_vocab_size and not FAMILIES[self.family].task_types):
      raise ValueError(f"BertConfig: task_type_vocab_size={self.task_type_vocab_size} (only "
                       "the BERT architecture's embeddings have a task-type table, >= 0)")
    if self.attention_head_size is None and self.hidden_size % self.num_attention_heads:
      raise ValueError(f"BertConfig: hidden_size={self.hidden_size} is not divisible by "
                       f"num_attention_heads={self.num_attention_heads}")
    if self.hidden_act not in HIDDEN_ACTS:
      raise ValueError(f"BertConfig: hidden_act={self.hidden_act!r} is not one of {HIDDEN_ACTS}")
    if self.remat_policy not in REMAT_POLICIES:
      raise ValueError(f"BertConfig: remat_policy={self.remat_policy!r} is not one of "
                       f"{REMAT_POLICIES}")
    if self.global_attn_every_n_layers < 1:
      raise ValueError(f"BertConfig: global_attn_every_n_layers="
                       f"{self.global_attn_every_n_layers} must be at least 1")
    if self.local_attention < 0:
      raise ValueError(f"BertConfig: local_attention={self.local_attention} is negative")
    if self.attention_impl not in ATTENTION_IMPLS:
      raise ValueError(f"BertConfig: attention_impl={self.attention_impl!r} is not one of "
                       f"{ATTENTION_IMPLS}")
    if self.projection_init not in PROJECTION_INITS:
      raise ValueError(f"BertConfig: projection_init={self.projection_init!r} is not one of "
                       f"{PROJECTION_INITS}")
    jnp.dtype(self.dtype)  # raises on an unknown dtype name
    if self.layer_sharing not in LAYER_SHARING:
      raise ValueError(f"BertConfig: layer_sharing={self.layer_sharing!r} is not one of "
                       f"{LAYER_SHARING}")
    if self.layer_sharing not in ("none", "all") and self.scan_layers:
      raise ValueError(f"BertConfig: layer_sharing={self.layer_sharing!r} needs "
                       "scan_layers=False (part-shared layers are not stacked; 'all' scans)")
    if self.embedding_size is not None and self.embedding_size <= 0:
      raise ValueError(f"BertConfig: embedding_size={self.embedding_size} is not positive")

  @property
  def head_dim(self) -> int:
    if self.attention_head_size is not None:
      return self.attention_head_size
    return self.hidden_size // self.num_attention_heads

  @property
  def embedding_width(self) -> int:
    """E: the width of the embedding tables and of the MLM decoder (H unless factorized)."""
    return self.hidden_size if self.embedding_size is None else self.embedding_size

  @property
  def projects_embeddings(self) -> bool:
    """Whether an E -> H projection follows the embeddings."""
    if self.embedding_size is None:
      return False
    return self.embedding_size != self.hidden_size or FAMILIES[self.family].always_project

  @property
  def compute_dtype(self):
    return jnp.dtype(self.dtype)

  def replace(self, **changes) -> "BertConfig":
    return dataclasses.replace(self, **changes)

  # --- JSON (google-research/bert and HF share these names) ----------------------------

  @classmethod
  def from_json_dict(cls, raw: dict[str, Any], source: str = "config") -> "BertConfig":
    """Builds a config from a bert_config.json / HF config.json dict; ignores HF extras."""
    if raw.get("model_type", "bert") != "bert" and "family" not in raw:
      raise ValueError(f"{source}: model_type={raw['model_type']!r} is an HF config of another "
                       "family; read it with bert_jax.weights.hf_families.config_from_hf")
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in raw.items() if k in names and v is not None}
    if "hidden_act" in kwargs:
      act = kwargs["hidden_act"]
      if act not in _HF_ACT_ALIASES:
        raise ValueError(f"{source}: hidden_act={act!r} is not supported "
                         f"(known: {sorted(_HF_ACT_ALIASES)})")
      kwargs["hidden_act"] = _HF_ACT_ALIASES[act]
    if raw.get("position_embedding_type", "absolute") != "absolute":
      raise ValueError(f"{source}: position_embedding_type="
                       f"{raw['position_embedding_type']!r} is not supported (only 'absolute')")
    missing = [k for k in ("vocab_size", "hidden_size", "num_hidden_layers",
                           "num_attention_heads", "intermediate_size") if k not in raw]
    if missing:
      raise ValueError(f"{source}: missing required field(s) {missing}")
    return cls(**kwargs)

  @classmethod
  def from_json_file(cls, path: str) -> "BertConfig":
    try:
      with open(path) as f:
        raw = json.load(f)
    except FileNotFoundError:
      raise FileNotFoundError(f"Model config not found: {path}") from None
    except json.JSONDecodeError as e:
      raise ValueError(f"{path}: not valid JSON ({e})") from None
    return cls.from_json_dict(raw, source=path)

  def to_json_dict(self) -> dict[str, Any]:
    """The fields in bert_config.json form (our implementation fields included)."""
    return dataclasses.asdict(self)

  def to_hf_dict(self) -> dict[str, Any]:
    """An HF `BertConfig` dict (model_type bert), without our implementation fields.

    BERT's config.json; `bert_jax.weights.hf_families.config_to_hf` writes every family's.
    """
    if self.family != "bert":
      raise ValueError(f"BertConfig.to_hf_dict writes BERT's config.json; a {self.family} "
                       "config is written by bert_jax.weights.hf_families.config_to_hf")
    if self.layer_sharing != "none" or self.projects_embeddings:
      raise ValueError(f"BertConfig: layer_sharing={self.layer_sharing!r}, embedding_size="
                       f"{self.embedding_size} (hidden_size {self.hidden_size}) have no HF "
                       f"{self.family} equivalent; this model cannot be exported to HF")
    if self.task_type_vocab_size:
      raise ValueError(f"BertConfig: task_type_vocab_size={self.task_type_vocab_size} has no "
                       "HF BERT equivalent (HF ERNIE's use_task_id: family 'ernie')")
    d = hf_bert_fields(self)
    d.update(model_type="bert", architectures=["BertForPreTraining"],
             position_embedding_type="absolute")
    return d


def hf_bert_fields(config: "BertConfig") -> dict[str, Any]:
  """The config's fields under HF BertConfig's names (which RoBERTa, ALBERT and ELECTRA
  share; DistilBERT renames them), our implementation fields dropped. Each family's HF
  writer (bert_jax.weights.hf_families) starts from these; a model HF's post-LN, biased
  encoders cannot express is refused here for every family."""
  if config.pre_layer_norm:
    raise ValueError("BertConfig: pre_layer_norm=True has no HF BERT equivalent (HF's "
                     "BertModel is post-LN); this model cannot be exported to HF")
  if not (config.norm_bias and config.mlm_transform_bias):
    raise ValueError("BertConfig: norm_bias=False or mlm_transform_bias=False has no HF BERT "
                     "equivalent; this model cannot be exported to HF BERT")
  d = dataclasses.asdict(config)
  ours_only = ("dtype", "scan_layers", "remat_policy", "pre_layer_norm", "family",
               "embedding_size", "layer_sharing", "attention_impl", "projection_init",
               "task_type_vocab_size")
  for k in ours_only + _BIAS_AND_ROPE + REFORMER_FIELDS:
    d.pop(k)
  d.update(hidden_act=HF_ACT_NAMES[config.hidden_act])
  return d


_ROBERTA = dict(family="roberta", vocab_size=50265, max_position_embeddings=514,
                type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)
_DISTILBERT = dict(family="distilbert", type_vocab_size=0)
# ALBERT v2 (HF AlbertConfig with albert-base-v2's sizes): E=128, one shared layer, tanh
# GELU, no dropout, SentencePiece vocab of 30,000.
_ALBERT = dict(family="albert", vocab_size=30000, embedding_size=128, layer_sharing="all",
               hidden_act="gelu_tanh", hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0)
# ELECTRA (HF ElectraConfig's defaults are ELECTRA-Small's discriminator): E=128.
_ELECTRA = dict(family="electra", embedding_size=128)
# ERNIE (HF ErnieConfig of the released nghuyong/ernie-* ports; Paddle's LayerNorm eps).
# 1.0: Chinese, ReLU, 18,000 pieces, 513 positions, no task types; 3.0: GELU, 40,000
# pieces, 2,048 positions, 4 segment rows and 3 task types (`use_task_id`).
_ERNIE = dict(family="ernie", layer_norm_eps=1e-5)
_ERNIE_1 = dict(_ERNIE, vocab_size=18000, hidden_act="relu", max_position_embeddings=513)
_ERNIE_3 = dict(_ERNIE, vocab_size=40000, max_position_embeddings=2048, type_vocab_size=4,
                task_type_vocab_size=3)
# HF's ModernBertConfig defaults (= answerdotai/ModernBERT-base).
_MODERNBERT = dict(family="modernbert", vocab_size=50368, max_position_embeddings=8192,
                   type_vocab_size=0, layer_norm_eps=1e-5, pad_token_id=50283,
                   hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, norm_bias=False,
                   mlm_transform_bias=False, attention_bias=False, mlp_bias=False,
                   global_rope_theta=160_000.0, local_rope_theta=10_000.0, local_attention=128,
                   global_attn_every_n_layers=3)
# HF's ReformerConfig defaults (google/reformer-crime-and-punishment's shape, encoder use):
# N * D = 12 * 64 != H = 256, axial positions 64 x 64, local/LSH alternating.
_REFORMER = dict(family="reformer", vocab_size=320, hidden_size=256, num_attention_heads=12,
                 attention_head_size=64, intermediate_size=512, hidden_act="relu",
                 hidden_dropout_prob=0.05, attention_probs_dropout_prob=0.05,
                 max_position_embeddings=4096, type_vocab_size=0, pad_token_id=0,
                 axial_pos_shape=(64, 64), axial_pos_embds_dim=(64, 192))

# The released sizes (Turc et al. 2019 for the small BERTs); intermediate = 4H. The
# "-tiny" sizes of the other families are BERT-Tiny's shape with that family's fields.
# A size that names intermediate_size keeps it (ModernBERT's GeGLU: I = 1.5H).
SIZES = {
    "tiny": dict(num_hidden_layers=2, hidden_size=128, num_attention_heads=2),
    "mini": dict(num_hidden_layers=4, hidden_size=256, num_attention_heads=4),
    "small": dict(num_hidden_layers=4, hidden_size=512, num_attention_heads=8),
    "medium": dict(num_hidden_layers=8, hidden_size=512, num_attention_heads=8),
    "base": dict(num_hidden_layers=12, hidden_size=768, num_attention_heads=12),
    "large": dict(num_hidden_layers=24, hidden_size=1024, num_attention_heads=16),
    "roberta-base": dict(_ROBERTA, num_hidden_layers=12, hidden_size=768,
                         num_attention_heads=12),
    "roberta-tiny": dict(_ROBERTA, num_hidden_layers=2, hidden_size=128, num_attention_heads=2),
    "distilbert-base-uncased": dict(_DISTILBERT, num_hidden_layers=6, hidden_size=768,
                                    num_attention_heads=12),
    "distilbert-tiny": dict(_DISTILBERT, num_hidden_layers=2, hidden_size=128,
                            num_attention_heads=2),
    "albert-base-v2": dict(_ALBERT, num_hidden_layers=12, hidden_size=768,
                           num_attention_heads=12),
    # google-research/albert config/large/albert_config.json: L24/H1024/A16, E128.
    "albert-large-v2": dict(_ALBERT, num_hidden_layers=24, hidden_size=1024,
                            num_attention_heads=16),
    # ALBERT-xxlarge (Lan et al. 2020, Table 1: L12/H4096, E128; 64 heads and I = 4H as HF's
    # albert-xxlarge-v2 config.json).
    "albert-xxlarge-v2": dict(_ALBERT, num_hidden_layers=12, hidden_size=4096,
                              num_attention_heads=64),
    "albert-tiny": dict(_ALBERT, num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                        embedding_size=64),
    "electra-small": dict(_ELECTRA, num_hidden_layers=12, hidden_size=256,
                          num_attention_heads=4),
    # The paper's ELECTRA-Small generator: 1/4 of the discriminator's H, I and heads
    # (Clark et al. 2020, Table 6; the released electra-small-generator checkpoint
    # happens to be discriminator-sized). `generator_config` derives one from any size.
    "electra-small-generator": dict(_ELECTRA, num_hidden_layers=12, hidden_size=64,
                                    num_attention_heads=1),
    # ELECTRA-Base and -Large (Clark et al. 2020, Table 6; google-research/electra
    # configure_pretraining.py): embeddings as wide as H (E = 768 / 1024).
    "electra-base": dict(_ELECTRA, num_hidden_layers=12, hidden_size=768,
                         num_attention_heads=12, embedding_size=768),
    "electra-large": dict(_ELECTRA, num_hidden_layers=24, hidden_size=1024,
                          num_attention_heads=16, embedding_size=1024),
    "electra-tiny": dict(_ELECTRA, num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                         embedding_size=64),
    "electra-tiny-generator": dict(_ELECTRA, num_hidden_layers=2, hidden_size=32,
                                   num_attention_heads=1, embedding_size=64),
    "modernbert-base": dict(_MODERNBERT, num_hidden_layers=22, hidden_size=768,
                            num_attention_heads=12, intermediate_size=1152),
    "ernie-1.0-base-zh": dict(_ERNIE_1, num_hidden_layers=12, hidden_size=768,
                              num_attention_heads=12),
    "ernie-3.0-base-zh": dict(_ERNIE_3, num_hidden_layers=12, hidden_size=768,
                              num_attention_heads=12),
    "ernie-tiny": dict(_ERNIE_3, num_hidden_layers=2, hidden_size=128, num_attention_heads=2,
                       vocab_size=30522, max_position_embeddings=512),
    # Layer 0 global, layers 1-2 local with a 64-token window.
    "modernbert-tiny": dict(_MODERNBERT, num_hidden_layers=3, hidden_size=128,
                            num_attention_heads=2, intermediate_size=192, local_attention=64),
    "reformer-default": dict(_REFORMER, num_hidden_layers=6,
                             attn_layers=("local", "lsh") * 3),
    # Layer 0 local (chunks of 32 seeing the one before), layer 1 LSH (2 rounds, chunks of
    # 32), axial positions 16 x 32 for up to 512 tokens.
    "reformer-tiny": dict(_REFORMER, num_hidden_layers=2, hidden_size=128,
                          num_attention_heads=2, attention_head_size=64,
                          intermediate_size=512, attn_layers=("local", "lsh"),
                          local_attn_chunk_length=32, lsh_attn_chunk_length=32, num_hashes=2,
                          max_position_embeddings=512, axial_pos_shape=(16, 32),
                          axial_pos_embds_dim=(32, 96)),
}


def config_for_size(size: str, **overrides) -> BertConfig:
  """BertConfig of a named size ("tiny" ... "large", "roberta-base", "modernbert-tiny", ...);
  any field can be overridden. The names are the keys of `SIZES`; a family's "-tiny" size
  is BERT-Tiny's shape with that family's fields, for tests and smoke runs.

  ```python
  from bert_jax import config_for_size

  base = config_for_size("base")
  assert (base.num_hidden_layers, base.hidden_size, base.intermediate_size) == (12, 768, 3072)
  roberta = config_for_size("roberta-tiny", num_hidden_layers=1)
  assert (roberta.family, roberta.num_hidden_layers) == ("roberta", 1)
  ```
  """
  if size not in SIZES:
    raise ValueError(f"Unknown model size {size!r}; known: {list(SIZES)}")
  fields = dict(SIZES[size])
  fields.setdefault("intermediate_size", 4 * fields["hidden_size"])
  fields.update(overrides)
  return BertConfig(**fields)


def generator_config(discriminator: BertConfig, fraction: float = 0.25) -> BertConfig:
  """ELECTRA's generator for a discriminator config: H, I and heads times `fraction`
  (the paper's 1/4 for Small and Large, 1/3 for Base), the same embedding width E (the
  two share their embedding tables), layers and vocabulary."""
  heads = max(1, round(discriminator.num_attention_heads * fraction))
  hidden = round(discriminator.hidden_size * fraction / heads) * heads
  return discriminator.replace(
      hidden_size=hidden, num_attention_heads=heads,
      intermediate_size=round(discriminator.intermediate_size * fraction),
      embedding_size=discriminator.embedding_width)
