"""ModernBERT: a family of the one model code (models/modernbert.py), proven equal to HF's.

Random-weight models of odd shapes, a padded batch longer than the local window, at least
one global and one local layer (fp32): HF -> ours and ours -> HF, every hidden state and
the MLM logits within 1e-5; ours -> HF -> ours bit-identical; HF loads our folders with no
missing/unexpected keys; config.json both ways; ModernBertModel's parameter count at the
base size; every kernel's logical axes covered by the sharding rules; `embed` on an HF
folder; a tiny model fine-tunes through the trainer.
"""
import json
import os

import jax
import numpy as np
import pytest
from flax import linen as nn

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import checkpoint  # noqa: E402
from bert_jax.core import optim  # noqa: E402
from bert_jax.run import sharding  # noqa: E402
from bert_jax.run import init_chain  # noqa: E402
from bert_jax.weights import hf_families, hf, mapping  # noqa: E402
from bert_jax.models import layout, modernbert  # noqa: E402
from bert_jax.models.bert import BertModel  # noqa: E402
from bert_jax.models.config import BertConfig, config_for_size  # noqa: E402
from bert_jax.models.layers import attention_probs  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402
from bert_jax.models.specs import HEADED_MODELS  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402
from tests.helpers.hf_reference import (assert_parity, hf_forward,  # noqa: E402
                                        hf_param_count, hf_state, max_diff, our_param_count,
                                        random_batch, random_hf_model, TOL)

CONFIGS = {
    # The released models' structure (no biases): layers 0 and 2 global, layer 1 local with
    # a window of +-3 tokens (local_attention 7 // 2), the batch 11 long.
    "modernbert_h48_l3": BertConfig(
        family="modernbert", vocab_size=97, hidden_size=48, num_hidden_layers=3,
        num_attention_heads=3, intermediate_size=40, max_position_embeddings=64,
        type_vocab_size=0, layer_norm_eps=1e-5, pad_token_id=3, norm_bias=False,
        mlm_transform_bias=False, attention_bias=False, mlp_bias=False,
        global_rope_theta=1000.0, local_rope_theta=50.0, local_attention=7,
        global_attn_every_n_layers=2),
    # Every bias on, tanh GELU, layer 0 global and 1 local (window +-2).
    "modernbert_h32_l2_biases": BertConfig(
        family="modernbert", vocab_size=61, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=24, max_position_embeddings=64,
        type_vocab_size=0, layer_norm_eps=1e-5, pad_token_id=0, hidden_act="gelu_tanh",
        global_rope_theta=300.0, local_rope_theta=20.0, local_attention=4,
        global_attn_every_n_layers=2),
}
LENGTHS, MAX_LEN = [11, 6, 1], 11


def _random_hf(config, seed, cls_name):
  """HF model with O(1) pre-activations (exact vs tanh GELU differ by more than TOL) and
  perturbed norms and biases (so a swapped norm or bias shows)."""
  model = random_hf_model(config, seed=seed, cls_name=cls_name)
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith(("mlp.Wi.weight", "head.dense.weight")):
        p.mul_(30.0)
      if "norm" in name or name.endswith("bias"):
        p.add_(torch.randn_like(p) * 0.1)
  return model


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hf_to_ours_parity(name):
  config = CONFIGS[name]
  ids, types, mask = random_batch(config, LENGTHS, MAX_LEN, seed=1)
  hf_mlm = _random_hf(config, 0, "ModernBertForMaskedLM")
  state = hf.normalize_names(hf_state(hf_mlm), "t", "modernbert")
  params, with_heads = hf.state_to_params(state, config, "t")
  assert with_heads and "pooler" not in params["bert"]
  assert "attention_layer_norm" not in params["bert"]["encoder"]["layer_0"]
  ref = hf_forward(hf_mlm, config, ids, types, mask)
  model = BertForPreTraining(config)
  out = model.apply({"params": params}, ids, types, mask, output_hidden_states=True)
  assert out.sentence_logits == {} and out.pooled_output is None
  assert_parity(out, ref, config, mask, ref.logits)
  # The test can fail: all-global attention (no window) is far from HF's.
  no_window = BertForPreTraining(config.replace(global_attn_every_n_layers=1))
  wrong = no_window.apply({"params": params}, ids, types, mask)
  assert max_diff(wrong.mlm_logits, ref.logits, mask) > 10 * TOL

  hf_encoder = _random_hf(config, 4, "ModernBertModel")
  state = hf.normalize_names(hf_state(hf_encoder), "t", "modernbert")
  params, with_heads = hf.state_to_params(state, config, "t")
  assert not with_heads and "pooler" not in params
  ref = hf_forward(hf_encoder, config, ids, types, mask)
  out = BertModel(config).apply({"params": params}, ids, types, mask,
                                output_hidden_states=True)
  assert_parity(out, ref, config, mask)
  assert out.pooled_output is None


