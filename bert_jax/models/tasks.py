"""Task models: `BertModel` composed with one head each (no head switch in the encoder).

Every model takes `(input_ids, token_type_ids=None, attention_mask=None, ...)` int [B, T]
(multiple choice: [B, C, T]) plus `deterministic` (False turns dropout on; pass an rng
named "dropout") and `output_hidden_states`, and returns a flax.struct output object.
Param trees: `bert` (the encoder) next to the head's name, so an encoder checkpoint
drops into any of them.
"""
from typing import Optional

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.models.config import BertConfig
from bert_jax.models.encoder import BertModel
from bert_jax.models.heads import LinearHead, MaskedLMHead, NextSentenceHead


@flax.struct.dataclass
class PreTrainingOutput:
  """mlm_logits: [B, P, V] at the masked positions, or [B, T, V] when none were given."""
  sequence_output: jax.Array
  pooled_output: jax.Array
  mlm_logits: jax.Array
  nsp_logits: jax.Array  # [B, 2]
  hidden_states: Optional[tuple[jax.Array, ...]] = None


@flax.struct.dataclass
class ClassifierOutput:
  """logits: [B, C] (sequence, C=1 for regression), [B, T, C] (tokens), [B, C] (choices)."""
  logits: jax.Array
  hidden_states: Optional[tuple[jax.Array, ...]] = None


@flax.struct.dataclass
class SpanOutput:
  start_logits: jax.Array  # [B, T]
  end_logits: jax.Array  # [B, T]
  hidden_states: Optional[tuple[jax.Array, ...]] = None


class BertForPreTraining(nn.Module):
  """Masked LM (decoder tied to the word embeddings) + next-sentence prediction."""
  config: BertConfig

  def setup(self):
    self.bert = BertModel(self.config)
    self.mlm_head = MaskedLMHead(self.config)
    self.nsp_head = NextSentenceHead(self.config)

  def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
               masked_lm_positions=None, *, deterministic: bool = True,
               output_hidden_states: bool = False) -> PreTrainingOutput:
    enc = self.bert(input_ids, token_type_ids, attention_mask, deterministic=deterministic,
                    output_hidden_states=output_hidden_states)
    mlm_logits = self.mlm_head(enc.sequence_output, self.bert.word_embedding_table(),
                               masked_lm_positions)
    return PreTrainingOutput(
        sequence_output=enc.sequence_output, pooled_output=enc.pooled_output,
        mlm_logits=mlm_logits, nsp_logits=self.nsp_head(enc.pooled_output),
        hidden_states=enc.hidden_states)


def layer_features(enc, feature_layers: tuple[int, ...], frozen: bool):
  """[B, T, H * k]: the chosen hidden_states concatenated (feature-based use, as ELMo).

  frozen: no gradient flows into the encoder (train the head only; pair it with an
  optimizer that leaves the `bert` params alone, see optim.freeze).
  """
  features = jnp.concatenate([enc.hidden_states[i] for i in feature_layers], axis=-1)
  return jax.lax.stop_gradient(features) if frozen else features


class BertForSequenceClassification(nn.Module):
  """[CLS] -> C logits (single sentence or pair; C=1 is regression).

  Fine-tuning reads the pooled output. With `feature_layers` (e.g. (-4, -3, -2, -1)) the
  head reads those layers' [CLS] vectors concatenated instead; `frozen_encoder` stops
  gradients into the encoder (the feature-based comparison of the BERT paper).
  """
  config: BertConfig
  num_labels: int
  dropout_rate: float | None = None
  feature_layers: tuple[int, ...] = ()
  frozen_encoder: bool = False

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False):
    enc = BertModel(self.config, name="bert")(
        input_ids, token_type_ids, attention_mask, deterministic=deterministic,
        output_hidden_states=output_hidden_states or bool(self.feature_layers))
    if self.feature_layers:
      features = layer_features(enc, self.feature_layers, self.frozen_encoder)[:, 0]
    else:
      features = (jax.lax.stop_gradient(enc.pooled_output) if self.frozen_encoder
                  else enc.pooled_output)
    logits = LinearHead(self.config, self.num_labels, self.dropout_rate, name="classifier")(
        features, deterministic)
    return ClassifierOutput(logits=logits, hidden_states=enc.hidden_states)


class BertForTokenClassification(nn.Module):
  """Every token -> C logits (tagging, e.g. NER); `feature_layers`/`frozen_encoder` as above."""
  config: BertConfig
  num_labels: int
  dropout_rate: float | None = None
  feature_layers: tuple[int, ...] = ()
  frozen_encoder: bool = False

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False):
    enc = BertModel(self.config, add_pooling_layer=False, name="bert")(
        input_ids, token_type_ids, attention_mask, deterministic=deterministic,
        output_hidden_states=output_hidden_states or bool(self.feature_layers))
    if self.feature_layers:
      features = layer_features(enc, self.feature_layers, self.frozen_encoder)
    else:
      features = (jax.lax.stop_gradient(enc.sequence_output) if self.frozen_encoder
                  else enc.sequence_output)
    logits = LinearHead(self.config, self.num_labels, self.dropout_rate, name="classifier")(
        features, deterministic)
    return ClassifierOutput(logits=logits, hidden_states=enc.hidden_states)


class BertForQuestionAnswering(nn.Module):
  """Every token -> start and end logits (extractive QA, SQuAD)."""
  config: BertConfig

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False):
    enc = BertModel(self.config, add_pooling_layer=False, name="bert")(
        input_ids, token_type_ids, attention_mask, deterministic=deterministic,
        output_hidden_states=output_hidden_states)
    logits = LinearHead(self.config, 2, dropout_rate=0.0, name="qa_outputs")(
        enc.sequence_output, deterministic)  # [B, T, 2]
    return SpanOutput(start_logits=logits[..., 0], end_logits=logits[..., 1],
                      hidden_states=enc.hidden_states)


class BertForMultipleChoice(nn.Module):
  """[B, C, T] choices -> [B, C] logits: each choice's pooled output scored by one linear."""
  config: BertConfig
  dropout_rate: float | None = None

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False):
    batch, choices, length = input_ids.shape
    flat = lambda x: None if x is None else x.reshape(batch * choices, length)  # noqa: E731
    enc = BertModel(self.config, name="bert")(
        flat(input_ids), flat(token_type_ids), flat(attention_mask),
        deterministic=deterministic, output_hidden_states=output_hidden_states)
    scores = LinearHead(self.config, 1, self.dropout_rate, name="classifier")(
        enc.pooled_output, deterministic)  # [B*C, 1]
    return ClassifierOutput(logits=scores.reshape(batch, choices),
                            hidden_states=enc.hidden_states)
