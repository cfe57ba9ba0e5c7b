"""Headed models: `BertModel` composed with one head each (no head switch in the encoder).

Every model works with the encoder of any family (`config.family`): the pretraining
model takes the family's default sentence heads and pooler; the sequence-level headed
models (classification, multiple choice) give the encoder a pooler, which is freshly
initialised when the checkpoint has none (RoBERTa's MLM checkpoints, DistilBERT), as HF's
RoBERTa/DistilBERT classifiers start their dense layer afresh. A family with a prediction head
(`Family.prediction_head`: ModernBERT's dense + act + norm, named `head`) gets none: every
fine-tuning model reads its features through that head (the [CLS] row or the mean for
sentence tasks, every token for tagging and QA) before the linear classifier.

ELECTRA's discriminator and its generator + discriminator pretraining model are in
models/electra.py. `models/specs.py` names every headed model (`HEADED_MODELS`) and builds one
from a spec such as {"headed_model": "sequence_classification", "num_labels": 2}.

Every model takes `(input_ids, token_type_ids=None, attention_mask=None, ...)` int [B, T]
(multiple choice: [B, C, T]) plus `deterministic` (False turns dropout on; pass an rng
named "dropout") and `output_hidden_states`, and returns a flax.struct output object. The
encoder, pretraining and fine-tuning models also take ERNIE's `task_type_ids` (same shape;
None: task 0, as HF's default).
Param trees: `bert` (the encoder) next to the head's name, so an encoder checkpoint
drops into any of them.
"""
from typing import Optional

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from bert_jax.models.config import BertConfig
from bert_jax.models.bert import BertModel
from bert_jax.models.families import family_of
from bert_jax.models.features import (POOLINGS, SENTENCE_FEATURE_HEADS,
                                      TOKEN_FEATURE_HEADS, check_cached, check_choice,
                                      classifier_pooler, example_members, layer_features,
                                      prediction_head)
from bert_jax.models.heads import MLM_HEADS, LinearHead, NextSentenceHead, SpanBoundaryHead


@flax.struct.dataclass
class PreTrainingOutput:
  """What `BertForPreTraining` returns.

  sequence_output: [B, T, H] the encoder's last layer.
  mlm_logits: [B, P, V] at the masked positions, or [B, T, V] when none were given.

  sentence_logits: {head name: [B, 2]} for each sentence-level head (e.g. "nsp"); packed
    rows: [B, K, 2], one per example's [CLS].
  pooled_output: [B, H], or None when the encoder has no pooler (RoBERTa, DistilBERT).
  span_logits: [B, P, V] from the span boundary head (SpanBERT's SBO), when it is on.
  hidden_states: the encoder's (`EncoderOutput.hidden_states`), when asked for.
  """
  sequence_output: jax.Array
  pooled_output: Optional[jax.Array]
  mlm_logits: jax.Array
  sentence_logits: dict[str, jax.Array]
  hidden_states: Optional[tuple[jax.Array, ...]] = None
  span_logits: Optional[jax.Array] = None


@flax.struct.dataclass
class ClassifierOutput:
  """What the classifiers return (sequence, token, multiple choice, replaced tokens).

  logits: [B, C] (sequence, C=1 for regression), [B, T, C] (tokens), [B, C] (choices),
    [B, T] (replaced-token detection: one logit per token).
  hidden_states: the encoder's (`EncoderOutput.hidden_states`), when asked for.
  """
  logits: jax.Array
  hidden_states: Optional[tuple[jax.Array, ...]] = None


@flax.struct.dataclass
class SpanOutput:
  """What `BertForQuestionAnswering` returns.

  start_logits: [B, T] each token's score as the answer's first token.
  end_logits: [B, T] each token's score as the answer's last token.
  hidden_states: the encoder's (`EncoderOutput.hidden_states`), when asked for.
  """
  start_logits: jax.Array  # [B, T]
  end_logits: jax.Array  # [B, T]
  hidden_states: Optional[tuple[jax.Array, ...]] = None


