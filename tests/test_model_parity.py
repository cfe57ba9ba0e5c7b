"""Numerical parity with HF transformers' BERT (the reference implementation).

Random-weight BertForPreTraining models of odd shapes are converted both ways; sequence,
pooled, MLM and NSP outputs must agree within 1e-5 (fp32) on padded batches.
"""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import hf, load_params  # noqa: E402
from bert_jax.models.config import BertConfig  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402
from tests.helpers.hf_reference import hf_state, padded_batch, random_hf_model  # noqa: E402

ODD_SHAPES = [
    BertConfig(vocab_size=97, hidden_size=48, num_hidden_layers=3, num_attention_heads=3,
               intermediate_size=80, max_position_embeddings=40, type_vocab_size=3),
    BertConfig(vocab_size=61, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
               intermediate_size=64, max_position_embeddings=24, hidden_act="gelu_tanh"),
]
TOL = 1e-5


def _hf_outputs(model, ids, types, mask):
  with torch.no_grad():
    out = model(input_ids=torch.tensor(ids, dtype=torch.long),
                token_type_ids=torch.tensor(types, dtype=torch.long),
                attention_mask=torch.tensor(mask, dtype=torch.long), output_hidden_states=True)
  return out


def _assert_close(ours, theirs, mask=None, name=""):
  ours, theirs = np.asarray(ours), np.asarray(theirs)
  assert ours.shape == theirs.shape, name
  diff = np.abs(ours - theirs)
  if mask is not None:
    diff = diff * mask.reshape(mask.shape + (1,) * (diff.ndim - mask.ndim))
  assert diff.max() < TOL, f"{name}: max abs diff {diff.max():.2e}"


@pytest.mark.parametrize("config", ODD_SHAPES, ids=["h48_l3_v97", "h32_l1_tanh"])
def test_hf_to_ours_parity(config):
  hf_model = random_hf_model(config, seed=0)
  params, with_heads = hf.state_to_params(hf.normalize_names(hf_state(hf_model), "t"),
                                          config, "t")
  assert with_heads
  ids, types, mask = padded_batch(config.vocab_size, [11, 5, 1], 11, seed=1,
                                  type_vocab=config.type_vocab_size)
  ref = _hf_outputs(hf_model, ids, types, mask)
  model = BertForPreTraining(config)
  out = model.apply({"params": params}, ids, types, mask, output_hidden_states=True)
  _assert_close(out.sequence_output, ref.hidden_states[-1], mask, "sequence_output")
  with torch.no_grad():
    pooled_ref = hf_model.bert.pooler(ref.hidden_states[-1])
  _assert_close(out.pooled_output, pooled_ref, name="pooled_output")
  _assert_close(out.mlm_logits, ref.prediction_logits, mask, "mlm_logits")
  _assert_close(out.sentence_logits["nsp"], ref.seq_relationship_logits, name="nsp_logits")
  assert len(out.hidden_states) == config.num_hidden_layers + 1
  for i, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states)):
    _assert_close(a, b, mask, f"hidden_states[{i}]")

  # Sparse MLM logits at given positions equal the dense ones gathered there.
  positions = np.array([[0, 3, 10], [1, 2, 4], [0, 0, 0]], np.int32)
  sparse = model.apply({"params": params}, ids, types, mask, positions).mlm_logits
  dense = np.asarray(out.mlm_logits)
  np.testing.assert_allclose(sparse, np.take_along_axis(dense, positions[..., None], 1),
                             atol=TOL)


@pytest.mark.parametrize("config", ODD_SHAPES[:1], ids=["h48_l3_v97"])
def test_ours_to_hf_parity_and_round_trip(config, tmp_path):
  import jax
  from flax import linen as nn
  model = BertForPreTraining(config)
  ids, types, mask = padded_batch(config.vocab_size, [9, 4], 9, seed=2,
                                  type_vocab=config.type_vocab_size)
  params = jax.tree.map(np.asarray, nn.unbox(model.init(jax.random.key(3), ids)["params"]))
  hf.save(str(tmp_path), config, params)
  hf_model, info = transformers.BertForPreTraining.from_pretrained(
      str(tmp_path), output_loading_info=True, attn_implementation="eager")
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  hf_model.eval()
  ref = _hf_outputs(hf_model, ids, types, mask)
  out = model.apply({"params": params}, ids, types, mask)
  _assert_close(out.sequence_output, ref.hidden_states[-1], mask, "sequence_output")
  _assert_close(out.mlm_logits, ref.prediction_logits, mask, "mlm_logits")
  _assert_close(out.sentence_logits["nsp"], ref.seq_relationship_logits, name="nsp_logits")
  # BertModel.from_pretrained on the same folder: the encoder loads with nothing missing.
  _, info = transformers.BertModel.from_pretrained(str(tmp_path), output_loading_info=True)
  assert not info["missing_keys"], info
  # ours -> HF -> ours is bit-identical.
  _, back, _ = load_params(str(tmp_path))
  flat_a, flat_b = hf.mapping.flatten(params), hf.mapping.flatten(back)
  assert flat_a.keys() == flat_b.keys()
  for k in flat_a:
    np.testing.assert_array_equal(flat_a[k], flat_b[k], err_msg=k)
