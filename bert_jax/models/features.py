"""What a headed model reads from the encoder: sentence vectors (the pooler, [CLS], the mean of
the tokens), the chosen hidden layers mixed into token features, and the feature heads over
them (linear, BiLSTM), each a table of named functions that config fields pick
(classifier_pooling, feature_mix, feature_head).

Shape legend: B batch, T sequence length, H hidden size, K layers (or a packed row's
examples), F feature width.
"""
import jax
import jax.numpy as jnp

from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models.heads import PREDICTION_HEADS, BiLSTM, ScalarMix


# How the chosen hidden layers (feature_layers) make one feature vector per token
# (config.feature_mix): K x [B, T, H] -> [B, T, F]. "concat": side by side (F = K H, the
# BERT paper's concatenation of the last four); "scalar_mix": ELMo's softmax-weighted sum
# with a learned scale (F = H; heads.ScalarMix, params `scalar_mix`).
FEATURE_MIXES = {
    "concat": lambda layers: jnp.concatenate(layers, axis=-1),
    "scalar_mix": lambda layers: ScalarMix(name="scalar_mix")(layers),
}


def check_choice(table: dict, field: str, name: str) -> None:
  """A one-line error naming config.`field` when `name` is not one of `table`'s."""
  if name not in table:
    raise ValueError(f"config.{field}={name!r}: expected one of {sorted(table)}")


def layer_features(enc, feature_layers: tuple[int, ...], frozen: bool, mix: str = "concat",
                   cached=None):
  """[B, T, F]: the chosen hidden_states combined by FEATURE_MIXES[mix] (feature-based
  use, as ELMo).

  frozen: no gradient flows into the encoder (train the head only; pair it with an
  optimizer that leaves the `bert` params alone, see optim.freeze).
  cached: [B, T, K, H], those K layers computed before training by the frozen encoder
  (finetune/feature_cache.py), read instead of `enc` (None then).
  """
  check_choice(FEATURE_MIXES, "feature_mix", mix)
  if cached is not None:
    return FEATURE_MIXES[mix]([cached[:, :, k] for k in range(cached.shape[2])])
  layers = [enc.hidden_states[i] for i in feature_layers]
  layers = [jax.lax.stop_gradient(h) for h in layers] if frozen else layers
  return FEATURE_MIXES[mix](layers)


def check_cached(cached_layers, feature_layers: tuple[int, ...]) -> None:
  """Cached layers ([B, T, K, H]) stand for the feature_layers, one for one."""
  if cached_layers is not None and cached_layers.shape[2] != len(feature_layers):
    raise ValueError(f"cached_layers hold {cached_layers.shape[2]} layers; the model's "
                     f"feature_layers are {len(feature_layers)}: {feature_layers}")


def bilstm(config: BertConfig, tokens, attention_mask, packing):
  """The two-layer BiLSTM (heads.BiLSTM, params `bilstm`, H per direction) over [B, T, F]
  token features, each packed example (else each row's real tokens) its own sequence:
  [B, T, 2H]."""
  if packing is not None:
    segments = packing["segment_ids"]
  elif attention_mask is not None:
    segments = attention_mask
  else:
    segments = jnp.ones(tokens.shape[:2], jnp.int32)
  return BiLSTM(config.hidden_size, name="bilstm")(tokens, segments)


# What reads a tagger's token features (config.feature_head): [B, T, F] -> [B, T, F'] for
# the linear classifier; "linear": the features themselves; "bilstm": a two-layer BiLSTM
# over them (the BERT paper's feature-based NER tagger).
TOKEN_FEATURE_HEADS = {
    "linear": lambda config, tokens, attention_mask, packing: tokens,
    "bilstm": bilstm,
}


def cls_vectors(tokens, packing=None) -> jax.Array:
  """[B, T, F] -> each example's [CLS] vector: [B, F] (position 0), or [B, K, F] at a
  packed batch's "cls_positions" [B, K]."""
  if packing is None:
    return tokens[:, 0]
  return jnp.take_along_axis(tokens, packing["cls_positions"][..., None], axis=1)


def example_members(tokens, packing=None) -> jax.Array:
  """bool [B, T] -> [B, K, T]: which of them belong to each example (K = 1 unpacked; a
  packed row's examples by their segment ids, each read at its [CLS])."""
  if packing is None:
    return tokens[:, None, :]
  segments = packing["segment_ids"]
  own = jnp.take_along_axis(segments, packing["cls_positions"], axis=1)  # [B, K]
  return (segments[:, None, :] == own[:, :, None]) & tokens[:, None, :]


def mean_of_real_tokens(enc, attention_mask, packing=None) -> jax.Array:
  """The last layer averaged over each example's real tokens (attention_mask 1), as HF
  ModernBERT's classifier_pooling="mean" and Sentence-BERT's mean pooling: [B, H], or
  [B, K, H] for a packed batch (each example's tokens: its segment id, read at its [CLS])."""
  return token_mean(enc.sequence_output, attention_mask, packing)


def token_mean(hidden, attention_mask, packing=None) -> jax.Array:
  """[B, T, F] averaged over each example's real tokens: [B, F], or [B, K, F] packed."""
  if attention_mask is None:
    attention_mask = jnp.ones(hidden.shape[:2], jnp.int32)
  weights = example_members(attention_mask > 0, packing).astype(hidden.dtype)
  means = jnp.einsum("bkt,bth->bkh", weights, hidden) / jnp.maximum(
      jnp.sum(weights, axis=-1, keepdims=True), 1)
  return means[:, 0] if packing is None else means


# How a sequence classifier makes its sentence vector ([B, H], or [B, K, H] for a packed
# batch) from the encoder's output (config.classifier_pooling): "pooler", the family's
# [CLS] vector (BERT's tanh(W h_[CLS]) pooler; the bare [CLS] row in a family whose prediction
# head follows, ModernBERT's, whose encoder is then built without a pooler), or the mean
# of the tokens.
POOLINGS = {
    "pooler": lambda enc, attention_mask, packing: (
        enc.pooled_output if enc.pooled_output is not None
        else cls_vectors(enc.sequence_output, packing)),
    "mean": mean_of_real_tokens,
}


# What makes a sentence vector from the feature_layers' token features
# (config.feature_head): [B, T, F] -> [B, F] ([B, K, F] packed). "linear": the [CLS]
# vector; "bilstm": the two-layer BiLSTM over the tokens, averaged over each example's.
SENTENCE_FEATURE_HEADS = {
    "linear": lambda config, tokens, attention_mask, packing: cls_vectors(tokens, packing),
    "bilstm": lambda config, tokens, attention_mask, packing: token_mean(
        bilstm(config, tokens, attention_mask, packing), attention_mask, packing),
}


def classifier_pooler(config: BertConfig, pooling: str) -> bool:
  """Whether a sentence classifier's encoder gets a pooler layer: "pooler" pooling in a
  family without a prediction head (ModernBERT's head reads the bare [CLS] row)."""
  return pooling == "pooler" and not family_of(config).prediction_head


def prediction_head(config: BertConfig):
  """The family's prediction head (`Family.prediction_head`, named "head"), or the identity; call it
  inside a compact module's __call__."""
  name = family_of(config).prediction_head
  return PREDICTION_HEADS[name](config, name="head") if name else (lambda features: features)