class BertForPreTraining(nn.Module):
  """Masked LM (decoder tied to the word embeddings) + sentence-level heads.

  sentence_heads: one 2-way classifier on the pooled output per name, params `<name>_head`
  ("nsp": next-sentence prediction, BERT's; none for MLM-only pretraining); None: the
  family's default (BERT: ("nsp",); RoBERTa, DistilBERT: none). The encoder has a pooler
  when a sentence head reads it or the family's pretraining model has one (BERT's).
  span_boundary_head: SpanBERT's SBO head, params `sbo_head`, on `masked_lm_spans` =
  (left, right, offset) int [B, P] each (the span fields of pretrain/masking.py).

  Returns a `PreTrainingOutput`:

  ```python
  import jax
  import jax.numpy as jnp
  from bert_jax import config_for_size
  from bert_jax.models.headed import BertForPreTraining

  model = BertForPreTraining(config_for_size("tiny", vocab_size=100))
  input_ids = jnp.ones((2, 8), jnp.int32)
  masked = jnp.array([[1, 4], [2, 5]])  # the masked tokens' positions, [B, P]
  variables = model.init(jax.random.key(0), input_ids)
  out = model.apply(variables, input_ids, masked_lm_positions=masked)
  assert out.mlm_logits.shape == (2, 2, 100)  # [B, P, V]
  assert out.sentence_logits["nsp"].shape == (2, 2)  # BERT's next-sentence head
  ```
  """
  config: BertConfig
  sentence_heads: Optional[tuple[str, ...]] = None
  span_boundary_head: bool = False

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None,
               masked_lm_positions=None, *, masked_lm_spans=None, deterministic: bool = True,
               output_hidden_states: bool = False, packing=None,
               task_type_ids=None) -> PreTrainingOutput:
    """The MLM logits at the masked positions and each sentence head's logits.

    input_ids, token_type_ids, attention_mask: int [B, T], as `BertModel.__call__`'s.
    deterministic: True turns dropout off; False needs an rng named "dropout".
    output_hidden_states: also return every layer's output (`hidden_states`).
    task_type_ids: ERNIE's int [B, T] task ids (None: 0s).
    masked_lm_positions: int [B, P], the positions the MLM head scores; None: every token.
    masked_lm_spans: (left, right, offset) int [B, P] each, for the span boundary head.
    packing: packed rows' {"segment_ids", "positions"} int [B, T] (see BertModel):
    several examples per row, each token's outputs equal to its example's unpacked ones;
    with "cls_positions" int [B, K] (packed pairs) the sentence heads read each example's
    [CLS]: sentence_logits [B, K, 2]."""
    family = family_of(self.config)
    heads = family.sentence_heads if self.sentence_heads is None else self.sentence_heads
    if packing is not None and heads and "cls_positions" not in packing:
      raise ValueError(f"packed rows (config.data.packing) have several [CLS]; the sentence "
                       f"heads {tuple(heads)} need their cls_positions")
    bert = BertModel(self.config, add_pooling_layer=bool(heads) or family.pretraining_pooler,
                     name="bert")
    enc = bert(input_ids, token_type_ids, attention_mask, deterministic=deterministic,
               output_hidden_states=output_hidden_states, packing=packing,
               task_type_ids=task_type_ids)
    mlm_logits = MLM_HEADS[family.mlm_head](self.config, name="mlm_head")(
        enc.sequence_output, bert.word_embedding_table(), masked_lm_positions)
    sentence_logits = {name: NextSentenceHead(self.config, name=f"{name}_head")(
        enc.pooled_output) for name in heads}
    span_logits = None
    if self.span_boundary_head:
      if masked_lm_spans is None:  # init: the head's params from a dummy span
        masked_lm_spans = (jnp.zeros(input_ids.shape[:1] + (1,), jnp.int32),) * 3
      span_logits = SpanBoundaryHead(self.config, name="sbo_head")(
          enc.sequence_output, bert.word_embedding_table(), *masked_lm_spans)
    return PreTrainingOutput(
        sequence_output=enc.sequence_output, pooled_output=enc.pooled_output,
        mlm_logits=mlm_logits, sentence_logits=sentence_logits,
        hidden_states=enc.hidden_states, span_logits=span_logits)


