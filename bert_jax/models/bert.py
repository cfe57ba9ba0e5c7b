"""The encoder of the BERT family: embeddings, post-LN Transformer layers (pre-LN
optional), pooler. What a family member changes (position ids, pooler, the modules of a
different architecture: `ARCHITECTURES`, e.g. modernbert.py) comes from its entry in
`bert_jax.models.families`; segment embeddings exist when type_vocab_size > 0.

Shapes and logical axes: see bert_jax/models/layers.py.
"""
import functools
from typing import Optional

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.models import layers, modernbert, reformer
from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models.dropout import Dropout
from bert_jax.models.layers import (ACT_BT, ACT_BTH, ACT_BTI, AttentionMask, SelfAttention,
                                    activation, check_length, dense_init, layer_norm,
                                    remat_layer, zeros_init)

@flax.struct.dataclass
class EncoderOutput:
  """What `BertModel` returns (a flax.struct dataclass: a pytree, fields by name).

  sequence_output: [B, T, H] the last layer.
  pooled_output: [B, H] tanh(dense(sequence_output[:, 0])), or None without a pooler.
  hidden_states: (L + 1) x [B, T, H], the embedding output then each layer's output,
    when asked for with `output_hidden_states=True`; else None.
  """
  sequence_output: jax.Array
  pooled_output: Optional[jax.Array] = None
  hidden_states: Optional[tuple[jax.Array, ...]] = None


# config.projection_init -> the E -> H projection's kernel init (logical axes added below).
PROJECTION_INITS = {
    "normal": lambda cfg: nn.initializers.truncated_normal(cfg.initializer_range),
    "fan_in": lambda cfg: nn.initializers.normal(cfg.embedding_width ** -0.5),
}


class Embeddings(nn.Module):
  """Word + position (+ segment) embeddings, then LayerNorm and dropout (E wide), then the
  E -> H projection when the config has one (ALBERT, ELECTRA: `projects_embeddings`).

  Position ids come from the family (`families.Family.position_ids`). Segments: none
  when type_vocab_size is 0; with one row (RoBERTa) that row is added to every token and
  token_type_ids are ignored (a pair's second segment has no row of its own). Task types
  (ERNIE's `use_task_id`): a row per task id added when task_type_vocab_size > 0.
  """
  config: BertConfig

  def setup(self):
    cfg = self.config
    embed = lambda n, axes, name: nn.Embed(  # noqa: E731
        n, cfg.embedding_width, dtype=cfg.compute_dtype, param_dtype=jnp.float32,
        embedding_init=dense_init(cfg, axes), name=name)
    self.word_embeddings = embed(cfg.vocab_size, ("vocab", "embed"), "word_embeddings")
    self.position_embeddings = embed(cfg.max_position_embeddings, (None, "embed"),
                                     "position_embeddings")
    if cfg.type_vocab_size:
      self.token_type_embeddings = embed(cfg.type_vocab_size, (None, "embed"),
                                         "token_type_embeddings")
    if cfg.task_type_vocab_size:
      self.task_type_embeddings = embed(cfg.task_type_vocab_size, (None, "embed"),
                                        "task_type_embeddings")
    self.layer_norm = layer_norm(cfg, "layer_norm")
    self.dropout = Dropout(cfg.hidden_dropout_prob)
    if cfg.projects_embeddings:  # [E, H]
      self.projection = nn.Dense(cfg.hidden_size, dtype=cfg.compute_dtype,
                                 param_dtype=jnp.float32,
                                 kernel_init=nn.with_logical_partitioning(
                                     PROJECTION_INITS[cfg.projection_init](cfg),
                                     ("mlp", "embed")),
                                 bias_init=zeros_init(("embed",)), name="projection")

  def __call__(self, input_ids, token_type_ids, deterministic: bool, positions=None,
               task_type_ids=None):
    """positions: int [B, T] offsets within each packed example (None: the family's).
    task_type_ids: int [B, T] (None: task 0), read when the config has task types."""
    cfg = self.config
    family = family_of(cfg)
    first = family.first_position(cfg)
    check_length(cfg, input_ids.shape[1], first)
    position_ids = (family.position_ids(input_ids, cfg) if positions is None
                    else positions + first)
    x = self.word_embeddings(input_ids) + self.position_embeddings(position_ids)  # [B, T, E]
    if cfg.type_vocab_size:
      segments = token_type_ids if cfg.type_vocab_size > 1 else jnp.zeros_like(input_ids)
      x = x + self.token_type_embeddings(segments)
    if cfg.task_type_vocab_size:
      tasks = jnp.zeros_like(input_ids) if task_type_ids is None else task_type_ids
      x = x + self.task_type_embeddings(tasks)
    x = self.layer_norm(x).astype(cfg.compute_dtype)
    x = nn.with_logical_constraint(x, ACT_BTH)  # [B, T, E]: embed is never split
    x = self.dropout(x, deterministic=deterministic)
    if cfg.projects_embeddings:
      x = nn.with_logical_constraint(self.projection(x), ACT_BTH)  # [B, T, H]
    return x


