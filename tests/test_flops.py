"""bert_jax.core.flops agrees with XLA's cost analysis of the compiled forward pass, per family."""
import jax
import jax.numpy as jnp
import pytest
from flax import linen as nn

from bert_jax.core import flops
from bert_jax.models.bert import BertModel
from bert_jax.models.config import config_for_size

BATCH, SEQ = 2, 64


def _compiled_forward_flops(config):
  model = BertModel(config)
  ids = jnp.ones((BATCH, SEQ), jnp.int32)
  params = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), ids)))
  analysis = jax.jit(lambda p, x: model.apply(p, x).sequence_output).lower(
      params, ids).compile().cost_analysis()
  return (analysis[0] if isinstance(analysis, (list, tuple)) else analysis)["flops"]


@pytest.mark.parametrize("size", ["tiny", "albert-tiny", "electra-tiny", "modernbert-tiny",
                                  "distilbert-tiny"])
def test_analytic_forward_flops_match_the_compiled_count(size):
  config = config_for_size(size, vocab_size=512)
  analytic = flops.encoder_forward_flops(config, BATCH, SEQ)
  compiled = _compiled_forward_flops(config)
  # XLA also counts softmax, LayerNorm, activations and the mask: a few % more, never less.
  assert 1.0 <= compiled / analytic < 1.15, (size, compiled, analytic)


def test_local_layers_count_their_window_and_geglu_its_wider_input():
  config = config_for_size("modernbert-tiny", vocab_size=512, local_attention=32,
                           global_attn_every_n_layers=3)  # layer 0 global, 1 and 2 local
  seq, h, i = 128, config.hidden_size, config.intermediate_size
  all_global = config.replace(global_attn_every_n_layers=1)
  saved = (flops.encoder_forward_flops(all_global, 1, seq)
           - flops.encoder_forward_flops(config, 1, seq))
  assert saved == 2 * seq * 2 * 2 * (seq - 33) * h  # 2 local layers, 33 keys instead of 128
  bert_like = config_for_size("tiny", hidden_size=h, intermediate_size=i, vocab_size=512,
                              num_hidden_layers=3, num_attention_heads=2)
  difference = (flops.encoder_forward_flops(all_global, 1, seq)
                - flops.encoder_forward_flops(bert_like, 1, seq))
  assert difference == 3 * seq * 2 * h * i  # one more H x I matrix per layer