class BertForSequenceClassification(nn.Module):
  """[CLS] -> C logits (single sentence or pair; C=1 is regression).

  Fine-tuning reads the sentence vector `pooling` names (POOLINGS: BERT's pooled output,
  or the mean of the last layer over the real tokens). With `feature_layers` (e.g.
  (-4, -3, -2, -1)) the head reads those layers instead, combined as `feature_mix` names
  (FEATURE_MIXES: concatenated, or ELMo's scalar mix), through `feature_head`
  (SENTENCE_FEATURE_HEADS: their [CLS] vector, or a BiLSTM over the tokens);
  `frozen_encoder` stops gradients into the encoder (the feature-based comparison of the
  BERT paper). `problem_type`: what the logits stand for, in HF's config.problem_type terms
  (single_label_classification, multi_label_classification, regression; "" unsaid): the
  HF export writes it (weights/hf.py), the computation does not read it.

  Returns a `ClassifierOutput`, logits [B, C]:

  ```python
  import jax
  import jax.numpy as jnp
  from bert_jax import config_for_size
  from bert_jax.models.headed import BertForSequenceClassification

  model = BertForSequenceClassification(config_for_size("tiny", vocab_size=100), num_labels=3)
  input_ids = jnp.ones((2, 8), jnp.int32)
  variables = model.init(jax.random.key(0), input_ids)
  logits = model.apply(variables, input_ids).logits
  assert logits.shape == (2, 3)  # [B, C]
  ```
  """
  config: BertConfig
  num_labels: int
  dropout_rate: float | None = None
  feature_layers: tuple[int, ...] = ()
  frozen_encoder: bool = False
  pooling: str = "pooler"
  feature_mix: str = "concat"
  feature_head: str = "linear"
  problem_type: str = ""

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False, packing=None,
               task_type_ids=None, cached_layers=None):
    """One row of C logits per input row.

    input_ids, token_type_ids, attention_mask: int [B, T], as `BertModel.__call__`'s.
    deterministic: True turns dropout off; False needs an rng named "dropout".
    output_hidden_states: also return every layer's output (`hidden_states`).
    task_type_ids: ERNIE's int [B, T] task ids (None: 0s).
    packing: a packed batch's arrays (see BertModel); logits are then [B, K, C], one
    row per packed example. cached_layers: [B, T, K, H], the feature_layers as a frozen
    encoder gave them before training (finetune/feature_cache.py): the encoder is not run
    (hidden_states None)."""
    check_choice(POOLINGS, "classifier_pooling", self.pooling)
    check_cached(cached_layers, self.feature_layers)
    enc = None if cached_layers is not None else BertModel(
        self.config, add_pooling_layer=classifier_pooler(self.config, self.pooling),
        name="bert")(
        input_ids, token_type_ids, attention_mask, deterministic=deterministic,
        output_hidden_states=output_hidden_states or bool(self.feature_layers),
        packing=packing, task_type_ids=task_type_ids)
    if self.feature_layers:
      check_choice(SENTENCE_FEATURE_HEADS, "feature_head", self.feature_head)
      tokens = layer_features(enc, self.feature_layers, self.frozen_encoder, self.feature_mix,
                              cached_layers)
      features = SENTENCE_FEATURE_HEADS[self.feature_head](self.config, tokens, attention_mask,
                                                           packing)
    else:
      features = POOLINGS[self.pooling](enc, attention_mask, packing)
      features = jax.lax.stop_gradient(features) if self.frozen_encoder else features
    features = prediction_head(self.config)(features)
    logits = LinearHead(self.config, self.num_labels, self.dropout_rate, name="classifier")(
        features, deterministic)
    return ClassifierOutput(logits=logits, hidden_states=None if enc is None else enc.hidden_states)


def prompt_vectors(enc, input_ids, mask_token_id: int, packing=None) -> jax.Array:
  """Each example's last-layer vector at its prompt's mask token (one per example, which
  the featurizer checks): [B, H], or [B, K, H] for a packed batch (the mask in each
  example's segment, read at its [CLS])."""
  hidden = enc.sequence_output  # [B, T, H]
  members = example_members(input_ids == mask_token_id, packing)
  vectors = jnp.einsum("bkt,bth->bkh", members.astype(hidden.dtype), hidden)
  return vectors[:, 0] if packing is None else vectors