SUBLAYERS = ("attention", "feed_forward")


class TransformerLayer(nn.Module):
  """One post-LN layer (BERT): x = LN(x + Attn(x)); x = LN(x + FFN(x)).

  With `pre_layer_norm` (an ablation; Xiong et al. 2020): x = x + Attn(LN(x));
  x = x + FFN(LN(x)), same param names, and the Encoder adds a final LayerNorm.
  sublayers: the sub-layers this module holds and applies, in order (both, or one of
  them when cross-layer sharing splits a layer between a shared and an own module).
  """
  config: BertConfig
  sublayers: tuple[str, ...] = SUBLAYERS

  @nn.compact
  def __call__(self, hidden, mask, deterministic: bool):
    cfg = self.config
    dropout = Dropout(cfg.hidden_dropout_prob)

    dense = functools.partial(layers.dense, cfg)
    pre = cfg.pre_layer_norm

    def feed_forward(x):
      ffn = dense(cfg.intermediate_size, ("embed", "mlp"), "intermediate")(x)  # [B, T, I]
      ffn = activation(cfg.hidden_act)(ffn)
      ffn = nn.with_logical_constraint(ffn, ACT_BTI)
      ffn = dense(cfg.hidden_size, ("mlp", "embed"), "output")(ffn)  # [B, T, H]
      return dropout(ffn, deterministic=deterministic)

    if "attention" in self.sublayers:
      attention_norm = layer_norm(cfg, "attention_layer_norm")
      attention_in = attention_norm(hidden).astype(cfg.compute_dtype) if pre else hidden
      attended = SelfAttention(cfg, name="attention")(attention_in, mask, deterministic)
      hidden = hidden + dropout(attended, deterministic=deterministic)
      if not pre:
        hidden = attention_norm(hidden).astype(cfg.compute_dtype)
    if "feed_forward" in self.sublayers:
      output_norm = layer_norm(cfg, "output_layer_norm")
      hidden = hidden + feed_forward(output_norm(hidden).astype(cfg.compute_dtype) if pre
                                     else hidden)
      if not pre:
        hidden = output_norm(hidden).astype(cfg.compute_dtype)
    return nn.with_logical_constraint(hidden, ACT_BTH)


# config.layer_sharing -> (sub-layers of the one `shared_layer`, sub-layers each `layer_i`
# keeps). Each layer applies attention then feed-forward, from whichever module holds it.
LAYER_SHARING = {
    "none": ((), SUBLAYERS),
    "all": (SUBLAYERS, ()),
    "attention": (("attention",), ("feed_forward",)),
    "ffn": (("feed_forward",), ("attention",)),
}


def _remat_layer_class(policy: str):
  return remat_layer(TransformerLayer, policy)


class _ScannedLayer(nn.Module):
  """Adapts TransformerLayer to nn.scan's (carry, x) -> (carry, y) signature."""
  config: BertConfig
  deterministic: bool

  @nn.compact
  def __call__(self, hidden, mask):
    layer_cls = _remat_layer_class(self.config.remat_policy)
    hidden = layer_cls(self.config, name="layer")(hidden, mask, self.deterministic)
    return hidden, hidden


