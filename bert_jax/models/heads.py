"""Heads that sit on top of `BertModel`: each is its own module, composed in headed.py.

Shape legend: B batch, T length, H hidden, E embedding width (H unless factorized),
V vocab, P masked positions per sequence, C classes (or choices), K mixed layers,
F features per token, S LSTM state size.
"""
import flax.linen as nn
import jax
import jax.numpy as jnp

from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models.dropout import Dropout
from bert_jax.models.layers import ACT_BTV, activation, dense_init, layer_norm, zeros_init


def gather_positions(sequence, positions):
  """sequence [B, T, H], positions int [B, P] -> [B, P, H]."""
  return jnp.take_along_axis(sequence, positions[:, :, None].astype(jnp.int32), axis=1)


class MaskedLMHead(nn.Module):
  """dense (H -> E) + act + LayerNorm transform, then a decoder tied to the [V, E] word
  embeddings + bias.

  Logits come only at `masked_positions` ([B, P] -> [B, P, V]) when given, as the original
  BERT computes them; at every position ([B, T, V]) otherwise. Logits are float32.
  Every family's MLM head has this structure (HF: BERT's cls.predictions, RoBERTa's
  lm_head, DistilBERT's vocab_*, ALBERT's predictions, ELECTRA's generator_predictions +
  generator_lm_head, ModernBERT's head + decoder); the activation is the family's
  `mlm_activation`; the transform's and the norm's biases follow `mlm_transform_bias` and
  `norm_bias`.
  """
  config: BertConfig

  @nn.compact
  def __call__(self, sequence_output, embedding_table, masked_positions=None):
    cfg = self.config
    x = sequence_output
    if masked_positions is not None:
      x = gather_positions(x, masked_positions)
    x = nn.Dense(cfg.embedding_width, use_bias=cfg.mlm_transform_bias,
                 dtype=cfg.compute_dtype, param_dtype=jnp.float32,
                 kernel_init=dense_init(cfg, ("embed", "mlp")), bias_init=zeros_init(("mlp",)),
                 name="transform")(x)  # [B, P, E]
    x = activation(family_of(cfg).mlm_activation or cfg.hidden_act)(x)
    x = layer_norm(cfg, "transform_layer_norm")(x).astype(cfg.compute_dtype)
    logits = jnp.einsum("bph,vh->bpv", x, embedding_table.astype(cfg.compute_dtype),
                        preferred_element_type=jnp.float32)
    bias = self.param("output_bias", zeros_init(("vocab",)), (cfg.vocab_size,), jnp.float32)
    return nn.with_logical_constraint(logits + bias, ACT_BTV)


class LinearMaskedLMHead(nn.Module):
  """One untied linear layer without bias to the vocabulary: Reformer's MLM head (HF
  ReformerOnlyLMHead, whose `bias` its forward never adds). Same call as MaskedLMHead
  (the word embeddings unused): [B, T or P, H'] -> [B, T or P, V] float32 logits."""
  config: BertConfig

  @nn.compact
  def __call__(self, sequence_output, embedding_table, masked_positions=None):
    del embedding_table
    cfg = self.config
    x = sequence_output
    if masked_positions is not None:
      x = gather_positions(x, masked_positions)
    logits = nn.Dense(cfg.vocab_size, use_bias=False, dtype=cfg.compute_dtype,
                      param_dtype=jnp.float32, kernel_init=dense_init(cfg, ("embed", "vocab")),
                      name="decoder")(x)
    return nn.with_logical_constraint(logits.astype(jnp.float32), ACT_BTV)


# Family.mlm_head -> the MLM head module.
MLM_HEADS = {"tied": MaskedLMHead, "linear": LinearMaskedLMHead}


class SpanBoundaryHead(nn.Module):
  """SpanBERT's span boundary objective head: each masked token predicted from its span's
  boundary states and its place in the span.

  [x_{s-1}; x_{e+1}; p_i] ([B, P, 2H + H]: the states at `left` and `right`, a learned
  embedding of `offset`, clipped to max_span_tokens - 1) -> dense + act + LayerNorm, twice
  -> the decoder tied to the word embeddings + its own bias: [B, P, V] float32 logits.
  The position embedding has H dims (SpanBERT's has 200 beside H = 1024); act is the
  encoder's hidden_act (GeLU).
  """
  config: BertConfig
  max_span_tokens: int = 32

  @nn.compact
  def __call__(self, sequence_output, embedding_table, left, right, offset):
    cfg = self.config
    position = nn.Embed(self.max_span_tokens, cfg.hidden_size, dtype=cfg.compute_dtype,
                        param_dtype=jnp.float32, embedding_init=dense_init(cfg, (None, "embed")),
                        name="position_embeddings")(
                            jnp.minimum(offset, self.max_span_tokens - 1))
    x = jnp.concatenate([gather_positions(sequence_output, left).astype(cfg.compute_dtype),
                         gather_positions(sequence_output, right).astype(cfg.compute_dtype),
                         position], axis=-1)                                     # [B, P, 3H]
    for i in (1, 2):
      x = nn.Dense(cfg.hidden_size, dtype=cfg.compute_dtype, param_dtype=jnp.float32,
                   kernel_init=dense_init(cfg, (None, "mlp")), bias_init=zeros_init(("mlp",)),
                   name=f"dense_{i}")(x)
      x = activation(cfg.hidden_act)(x)
      x = layer_norm(cfg, f"layer_norm_{i}")(x).astype(cfg.compute_dtype)
    logits = jnp.einsum("bph,vh->bpv", x, embedding_table.astype(cfg.compute_dtype),
                        preferred_element_type=jnp.float32)
    bias = self.param("output_bias", zeros_init(("vocab",)), (cfg.vocab_size,), jnp.float32)
    return nn.with_logical_constraint(logits + bias, ACT_BTV)