class BertForPromptClassification(nn.Module):
  """Prompt-based fine-tuning (PET, Schick & Schutze 2021; LM-BFF, Gao et al. 2021): each
  input carries a template with one mask token ("... it was <mask> ."), and the class
  logits are the MLM head's logits there for one verbalizer token per class
  (`label_token_ids`, e.g. " terrible", " great"). No new params: `bert` and `mlm_head`
  are a pretraining checkpoint's, so fine-tuning starts from what the MLM head learned.
  logits [B, C], or [B, K, C] for a packed batch. `masked_lm` gives the whole vocabulary's
  logits at given positions (what fill_mask shows).
  """
  config: BertConfig
  label_token_ids: tuple[int, ...]
  mask_token_id: int

  def setup(self):
    self.bert = BertModel(self.config, add_pooling_layer=False)
    self.mlm_head = MLM_HEADS[family_of(self.config).mlm_head](self.config)

  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False, packing=None):
    enc = self.bert(input_ids, token_type_ids, attention_mask, deterministic=deterministic,
                    output_hidden_states=output_hidden_states, packing=packing)
    vectors = prompt_vectors(enc, input_ids, self.mask_token_id, packing)
    squeeze = vectors.ndim == 2
    vectors = vectors[:, None] if squeeze else vectors  # [B, K, H]
    mlm_logits = self.mlm_head(vectors, self.bert.word_embedding_table())  # [B, K, V]
    logits = jnp.take(mlm_logits, jnp.asarray(self.label_token_ids), axis=-1)  # [B, K, C]
    return ClassifierOutput(logits=logits[:, 0] if squeeze else logits,
                            hidden_states=enc.hidden_states)

  def masked_lm(self, input_ids, token_type_ids=None, attention_mask=None,
                masked_lm_positions=None):
    """[B, P, V] MLM logits at masked_lm_positions [B, P] (every position when None)."""
    enc = self.bert(input_ids, token_type_ids, attention_mask)
    return self.mlm_head(enc.sequence_output, self.bert.word_embedding_table(),
                         masked_lm_positions)


class BertForTokenClassification(nn.Module):
  """Every token -> C logits (tagging, e.g. NER); `feature_layers`, `feature_mix` and
  `frozen_encoder` as above; `feature_head` (TOKEN_FEATURE_HEADS): the linear classifier
  on the features, or on a two-layer BiLSTM over them.

  Returns a `ClassifierOutput`, logits [B, T, C]:

  ```python
  import jax
  import jax.numpy as jnp
  from bert_jax import config_for_size
  from bert_jax.models.headed import BertForTokenClassification

  model = BertForTokenClassification(config_for_size("tiny", vocab_size=100), num_labels=5)
  input_ids = jnp.ones((2, 8), jnp.int32)
  variables = model.init(jax.random.key(0), input_ids)
  assert model.apply(variables, input_ids).logits.shape == (2, 8, 5)  # [B, T, C]
  ```
  """
  config: BertConfig
  num_labels: int
  dropout_rate: float | None = None
  feature_layers: tuple[int, ...] = ()
  frozen_encoder: bool = False
  feature_mix: str = "concat"
  feature_head: str = "linear"

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False, packing=None,
               task_type_ids=None, cached_layers=None):
    """C logits for every token.

    input_ids, token_type_ids, attention_mask: int [B, T], as `BertModel.__call__`'s.
    deterministic: True turns dropout off; False needs an rng named "dropout".
    output_hidden_states: also return every layer's output (`hidden_states`).
    task_type_ids: ERNIE's int [B, T] task ids (None: 0s).
    packing: a packed batch's arrays (see BertModel); logits stay [B, T, C], each
    token's equal to its unpacked one. cached_layers: as BertForSequenceClassification's."""
    check_cached(cached_layers, self.feature_layers)
    enc = None if cached_layers is not None else BertModel(
        self.config, add_pooling_layer=False, name="bert")(
        input_ids, token_type_ids, attention_mask, deterministic=deterministic,
        output_hidden_states=output_hidden_states or bool(self.feature_layers),
        packing=packing, task_type_ids=task_type_ids)
    if self.feature_layers:
      check_choice(TOKEN_FEATURE_HEADS, "feature_head", self.feature_head)
      tokens = layer_features(enc, self.feature_layers, self.frozen_encoder, self.feature_mix,
                              cached_layers)
      features = TOKEN_FEATURE_HEADS[self.feature_head](self.config, tokens, attention_mask,
                                                        packing)
    else:
      features = (jax.lax.stop_gradient(enc.sequence_output) if self.frozen_encoder
                  else enc.sequence_output)
    features = prediction_head(self.config)(features)
    logits = LinearHead(self.config, self.num_labels, self.dropout_rate, name="classifier")(
        features, deterministic)
    return ClassifierOutput(logits=logits, hidden_states=None if enc is None else enc.hidden_states)