def _scan_shared(layer, hidden, mask, deterministic: bool, num_layers: int):
  """The one `shared_layer` applied num_layers times under nn.scan: its params broadcast to
  every step (not stacked), a dropout key split per step, its sown attention stacked.
  Returns (the last output, every step's output stacked [L, B, T, H])."""
  def body(module, carry, mask):
    carry = module(carry, mask, deterministic)
    return carry, carry
  return nn.scan(body, variable_broadcast="params", variable_axes={"intermediates": 0},
                 split_rngs={"params": False, "dropout": True}, in_axes=nn.broadcast,
                 length=num_layers)(layer, hidden, mask)


class Encoder(nn.Module):
  """L Transformer layers: unrolled (`layer_0` ...) or scanned (`layers`, stacked).

  With cross-layer sharing (`config.layer_sharing`), the shared sub-layers' params are one
  module, `shared_layer`, applied by every layer; `layer_i` hold what is not shared. With
  every sub-layer shared ("all", ALBERT's) and scan_layers, that one module runs under
  nn.scan (the same params, one compiled layer).
  """
  config: BertConfig

  @nn.compact
  def __call__(self, hidden, mask, deterministic: bool, output_hidden_states: bool,
               positions=None):
    """positions: a packed row's per-example offsets, unused here (the embeddings added
    them); taken so that every architecture's encoder has the same call."""
    del positions
    cfg = self.config
    all_states = [hidden]  # the embeddings, then each layer's output
    shared_parts, own_parts = LAYER_SHARING[cfg.layer_sharing]
    if cfg.scan_layers and not own_parts:  # one shared layer: scanned, params broadcast
      shared = _remat_layer_class(cfg.remat_policy)(cfg, shared_parts, name="shared_layer")
      hidden, per_layer = _scan_shared(shared, hidden, mask, deterministic,
                                       cfg.num_hidden_layers)
      all_states += [per_layer[i] for i in range(cfg.num_hidden_layers)]
    elif cfg.scan_layers:
      scanned = nn.scan(
          _ScannedLayer, variable_axes={"params": 0, "intermediates": 0},
          split_rngs={"params": True, "dropout": True},
          in_axes=nn.broadcast, length=cfg.num_hidden_layers,
          metadata_params={nn.PARTITION_NAME: "layers"})
      hidden, per_layer = scanned(cfg, deterministic, name="layers")(hidden, mask)
      all_states += [per_layer[i] for i in range(cfg.num_hidden_layers)]
    else:
      layer_cls = _remat_layer_class(cfg.remat_policy)
      shared = layer_cls(cfg, shared_parts, name="shared_layer") if shared_parts else None
      for i in range(cfg.num_hidden_layers):
        own = layer_cls(cfg, own_parts, name=f"layer_{i}") if own_parts else None
        in_order = (shared, own) if "attention" in shared_parts else (own, shared)
        for module in filter(None, in_order):
          hidden = module(hidden, mask, deterministic)
        all_states.append(hidden)
    if cfg.pre_layer_norm:  # the residual stream is normalised once, at the end
      hidden = layer_norm(cfg, "final_layer_norm")(hidden).astype(cfg.compute_dtype)
      all_states[-1] = hidden
    return hidden, (tuple(all_states) if output_hidden_states else None)


# Family.architecture -> (embeddings, encoder) modules; both take and return the same
# things as Embeddings and Encoder above.
ARCHITECTURES = {
    "bert": (Embeddings, Encoder),
    "modernbert": (modernbert.Embeddings, modernbert.Encoder),
    "reformer": (reformer.Embeddings, reformer.Encoder),
}


class Pooler(nn.Module):
  """act(dense(hidden[:, 0])): the [CLS] summary used by NSP and classification; act is the
  family's `pooler_activation` (BERT's tanh)."""
  config: BertConfig

  @nn.compact
  def __call__(self, sequence_output, cls_positions=None):
    """[B, T, H] -> [B, H]; with cls_positions int [B, K] (packed rows) -> [B, K, H]."""
    cfg = self.config
    first = (sequence_output[:, 0] if cls_positions is None else
             jnp.take_along_axis(sequence_output, cls_positions[..., None], axis=1))
    pooled = nn.Dense(cfg.hidden_size, dtype=cfg.compute_dtype, param_dtype=jnp.float32,
                      kernel_init=dense_init(cfg, ("embed", "mlp")),
                      bias_init=zeros_init(("mlp",)), name="dense")(first)
    return activation(family_of(cfg).pooler_activation)(pooled)


