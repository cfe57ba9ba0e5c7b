"""ELECTRA's models: the discriminator (`BertForReplacedTokenDetection`) and the pretraining
model that pairs it with a small MLM generator sharing its embeddings (`ElectraForPreTraining`).

Both take `(input_ids, token_type_ids=None, attention_mask=None, *, deterministic=True,
output_hidden_states=False)` int [B, T] and return `headed.ClassifierOutput` (logits [B, T]:
that each token was replaced). Fine-tuning starts from the discriminator
(`ElectraForPreTraining.transfer_part`); pretrain/electra.py samples the generator's
replacements and scores both. `models/specs.py` builds them by name ("replaced_token_detection",
"electra_pretraining").

    config = BertConfig(family="electra", hidden_size=256, embedding_size=128,
                        num_attention_heads=4)
    model = ElectraForPreTraining(config, generator_fraction=0.25)
    variables = model.init(jax.random.PRNGKey(0), ids)  # ids int [B, T]; params:
                                                        # discriminator, generator
    out = model.apply(variables, ids, masked_lm_positions=positions, method="generate")
"""
import flax.linen as nn
import jax.numpy as jnp

from bert_jax.models.bert import BertModel
from bert_jax.models.config import BertConfig, generator_config
from bert_jax.models.headed import BertForPreTraining, ClassifierOutput
from bert_jax.models.heads import ReplacedTokenHead


class BertForReplacedTokenDetection(nn.Module):
  """ELECTRA's discriminator (HF ElectraForPreTraining): every token -> the logit that it
  was replaced, `rtd_head` on the encoder (no pooler: ELECTRA's has none).

  Its generator is `BertForPreTraining` of a smaller config of the same family
  (`config.generator_config`); the two share their embeddings in ELECTRA's pretraining
  model, `ElectraForPreTraining` below.
  """
  config: BertConfig

  @nn.compact
  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False):
    enc = BertModel(self.config, add_pooling_layer=False, name="bert")(
        input_ids, token_type_ids, attention_mask, deterministic=deterministic,
        output_hidden_states=output_hidden_states)
    logits = ReplacedTokenHead(self.config, name="rtd_head")(enc.sequence_output)  # [B, T]
    return ClassifierOutput(logits=logits, hidden_states=enc.hidden_states)


# ---------------------------------------------------- ELECTRA's generator + discriminator
SHARED_EMBEDDINGS = ("word_embeddings", "position_embeddings", "token_type_embeddings",
                     "layer_norm")


def _without_shared(params: dict) -> dict:
  """The generator's params less the shared embeddings (its projection stays, if any)."""
  own = {k: v for k, v in params["bert"]["embeddings"].items() if k not in SHARED_EMBEDDINGS}
  encoder = {k: v for k, v in params["bert"].items() if k != "embeddings"}
  return {**params, "bert": {**encoder, **({"embeddings": own} if own else {})}}


def _with_shared(params: dict, shared: dict) -> dict:
  embeddings = {**params["bert"].get("embeddings", {}),
                **{k: v for k, v in shared.items() if k in SHARED_EMBEDDINGS}}
  return {**params, "bert": {**params["bert"], "embeddings": embeddings}}


class ElectraForPreTraining(nn.Module):
  """ELECTRA's pretraining model: a small MLM generator beside the discriminator, sharing
  the embeddings as google-research/electra does (one "electra/embeddings" scope): the
  word, position and segment tables and the embeddings' LayerNorm. Each keeps its own
  E -> H projection (the generator is narrower), encoder and head.

  Params: `discriminator` (BertForReplacedTokenDetection, the shared tables under
  bert/embeddings) and `generator` (BertForPreTraining of `generator_config(config,
  generator_fraction)` less the shared tables, read from the discriminator's; its MLM
  decoder is tied to the shared word table).

    model.apply(v, ids, types, mask, positions, method="generate")  -> PreTrainingOutput
    model.apply(v, ids, types, mask, method="discriminate")         -> ClassifierOutput
    model.apply(v, ids, types, mask)                                -> the discriminator's

  Sampling the generator's replacements is the pretraining task's (pretrain/electra.py).

  config: the discriminator's. generator_fraction: the generator's H, I and heads as a
  share of the discriminator's (ELECTRA: 1/4 Small and Large, 1/3 Base).
  """
  config: BertConfig
  generator_fraction: float = 0.25
  transfer_part = "discriminator"  # what fine-tuning starts from (weights.init_params)

  def setup(self):
    self.discriminator = BertForReplacedTokenDetection(self.config)
    self.generator = self.param("generator", self._init_generator)

  def _generator_model(self) -> BertForPreTraining:
    """The generator as an unbound module, applied to the params it is given."""
    return BertForPreTraining(generator_config(self.config, self.generator_fraction),
                              sentence_heads=(), parent=None)

  def _init_generator(self, rng) -> dict:
    """The generator's own params: its module's initialisation less the shared ones,
    traced on one [1, 1] row through einsum attention (the params do not depend on the
    attention path, and splash refuses rows that are not multiples of 128 tokens)."""
    config = generator_config(self.config, self.generator_fraction)
    model = BertForPreTraining(config.replace(attention_impl="einsum"), sentence_heads=(),
                               parent=None)
    params = model.init(rng, jnp.zeros((1, 1), jnp.int32))["params"]
    return _without_shared(params)

  def discriminate(self, input_ids, token_type_ids=None, attention_mask=None, *,
                   deterministic: bool = True, output_hidden_states: bool = False):
    return self.discriminator(input_ids, token_type_ids, attention_mask,
                              deterministic=deterministic,
                              output_hidden_states=output_hidden_states)

  def generate(self, input_ids, token_type_ids=None, attention_mask=None,
               masked_lm_positions=None, *, deterministic: bool = True):
    """The generator's outputs (mlm_logits [B, P, V] at masked_lm_positions) with the
    discriminator's shared embeddings."""
    if self.is_initializing() and not self.discriminator.has_variable("params", "bert"):
      self.discriminate(input_ids, token_type_ids, attention_mask)  # create the tables
    shared = self.discriminator.variables["params"]["bert"]["embeddings"]
    rngs = None if deterministic else {"dropout": self.make_rng("dropout")}
    return self._generator_model().apply(
        {"params": _with_shared(self.generator, shared)}, input_ids, token_type_ids,
        attention_mask, masked_lm_positions, deterministic=deterministic, rngs=rngs)

  def __call__(self, input_ids, token_type_ids=None, attention_mask=None, *,
               deterministic: bool = True, output_hidden_states: bool = False):
    """The discriminator's outputs (at init, the generator's params are made too)."""
    outputs = self.discriminate(input_ids, token_type_ids, attention_mask,
                                deterministic=deterministic,
                                output_hidden_states=output_hidden_states)
    if self.is_initializing():
      self.generate(input_ids, token_type_ids, attention_mask)
    return outputs