def test_window_is_hf_bidirectional_sliding_window():
  """|i - j| <= local_attention // 2, as HF's create_bidirectional_sliding_window_mask."""
  from transformers.masking_utils import sliding_window_bidirectional_overlay
  for local_attention in (4, 7):
    ours = np.asarray(modernbert.window_bias(9, local_attention))[0, 0] == 0
    allowed = sliding_window_bidirectional_overlay(local_attention // 2)
    theirs = [[bool(allowed(0, 0, i, j)) for j in range(9)] for i in range(9)]
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("remat_policy", ["none", "dots"])
def test_scanned_layers_equal_hf_and_the_unrolled_model(remat_policy):
  """scan_layers: layer_0 unrolled (no attention LayerNorm), layers 1-2 (one local, one
  global) stacked and scanned: every hidden state and the MLM logits within TOL of HF's,
  attention weights and gradients equal to the unrolled model's, layer-wise depths and
  re-initialising the top layer placed on the stacked axis."""
  config = CONFIGS["modernbert_h48_l3"]
  scan = config.replace(scan_layers=True, remat_policy=remat_policy)
  ids, types, mask = random_batch(config, LENGTHS, MAX_LEN, seed=1)
  hf_mlm = _random_hf(config, 0, "ModernBertForMaskedLM")
  params, _ = hf.state_to_params(hf.normalize_names(hf_state(hf_mlm), "t", "modernbert"),
                                 config, "t")
  stacked = layout.stack_layers(params, *layout.stacked_layout(scan))
  encoder = stacked["bert"]["encoder"]
  assert sorted(encoder) == ["final_layer_norm", "layer_0", "layers"]
  assert encoder["layers"]["layer"]["attention"]["qkv"]["kernel"].shape == (2, 48, 3, 3, 16)
  init = nn.unbox(BertForPreTraining(scan).init(jax.random.key(0), ids)["params"])
  assert jax.tree.map(np.shape, init) == jax.tree.map(np.shape, stacked)
  unstacked = layout.unstack_layers(stacked, *layout.stacked_layout(scan))
  assert jax.tree.all(jax.tree.map(np.array_equal, unstacked, params))

  ref = hf_forward(hf_mlm, config, ids, types, mask)
  out, state = BertForPreTraining(scan).apply(
      {"params": stacked}, ids, types, mask, output_hidden_states=True,
      mutable=["intermediates"])
  assert_parity(out, ref, config, mask, ref.logits)
  _, unrolled_state = BertForPreTraining(config).apply(
      {"params": params}, ids, types, mask, mutable=["intermediates"])
  probs = attention_probs(state["intermediates"], 3)
  assert len(probs) == 3
  for ours, theirs in zip(probs, attention_probs(unrolled_state["intermediates"], 3)):
    np.testing.assert_allclose(ours, theirs, atol=1e-6)

  def loss(cfg, p):
    return (BertForPreTraining(cfg).apply({"params": p}, ids, types, mask).mlm_logits ** 2).mean()
  grads = jax.grad(lambda p: loss(config, p))(params)
  scanned_grads = layout.unstack_layers(jax.grad(lambda p: loss(scan, p))(stacked),
                                        *layout.stacked_layout(scan))
  for path, a in mapping.flatten(grads).items():
    np.testing.assert_allclose(mapping.flatten(scanned_grads)[path], a, rtol=1e-4,
                               atol=1e-6, err_msg=path)

  num_layers, depths = optim.layer_depths(stacked)
  assert num_layers == 3 and depths["bert/encoder/layer_0/mlp/wo/kernel"] == 1
  np.testing.assert_array_equal(depths["bert/encoder/layers/layer/mlp/wo/kernel"], [2, 3])
  fresh = jax.tree.map(np.zeros_like, stacked)
  reinit, note = init_chain.reinit_top_layers(stacked, fresh, 1)
  assert note == "layer_2 of 3 from the fresh init"
  wo = reinit["bert"]["encoder"]["layers"]["layer"]["mlp"]["wo"]["kernel"]
  np.testing.assert_array_equal(wo[0], encoder["layers"]["layer"]["mlp"]["wo"]["kernel"][0])
  assert not np.any(wo[1])
  np.testing.assert_array_equal(reinit["bert"]["encoder"]["layer_0"]["mlp"]["wo"]["kernel"],
                                encoder["layer_0"]["mlp"]["wo"]["kernel"])


@pytest.fixture
def family_parity(monkeypatch):
  """tests/test_family_parity.py with these configs: its family-generic checks run here."""
  from tests import test_family_parity
  for name, config in CONFIGS.items():
    monkeypatch.setitem(test_family_parity.CONFIGS, name, config)
  return test_family_parity


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_ours_to_hf_parity_and_round_trip(name, tmp_path, family_parity):
  """Ours -> HF (MLM and encoder; HF loads them with no missing/unexpected keys) within
  TOL on a padded batch of 9 (> the local windows); ours -> HF -> ours bit-identical."""
  family_parity.test_ours_to_hf_parity_and_round_trip(name, tmp_path)


def test_convert_cli_round_trip(tmp_path, family_parity):
  family_parity.test_convert_cli_round_trip_keeps_the_family("modernbert", tmp_path)


# --- configs --------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CONFIGS) + ["modernbert-base", "modernbert-tiny"])
def test_config_round_trips_through_model_config_and_hf_config_json(name, tmp_path):
  config = CONFIGS[name] if name in CONFIGS else config_for_size(name)
  checkpoint.write_model_config(str(tmp_path), config)
  assert checkpoint.read_model_config(str(tmp_path)) == config
  raw = hf_families.config_to_hf(config)
  assert hf_families.config_from_hf(json.loads(json.dumps(raw))) == config
  hf_config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
  assert type(hf_config).__name__ == "ModernBertConfig"
  assert (hf_config.sliding_window, hf_config.intermediate_size, hf_config.norm_bias,
          hf_config.attention_bias) == (config.local_attention // 2, config.intermediate_size,
                                        config.norm_bias, config.attention_bias)


def test_base_size_is_hf_default_config_and_older_config_json_reads():
  """modernbert-base = HF's ModernBertConfig(); a config.json in the pre-5 form
  (global_attn_every_n_layers, global/local_rope_theta) reads to the same config."""
  base = config_for_size("modernbert-base")
  assert hf_families.config_from_hf(transformers.ModernBertConfig().to_dict()) == base
  older = {"model_type": "modernbert", "vocab_size": 50368, "hidden_size": 768,
           "intermediate_size": 1152, "num_hidden_layers": 22, "num_attention_heads": 12,
           "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
           "local_rope_theta": 10000.0, "local_attention": 128, "pad_token_id": 50283,
           "embedding_dropout": 0.0, "mlp_dropout": 0.0, "attention_dropout": 0.0}
  assert hf_families.config_from_hf(older) == base


def test_bad_configs_are_one_line_errors():
  raw = hf_families.config_to_hf(CONFIGS["modernbert_h48_l3"])
  bad = {
      "layer_types=": {**raw, "layer_types": ["full_attention", "full_attention",
                                              "sliding_attention"]},
      "rope_type='linear' is not supported": {
          **raw, "rope_parameters": {"full_attention": {"rope_type": "linear"}}},
      "decoder_bias=False is not supported": {**raw, "decoder_bias": False},
      "classifier_activation='relu' differs": {**raw, "classifier_activation": "relu"},
  }
  for message, config in bad.items():
    with pytest.raises(ValueError, match=message) as error:
      hf_families.config_from_hf(config, "c.json")
    assert "\n" not in str(error.value) and str(error.value).startswith("c.json: ")


def test_wrong_shape_names_tensor_and_both_shapes(tmp_path, family_parity):
  family_parity.test_wrong_shape_names_tensor_and_both_shapes("modernbert", tmp_path)


# --- size, sharding, headed models ------------------------------------------------------

def test_parameter_count_equals_hf_at_base_size():
  base = config_for_size("modernbert-base")
  hf_config = transformers.ModernBertConfig()
  ours = our_param_count(BertModel(base))
  assert ours == hf_param_count(transformers.ModernBertModel, hf_config) == 149_014_272
  assert (our_param_count(BertForPreTraining(base))
          == hf_param_count(transformers.ModernBertForMaskedLM, hf_config))


def test_every_kernel_has_logical_axes_the_rules_cover():
  from tests.helpers.partition import ruled_partition_specs
  specs = ruled_partition_specs(CONFIGS["modernbert_h48_l3"])
  layer = specs["bert/encoder/layer_1/attention/qkv/kernel"]
  assert tuple(layer) == ("embed", None, "heads", "kv")
  assert tuple(specs["bert/encoder/layer_1/mlp/wi/kernel"]) == ("embed", None, "mlp")


@pytest.mark.parametrize("mesh_shape", [(2, 1, 4), (1, 4, 2), (1, 8, 1)])
def test_base_shardings_split_every_dimension_the_rules_ask(mesh_shape):
  """modernbert-base on (data, fsdp, tensor) meshes of 8: every kernel split as the rules
  say (vocab 50368, heads 12, mlp 1152 all divide), from shapes only."""
  from jax.sharding import AbstractMesh, AxisType
  mesh = AbstractMesh(mesh_shape, sharding.MESH_AXES, axis_types=(AxisType.Auto,) * 3)
  model = BertForPreTraining(config_for_size("modernbert-base"))
  boxed = jax.eval_shape(lambda: model.init(jax.random.key(0), np.zeros((1, 8), np.int32))[
      "params"])
  shardings = sharding.state_shardings(boxed, mesh, sharding.DEFAULT_RULES)
  assert sharding.unsplit_dimensions(boxed, shardings, mesh, sharding.DEFAULT_RULES) == []
  qkv = shardings["bert"]["encoder"]["layer_1"]["attention"]["qkv"]["kernel"].spec
  assert tuple(qkv) == ("fsdp", None, "tensor", None)


@pytest.mark.slow
def test_loss_and_gradient_equal_one_device_on_8_device_meshes():
  """tests/modernbert_mesh_worker.py in a subprocess (8 simulated devices): the MLM loss and
  gradient norm on (data, fsdp, tensor) = (2,2,2) and (1,4,2) meshes equal one device's
  within 1e-5."""
  import subprocess
  import sys
  worker = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modernbert_mesh_worker.py")
  env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2",
         "XLA_FLAGS": "--xla_force_host_platform_device_count=8 "
                      "--xla_backend_optimization_level=0"}
  done = subprocess.run([sys.executable, worker], env=env, capture_output=True, text=True,
                        timeout=600)
  assert done.returncode == 0, done.stderr[-3000:]
  results = json.loads(done.stdout.strip().splitlines()[-1])
  one = np.asarray(results.pop("1,1,1"))
  assert sorted(results) == ["1,4,2", "2,2,2"]
  for mesh, values in results.items():
    np.testing.assert_allclose(values, one, rtol=1e-5, err_msg=mesh)


