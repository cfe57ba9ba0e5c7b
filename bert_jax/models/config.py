"""BertConfig: every hyper-parameter of an encoder of the BERT family, with the standard sizes.

Field names follow google-research/bert's `bert_config.json` (which HF's BERT `config.json`
shares), so both files load with `BertConfig.from_json_dict`. `family` names the member
(bert, roberta, distilbert: `bert_jax.models.families`); HF config.json of every family is
read and written by `bert_jax.convert.families`. Fields that only matter to this
implementation (compute dtype, scan/remat) are ours and are not exported to HF.
"""
import dataclasses
import json
from typing import Any

import jax.numpy as jnp

from bert_jax.models.families import FAMILIES

# Hidden activations used by released BERT checkpoints: "gelu" is the exact erf form
# (HF "gelu"), "gelu_tanh" the tanh approximation (HF "gelu_new"/"gelu_pytorch_tanh").
HIDDEN_ACTS = ("gelu", "gelu_tanh", "relu")
# Names accepted in JSON: ours and HF's.
_HF_ACT_ALIASES = {"gelu": "gelu", "gelu_tanh": "gelu_tanh", "gelu_new": "gelu_tanh",
                   "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh", "relu": "relu"}
REMAT_POLICIES = ("none", "full", "dots")
# How attention is computed (bert_jax.models.layers.ATTENTION_IMPLS; same outputs).
ATTENTION_IMPLS = ("einsum", "xla", "cudnn", "splash")


@dataclasses.dataclass(frozen=True)
class BertConfig:
  """Hyper-parameters of an encoder of the BERT family.

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
    initializer_range: std of the truncated-normal initialiser.
    layer_norm_eps: LayerNorm epsilon (1e-12 in BERT).
    dtype: compute dtype name ("float32" or "bfloat16"); params stay float32 and are cast
      at use; softmax, LayerNorm statistics and logits for losses are computed in float32.
    scan_layers: stack the layers' params on a leading axis and run them with `nn.scan`
      (faster compiles for deep models). The checkpoint layout differs; see
      `bert_jax.models.layout`.
    remat_policy: rematerialisation of each layer: "none", "full" or "dots" (save matmul
      outputs only).
    pre_layer_norm: LayerNorm before each sub-layer plus a final one (an ablation; BERT
      and its released checkpoints are post-LN, and HF cannot load this variant).
    family: the member of the BERT family, a key of `bert_jax.models.families.FAMILIES`
      ("bert", "roberta", "distilbert"); it decides position ids, pooler and head defaults.
    pad_token_id: the padding id (RoBERTa's position ids skip it and start after it).
    attention_impl: how attention runs, one of ATTENTION_IMPLS (same outputs):
      "einsum" (two einsums + softmax; attention-probability dropout and the
      `attention_probs` intermediates), "xla" (`jax.nn.dot_product_attention`),
      "cudnn" (its cuDNN flash kernel; GPU, bfloat16) or "splash" (Pallas splash
      attention; TPU). See `bert_jax.models.layers.dot_product_attention`.
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
  initializer_range: float = 0.02
  layer_norm_eps: float = 1e-12
  dtype: str = "float32"
  scan_layers: bool = False
  remat_policy: str = "none"
  pre_layer_norm: bool = False
  family: str = "bert"
  pad_token_id: int = 0
  attention_impl: str = "einsum"

  def __post_init__(self):
    if self.family not in FAMILIES:
      raise ValueError(f"BertConfig: family={self.family!r} is not one of {sorted(FAMILIES)}")
    if self.type_vocab_size < 0:
      raise ValueError(f"BertConfig: type_vocab_size={self.type_vocab_size} is negative")
    if self.hidden_size % self.num_attention_heads:
      raise ValueError(f"BertConfig: hidden_size={self.hidden_size} is not divisible by "
                       f"num_attention_heads={self.num_attention_heads}")
    if self.hidden_act not in HIDDEN_ACTS:
      raise ValueError(f"BertConfig: hidden_act={self.hidden_act!r} is not one of {HIDDEN_ACTS}")
    if self.remat_policy not in REMAT_POLICIES:
      raise ValueError(f"BertConfig: remat_policy={self.remat_policy!r} is not one of "
                       f"{REMAT_POLICIES}")
    if self.attention_impl not in ATTENTION_IMPLS:
      raise ValueError(f"BertConfig: attention_impl={self.attention_impl!r} is not one of "
                       f"{ATTENTION_IMPLS}")
    jnp.dtype(self.dtype)  # raises on an unknown dtype name

  @property
  def head_dim(self) -> int:
    return self.hidden_size // self.num_attention_heads

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
                       "family; read it with bert_jax.convert.families.config_from_hf")
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

    BERT's config.json; `bert_jax.convert.families.config_to_hf` writes every family's.
    """
    if self.family != "bert":
      raise ValueError(f"BertConfig.to_hf_dict writes BERT's config.json; a {self.family} "
                       "config is written by bert_jax.convert.families.config_to_hf")
    if self.pre_layer_norm:
      raise ValueError("BertConfig: pre_layer_norm=True has no HF BERT equivalent (HF's "
                       "BertModel is post-LN); this model cannot be exported to HF")
    hf_act = {"gelu": "gelu", "gelu_tanh": "gelu_new", "relu": "relu"}[self.hidden_act]
    d = dataclasses.asdict(self)
    for k in ("dtype", "scan_layers", "remat_policy", "pre_layer_norm", "family",
              "attention_impl"):
      d.pop(k)
    d.update(hidden_act=hf_act, model_type="bert", architectures=["BertForPreTraining"],
             position_embedding_type="absolute")
    return d


_ROBERTA = dict(family="roberta", vocab_size=50265, max_position_embeddings=514,
                type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1)
_DISTILBERT = dict(family="distilbert", type_vocab_size=0)

# The released sizes (Turc et al. 2019 for the small BERTs); intermediate = 4H. The
# "-tiny" sizes of the other families are BERT-Tiny's shape with that family's fields.
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
}


def config_for_size(size: str, **overrides) -> BertConfig:
  """BertConfig of a named size ("tiny" ... "large", "roberta-base", "distilbert-tiny", ...);
  any field can be overridden."""
  if size not in SIZES:
    raise ValueError(f"Unknown model size {size!r}; known: {list(SIZES)}")
  fields = dict(SIZES[size])
  fields["intermediate_size"] = 4 * fields["hidden_size"]
  fields.update(overrides)
  return BertConfig(**fields)