class NextSentenceHead(nn.Module):
  """Pooled [B, H] -> [B, 2] logits (index 0 = IsNext, 1 = NotNext)."""
  config: BertConfig

  @nn.compact
  def __call__(self, pooled_output):
    return nn.Dense(2, dtype=jnp.float32, param_dtype=jnp.float32,
                    kernel_init=dense_init(self.config, ("embed", None)),
                    bias_init=zeros_init((None,)), name="dense")(pooled_output)


class ReplacedTokenHead(nn.Module):
  """ELECTRA's discriminator: [B, T, H] -> [B, T] float32 logits that each token was
  replaced (dense H -> H, the config's activation, dense H -> 1; HF
  discriminator_predictions)."""
  config: BertConfig

  @nn.compact
  def __call__(self, sequence_output):
    cfg = self.config
    x = nn.Dense(cfg.hidden_size, dtype=cfg.compute_dtype, param_dtype=jnp.float32,
                 kernel_init=dense_init(cfg, ("embed", "mlp")), bias_init=zeros_init(("mlp",)),
                 name="dense")(sequence_output)
    x = activation(cfg.hidden_act)(x)
    logits = nn.Dense(1, dtype=jnp.float32, param_dtype=jnp.float32,
                      kernel_init=dense_init(cfg, ("mlp", None)), bias_init=zeros_init((None,)),
                      name="prediction")(x)
    return logits[..., 0]


class LinearHead(nn.Module):
  """Dropout then a linear layer to `num_outputs`: the classifier of every fine-tuning task.

  [..., H] -> [..., num_outputs] float32; works on pooled ([B, H]) or per-token ([B, T, H])
  features alike. `dropout_rate` None means the encoder's hidden dropout.
  """
  config: BertConfig
  num_outputs: int
  dropout_rate: float | None = None

  @nn.compact
  def __call__(self, features, deterministic: bool):
    rate = self.config.hidden_dropout_prob if self.dropout_rate is None else self.dropout_rate
    features = Dropout(rate)(features, deterministic=deterministic)
    return nn.Dense(self.num_outputs, dtype=jnp.float32, param_dtype=jnp.float32,
                    kernel_init=dense_init(self.config, ("embed", None)),
                    bias_init=zeros_init((None,)), name="dense")(features)


class PredictionHead(nn.Module):
  """dense (H -> H) + act + LayerNorm: ModernBERT's prediction head (HF ModernBertPredictionHead),
  which every HF ModernBERT task class applies before its classifier.

  [..., H'] -> [..., H]: the [CLS] row or the mean for sentence tasks, every token for
  tagging and QA. The dense bias follows `mlm_transform_bias` (HF's classifier_bias, which
  its MLM head shares), the norm's `norm_bias`; act is hidden_act (HF's
  classifier_activation, which the HF reader requires to be the same).
  """
  config: BertConfig

  @nn.compact
  def __call__(self, features):
    cfg = self.config
    x = nn.Dense(cfg.hidden_size, use_bias=cfg.mlm_transform_bias, dtype=cfg.compute_dtype,
                 param_dtype=jnp.float32, kernel_init=dense_init(cfg, (None, "mlp")),
                 bias_init=zeros_init(("mlp",)), name="dense")(features)
    x = activation(cfg.hidden_act)(x)
    return layer_norm(cfg, "layer_norm")(x).astype(cfg.compute_dtype)


class ScalarMix(nn.Module):
  """ELMo's scalar mix (Peters et al. 2018, eq. 1): gamma * sum_k softmax(w)_k h_k.

  K x [B, T, H] -> [B, T, H] float32; `weights` [K] start at 0 (the mean of the layers),
  `scale` (gamma) at 1.
  """

  @nn.compact
  def __call__(self, layers):
    weights = self.param("weights", nn.initializers.zeros, (len(layers),), jnp.float32)
    scale = self.param("scale", nn.initializers.ones, (), jnp.float32)
    stacked = jnp.stack([h.astype(jnp.float32) for h in layers])  # [K, B, T, H]
    return scale * jnp.einsum("k,kbth->bth", jax.nn.softmax(weights), stacked)