@pytest.mark.parametrize("headed_model", ["sequence_classification", "token_classification",
                                        "question_answering", "multiple_choice"])
def test_headed_models_run_on_the_modernbert_encoder(headed_model):
  config = CONFIGS["modernbert_h48_l3"]
  spec = {"multiple_choice": {}, "question_answering": {}}.get(headed_model, {"num_labels": 3})
  model = HEADED_MODELS[headed_model](config, **spec)
  ids, types, mask = random_batch(config, [9, 4], 9, seed=0)
  if headed_model == "multiple_choice":
    ids, types, mask = ids[:, None], types[:, None], mask[:, None]
  variables = model.init(jax.random.key(0), ids, types, mask)
  out = model.apply(variables, ids, types, mask)
  leaves = jax.tree.leaves(out)
  assert leaves and all(np.isfinite(np.asarray(x)).all() for x in leaves)


# --- embed and fine-tuning from an HF folder ------------------------------------------

def _tiny_hf_folder(tmp_path, vocab_path):
  """modernbert-tiny with BERT's WordPiece vocab (pad id 0 = [PAD]) as an HF folder."""
  config = config_for_size("modernbert-tiny", vocab_size=30522, pad_token_id=0)
  params = nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  folder = str(tmp_path / "tiny_modernbert")
  hf.save(folder, config, jax.device_get(params), vocab_path=vocab_path)
  return folder


def test_embed_runs_on_an_hf_folder(tmp_path, vocab_path, tokenizer):
  from bert_jax.commands.embed import embed_sentences
  folder = _tiny_hf_folder(tmp_path, vocab_path)
  model, variables = load_pretrained(folder, heads="none")
  assert type(model).__name__ == "BertModel" and model.config.family == "modernbert"
  feats = embed_sentences(model, variables, tokenizer, ["a short one .", "and a longer "
                          "sentence for the second row ."], pooling="mean", max_length=16,
                          batch_size=2)
  assert feats.shape == (2, 128) and np.isfinite(feats).all()


def test_rows_longer_than_the_context_length_are_a_one_line_error():
  """ModernBERT has no position table, but RoPE's context length is max_position_embeddings:
  longer rows are refused as BERT's are (before, a long max_seq_length ran into an
  out-of-memory error instead)."""
  config = CONFIGS["modernbert_h48_l3"]
  ids = np.ones((1, config.max_position_embeddings + 1), np.int32)
  with pytest.raises(ValueError, match="^Sequence length 65 exceeds max_position_embeddings=64"):
    BertModel(config).init(jax.random.key(0), ids)