class BertModel(nn.Module):
  """Embeddings + encoder (+ pooler) of any family. Heads are separate modules (heads.py).

  config: the encoder's hyper-parameters (`BertConfig`, e.g. `config_for_size("base")`).
  add_pooling_layer: None takes the family's default (HF's encoder of that family:
  BERT and RoBERTa have a pooler, DistilBERT has none).

  Called with int [B, T] ids (see `__call__`), it returns an `EncoderOutput`:

  ```python
  import jax
  import jax.numpy as jnp
  from bert_jax import config_for_size
  from bert_jax.models.bert import BertModel

  model = BertModel(config_for_size("tiny", vocab_size=100))
  input_ids = jnp.array([[2, 15, 27, 3, 0, 0]])  # [CLS] two tokens [SEP], then padding
  attention_mask = (input_ids != 0).astype(jnp.int32)
  variables = model.init(jax.random.key(0), input_ids)
  out = model.apply(variables, input_ids, attention_mask=attention_mask,
                    output_hidden_states=True)
  assert out.sequence_output.shape == (1, 6, 128)  # [B, T, H]
  assert out.pooled_output.shape == (1, 128)  # [B, H]
  assert len(out.hidden_states) == 3  # the embeddings, then each of the 2 layers
  # Training: dropout on, from an rng named "dropout".
  out = model.apply(variables, input_ids, attention_mask=attention_mask,
                    deterministic=False, rngs={"dropout": jax.random.key(1)})
  ```
  """
  config: BertConfig
  add_pooling_layer: Optional[bool] = None

  @property
  def has_pooler(self) -> bool:
    if self.add_pooling_layer is None:
      return family_of(self.config).pooler
    return self.add_pooling_layer

  def setup(self):
    embeddings, encoder = ARCHITECTURES[family_of(self.config).architecture]
    self.embeddings = embeddings(self.config)
    self.encoder = encoder(self.config)
    if self.has_pooler:
      self.pooler = Pooler(self.config)

  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False,
               packing=None, task_type_ids=None) -> EncoderOutput:
    """Runs the encoder on a batch of B rows of T tokens.

    input_ids: int [B, T] token ids (the tokenizer's `encode_for_model` gives them).
    token_type_ids: int [B, T] segment of each token (0 first text, 1 second); None: 0s.
    attention_mask: int [B, T], 1 for real tokens, 0 for padding; None: 1s.
    deterministic: True (inference) turns dropout off; False needs an rng named
      "dropout" in `apply`.
    output_hidden_states: also return every layer's output (`EncoderOutput.hidden_states`).
    task_type_ids: int [B, T], ERNIE's task ids (config.task_type_vocab_size); None: 0s.
      The name is HF's (ErnieModel's input and `task_type_embeddings` table), kept so that
      ERNIE's calls and checkpoints read as HF's; it is not `config.task`.

    packing: None, or a packed batch's {"segment_ids", "positions"} int [B, T] and
    "cls_positions" int [B, K] (bert_jax/core/packed_rows.py): attention stays within each
    example, positions restart per example, and the pooled output is [B, K, H], one per
    example's [CLS].
    """
    if token_type_ids is None:
      token_type_ids = jnp.zeros_like(input_ids)
    if attention_mask is None:
      attention_mask = jnp.ones_like(input_ids)
    input_ids = nn.with_logical_constraint(input_ids, ACT_BT)
    packing = packing or {}
    hidden = self.embeddings(input_ids, token_type_ids, deterministic, packing.get("positions"),
                             task_type_ids)
    mask = AttentionMask(attention_mask, packing.get("segment_ids"))
    sequence_output, hidden_states = self.encoder(
        hidden, mask, deterministic, output_hidden_states, packing.get("positions"))
    pooled = (self.pooler(sequence_output, packing.get("cls_positions")) if self.has_pooler
              else None)
    return EncoderOutput(sequence_output=sequence_output, pooled_output=pooled,
                         hidden_states=hidden_states)

  def word_embedding_table(self):
    """[V, E] float32 word embeddings, for decoders tied to them (MLM)."""
    return self.embeddings.word_embeddings.embedding