class BertForQuestionAnswering(nn.Module):
  """Every token -> start and end logits (extractive QA, SQuAD).

  Returns a `SpanOutput`; the answer is the span from the best start to the best end:

  ```python
  import jax
  import jax.numpy as jnp
  from bert_jax import config_for_size
  from bert_jax.models.headed import BertForQuestionAnswering

  model = BertForQuestionAnswering(config_for_size("tiny", vocab_size=100))
  input_ids = jnp.ones((2, 8), jnp.int32)  # question [SEP] context, as one pair
  variables = model.init(jax.random.key(0), input_ids)
  out = model.apply(variables, input_ids)
  assert out.start_logits.shape == out.end_logits.shape == (2, 8)  # [B, T]
  ```
  """
  config: BertConfig

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False,
               task_type_ids=None):
    """Start and end logits for every token.

    input_ids, token_type_ids, attention_mask: int [B, T], as `BertModel.__call__`'s.
    deterministic: True turns dropout off; False needs an rng named "dropout".
    output_hidden_states: also return every layer's output (`hidden_states`).
    task_type_ids: ERNIE's int [B, T] task ids (None: 0s).
    """
    enc = BertModel(self.config, add_pooling_layer=False, name="bert")(
        input_ids, token_type_ids, attention_mask, deterministic=deterministic,
        output_hidden_states=output_hidden_states, task_type_ids=task_type_ids)
    logits = LinearHead(self.config, 2, dropout_rate=0.0, name="qa_outputs")(
        prediction_head(self.config)(enc.sequence_output), deterministic)  # [B, T, 2]
    return SpanOutput(start_logits=logits[..., 0], end_logits=logits[..., 1],
                      hidden_states=enc.hidden_states)


class BertForMultipleChoice(nn.Module):
  """[B, C, T] choices -> [B, C] logits: each choice's pooled output scored by one linear.

  Returns a `ClassifierOutput`, logits [B, C]:

  ```python
  import jax
  import jax.numpy as jnp
  from bert_jax import config_for_size
  from bert_jax.models.headed import BertForMultipleChoice

  model = BertForMultipleChoice(config_for_size("tiny", vocab_size=100))
  input_ids = jnp.ones((2, 4, 8), jnp.int32)  # 4 choices of 8 tokens per example
  variables = model.init(jax.random.key(0), input_ids)
  assert model.apply(variables, input_ids).logits.shape == (2, 4)  # [B, C]
  ```
  """
  config: BertConfig
  dropout_rate: float | None = None

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False,
               task_type_ids=None):
    """One logit per choice.

    input_ids, token_type_ids, attention_mask: int [B, C, T], one row per choice.
    deterministic: True turns dropout off; False needs an rng named "dropout".
    output_hidden_states: also return every layer's output, for the B * C rows.
    task_type_ids: ERNIE's int [B, C, T] task ids (None: 0s).
    """
    batch, choices, length = input_ids.shape
    flat = lambda x: None if x is None else x.reshape(batch * choices, length)  # noqa: E731
    enc = BertModel(self.config, add_pooling_layer=classifier_pooler(self.config, "pooler"),
                    name="bert")(
        flat(input_ids), flat(token_type_ids), flat(attention_mask),
        deterministic=deterministic, output_hidden_states=output_hidden_states,
        task_type_ids=flat(task_type_ids))
    features = prediction_head(self.config)(POOLINGS["pooler"](enc, None, None))  # [B*C, H]
    scores = LinearHead(self.config, 1, self.dropout_rate, name="classifier")(
        features, deterministic)  # [B*C, 1]
    return ClassifierOutput(logits=scores.reshape(batch, choices),
                            hidden_states=enc.hidden_states)