def sequence_starts(segments, reverse: bool):
  """bool [B, T]: where a recurrence restarts, read in its direction: the first token, and
  every token whose segment id differs from the one before it (after it, reversed)."""
  before = segments[:, 1:] != segments[:, :-1]  # [B, T - 1]: t + 1 differs from t
  edge = jnp.ones_like(segments[:, :1], bool)
  return (jnp.concatenate([before, edge], axis=1) if reverse
          else jnp.concatenate([edge, before], axis=1))


# nn.LSTMCell's gates in the order its parameters are read here; its input kernels are
# named "i" + gate, its recurrent kernels (which carry the bias) "h" + gate.
LSTM_GATES = ("i", "f", "g", "o")


class _Kernel(nn.Module):
  """One of nn.LSTMCell's Dense layers as bare parameters (kernel [in, S], bias [S])."""
  shape: tuple[int, int]
  recurrent: bool

  @nn.compact
  def __call__(self):
    init = nn.initializers.orthogonal() if self.recurrent else nn.initializers.lecun_normal()
    kernel = self.param("kernel", init, self.shape, jnp.float32)
    bias = (self.param("bias", nn.initializers.zeros_init(), self.shape[1:], jnp.float32)
            if self.recurrent else None)
    return kernel, bias


class LSTMWeights(nn.Module):
  """nn.LSTMCell's parameters (the same names, shapes and initialisers, so checkpoints of
  either load in the other), returned fused: the input kernel [F, 4S], the recurrent kernel
  [S, 4S] and the bias [4S], gates in LSTM_GATES order."""
  state_size: int

  @nn.compact
  def __call__(self, num_features: int):
    inputs = [_Kernel((num_features, self.state_size), False, name=f"i{g}")()[0]
              for g in LSTM_GATES]
    recurrent = [_Kernel((self.state_size, self.state_size), True, name=f"h{g}")()
                 for g in LSTM_GATES]
    return (jnp.concatenate(inputs, axis=1), jnp.concatenate([k for k, _ in recurrent], 1),
            jnp.concatenate([b for _, b in recurrent]))


class SegmentLSTM(nn.Module):
  """One direction of an LSTM over [B, T, F] -> [B, T, S] that starts afresh (zero
  state) wherever the segment id changes: each example of a packed row, and the padding
  after it, is its own sequence, as if it were run alone.

  nn.LSTMCell's arithmetic and parameters (LSTMWeights), with the input projection of every
  token done as one [B*T, F] x [F, 4S] matmul before the recurrence, which then multiplies
  only the state: one [B, S] x [S, 4S] matmul per token instead of the cell's eight.
  """
  state_size: int
  reverse: bool = False

  @nn.compact
  def __call__(self, features, segments):
    w_input, w_state, bias = LSTMWeights(self.state_size, name="cell")(features.shape[-1])
    projected = jnp.einsum("btf,fg->btg", features.astype(jnp.float32), w_input) + bias
    starts = sequence_starts(segments, self.reverse)
    zeros = jnp.zeros((features.shape[0], self.state_size), jnp.float32)

    def step(carry, inputs):
      x, start = inputs  # [B, 4S], [B]
      c, h = (jnp.where(start[:, None], 0.0, v) for v in carry)
      i, f, g, o = jnp.split(x + h @ w_state, 4, axis=-1)
      c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
      h = jax.nn.sigmoid(o) * jnp.tanh(c)
      return (c, h), h

    _, outputs = jax.lax.scan(step, (zeros, zeros),
                              (projected.swapaxes(0, 1), starts.swapaxes(0, 1)),
                              reverse=self.reverse)
    return outputs.swapaxes(0, 1)


class BiLSTM(nn.Module):
  """A stack of bidirectional LSTMs over token features, each layer's two directions
  concatenated: [B, T, F] -> [B, T, 2S] float32 (the BERT paper's feature-based tagger:
  a two-layer 768-dimensional BiLSTM on frozen activations, Devlin et al. 2019, 5.3).

  segments int [B, T]: the recurrences restart where it changes (SegmentLSTM): the
  attention mask of unpacked rows, the segment ids of packed ones.
  """
  state_size: int
  num_layers: int = 2

  @nn.compact
  def __call__(self, features, segments):
    x = features
    for i in range(self.num_layers):
      x = jnp.concatenate(
          [SegmentLSTM(self.state_size, reverse=reverse, name=f"{way}_{i}")(x, segments)
           for way, reverse in (("forward", False), ("backward", True))], axis=-1)
    return x


# Family.prediction_head -> the module fine-tuning classifiers read their features through.
PREDICTION_HEADS = {"prediction": PredictionHead}
