"""RoBERTa, DistilBERT, ALBERT and ELECTRA: configs of the one model code, proven equal to
HF transformers.

For each family, random-weight models of odd shapes on padded batches (fp32):
HF -> ours and ours -> HF, every hidden state, the pooled output, the MLM logits and the
sentence-head logits (ALBERT's SOP), ELECTRA's discriminator logits, within 1e-5;
ours -> HF -> ours bit-identical; HF `from_pretrained` of our export reports
no missing/unexpected keys (parameter counts at the published sizes:
tests/test_family_sizes.py); config round trips through model_config.json and HF
config.json. (Fine-tuning from an HF-format folder: tests/test_family_finetune_hf.py.)
"""
import json

import jax
import numpy as np
import pytest
from flax import linen as nn

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import checkpoint  # noqa: E402
from bert_jax.weights import hf_families, hf, hf_files, mapping  # noqa: E402
from bert_jax.models import layout  # noqa: E402
from bert_jax.models.bert import BertModel  # noqa: E402
from bert_jax.models.config import BertConfig, config_for_size  # noqa: E402
from bert_jax.models.families import family_of  # noqa: E402
from bert_jax.models.layers import attention_probs  # noqa: E402
from bert_jax.models.electra import BertForReplacedTokenDetection  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402
from bert_jax.weights import load_params, load_pretrained  # noqa: E402
from tests.helpers.hf_reference import (assert_bit_identical, assert_parity,  # noqa: E402
                                        hf_forward, hf_from_pretrained, hf_state, max_diff,
                                        perturbed, random_batch, random_hf_model, TOL)

CONFIGS = {
    # pad_token_id 1 as roberta-base; one segment row (token_type_ids are ignored).
    "roberta_h48_l3": BertConfig(
        family="roberta", vocab_size=97, hidden_size=48, num_hidden_layers=3,
        num_attention_heads=3, intermediate_size=80, max_position_embeddings=40,
        type_vocab_size=1, layer_norm_eps=1e-5, pad_token_id=1),
    # An odd pad id, two segment rows (read), tanh GELU in the layers (the LM head's
    # GELU stays exact, as HF's RobertaLMHead).
    "roberta_h32_l1_tanh": BertConfig(
        family="roberta", vocab_size=61, hidden_size=32, num_hidden_layers=1,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=24,
        type_vocab_size=2, layer_norm_eps=1e-5, pad_token_id=3, hidden_act="gelu_tanh"),
    "distilbert_h48_l3": BertConfig(
        family="distilbert", vocab_size=97, hidden_size=48, num_hidden_layers=3,
        num_attention_heads=3, intermediate_size=80, max_position_embeddings=40,
        type_vocab_size=0),
    "distilbert_h32_l2_relu": BertConfig(
        family="distilbert", vocab_size=61, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=24,
        type_vocab_size=0, hidden_act="relu"),
    # Factorized embeddings (E=20 < H=48), one layer shared by all three, tanh GELU.
    "albert_h48_l3": BertConfig(
        family="albert", vocab_size=97, hidden_size=48, embedding_size=20,
        num_hidden_layers=3, num_attention_heads=3, intermediate_size=80,
        max_position_embeddings=40, hidden_act="gelu_tanh", layer_sharing="all"),
    # HF's num_hidden_groups = L (no sharing), E == H (ALBERT still projects), exact GELU.
    "albert_h32_e32_l2_unshared": BertConfig(
        family="albert", vocab_size=61, hidden_size=32, embedding_size=32,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=24, layer_sharing="none"),
    "electra_h48_l3": BertConfig(
        family="electra", vocab_size=97, hidden_size=48, embedding_size=20,
        num_hidden_layers=3, num_attention_heads=3, intermediate_size=80,
        max_position_embeddings=40),
    # E == H: no embeddings_project; tanh GELU in the layers and the discriminator head
    # (the generator head's GELU stays exact, as HF's ElectraGeneratorPredictions).
    "electra_h32_e32_l1_tanh": BertConfig(
        family="electra", vocab_size=61, hidden_size=32, embedding_size=32,
        num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=24, hidden_act="gelu_tanh"),
}
FAMILIES = ("roberta", "distilbert", "albert", "electra")


def _mlm_logits(ref):
  """HF's MLM logits (AlbertForPreTraining calls them prediction_logits)."""
  return ref.logits if hasattr(ref, "logits") else ref.prediction_logits


def _assert_discriminator_parity(out, ref, config, mask):
  """ELECTRA's discriminator: hidden states and the per-token logits [B, T] within TOL."""
  assert_parity(out, ref, config, mask)
  assert max_diff(out.logits, ref.logits, mask) < TOL


# Dense layers feeding an activation (HF names): their weights are scaled up in the HF ->
# ours test so that pre-activations reach O(1), where exact and tanh GELU differ by
# more than TOL (at HF's init std 0.02 they would not, and a wrong activation would pass).
_ACTIVATION_INPUTS = ("intermediate.dense.weight", "ffn.lin1.weight", "lm_head.dense.weight",
                      "vocab_transform.weight", "albert_layers.0.ffn.weight",
                      "predictions.dense.weight", "discriminator_predictions.dense.weight")


def _sharpened(model, factor=30.0):
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith(_ACTIVATION_INPUTS):
        p.mul_(factor)
  return model


# --- HF -> ours -----------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hf_to_ours_parity(name):
  config = CONFIGS[name]
  family = family_of(config)
  classes = hf_families.FAMILIES[config.family]
  ids, types, mask = random_batch(config, [11, 5, 1], 11, seed=1)

  hf_mlm = _sharpened(random_hf_model(config, seed=0, cls_name=classes.pretraining_class))
  state = hf.normalize_names(hf_state(hf_mlm), "t", config.family)
  params, with_heads = hf.state_to_params(state, config, "t")
  assert with_heads and ("pooler" in params["bert"]) == family.pretraining_pooler
  ref = hf_forward(hf_mlm, config, ids, types, mask)
  out = BertForPreTraining(config).apply({"params": params}, ids, types, mask,
                                         output_hidden_states=True)
  assert sorted(out.sentence_logits) == sorted(family.sentence_heads)
  assert (out.pooled_output is None) == (not family.pretraining_pooler)
  assert_parity(out, ref, config, mask, _mlm_logits(ref))

  # The bare encoder (RobertaModel and AlbertModel have a pooler, DistilBertModel and
  # ElectraModel none), unprefixed names.
  hf_encoder = _sharpened(random_hf_model(config, seed=4, cls_name=classes.encoder_class))
  state = hf.normalize_names(hf_state(hf_encoder), "t", config.family)
  params, with_heads = hf.state_to_params(state, config, "t")
  assert not with_heads
  ref = hf_forward(hf_encoder, config, ids, types, mask)
  out = BertModel(config).apply({"params": params}, ids, types, mask,
                                output_hidden_states=True)
  assert_parity(out, ref, config, mask)
  if family.pooler:
    assert max_diff(out.pooled_output, ref.pooler_output) < TOL
  else:
    assert out.pooled_output is None and "pooler" not in params

  # ELECTRA's discriminator (ElectraForPreTraining): its replaced-token logits.
  for headed_model, cls_name in classes.other_head_classes:
    hf_model = _sharpened(random_hf_model(config, seed=6, cls_name=cls_name))
    state = hf.normalize_names(hf_state(hf_model), "t", config.family)
    params, with_heads = hf.state_to_params(state, config, "t")
    assert with_heads and headed_model == "replaced_token_detection"
    ref = hf_forward(hf_model, config, ids, types, mask)
    out = BertForReplacedTokenDetection(config).apply({"params": params}, ids, types, mask,
                                                      output_hidden_states=True)
    _assert_discriminator_parity(out, ref, config, mask)


@pytest.mark.slow
def test_albert_shared_layer_scans_equal_to_hf_and_the_unrolled_model():
  """scan_layers with every sub-layer shared: the one `shared_layer` (params not stacked,
  the same tree as unrolled) run by nn.scan, with and without remat: every hidden state,
  the MLM and SOP logits within TOL of HF's ALBERT; attention weights and gradients equal
  to the unrolled model's. Part-shared layers cannot scan (a one-line error)."""
  config = CONFIGS["albert_h48_l3"]
  ids, types, mask = random_batch(config, [11, 5, 1], 11, seed=1)
  hf_mlm = _sharpened(random_hf_model(config, seed=0, cls_name="AlbertForPreTraining"))
  params, _ = hf.state_to_params(hf.normalize_names(hf_state(hf_mlm), "t", "albert"),
                                 config, "t")
  assert layout.stack_layers(params, *layout.stacked_layout(config)) == params
  ref = hf_forward(hf_mlm, config, ids, types, mask)
  _, unrolled = BertForPreTraining(config).apply(
      {"params": params}, ids, types, mask, mutable=["intermediates"])

  def loss(cfg, p):
    return (BertForPreTraining(cfg).apply({"params": p}, ids, types, mask).mlm_logits ** 2).mean()
  grads = mapping.flatten(jax.grad(lambda p: loss(config, p))(params))
  for remat_policy in ("none", "full"):
    scan = config.replace(scan_layers=True, remat_policy=remat_policy)
    init = nn.unbox(BertForPreTraining(scan).init(jax.random.key(0), ids)["params"])
    assert jax.tree.map(np.shape, init) == jax.tree.map(np.shape, params)
    out, state = BertForPreTraining(scan).apply(
        {"params": params}, ids, types, mask, output_hidden_states=True,
        mutable=["intermediates"])
    assert_parity(out, ref, config, mask, _mlm_logits(ref))
    for ours, theirs in zip(attention_probs(state["intermediates"], 3),
                            attention_probs(unrolled["intermediates"], 3), strict=True):
      np.testing.assert_allclose(ours, theirs, atol=1e-6)
    scanned = mapping.flatten(jax.grad(lambda p, c=scan: loss(c, p))(params))
    for path, value in grads.items():
      np.testing.assert_allclose(scanned[path], value, rtol=1e-4, atol=1e-6, err_msg=path)
  with pytest.raises(ValueError, match="layer_sharing='ffn' needs scan_layers=False"):
    config.replace(layer_sharing="ffn", scan_layers=True)


def test_roberta_position_ids_count_real_tokens_from_pad_plus_one():
  from bert_jax.models.families import padding_offset_positions
  config = CONFIGS["roberta_h48_l3"]
  ids = np.array([[0, 5, 6, 1, 1], [7, 1, 8, 9, 1]], np.int32)  # pad id 1, also mid-row
  ours = np.asarray(padding_offset_positions(ids, config))
  theirs = transformers.models.roberta.modeling_roberta.RobertaEmbeddings \
      .create_position_ids_from_input_ids(torch.tensor(ids, dtype=torch.long), 1).numpy()
  np.testing.assert_array_equal(ours, theirs)
  np.testing.assert_array_equal(ours, [[2, 3, 4, 1, 1], [2, 1, 3, 4, 1]])
  with pytest.raises(ValueError, match="exceeds max_position_embeddings=40 less the first "
                                       "position id 2"):
    BertModel(config).init(jax.random.key(0), np.zeros((1, 39), np.int32))


# --- ours -> HF -> ours ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", ["roberta_h48_l3", "distilbert_h48_l3", "albert_h48_l3",
                                  "electra_h48_l3"])
def test_ours_to_hf_parity_and_round_trip(name, tmp_path):
  config = CONFIGS[name]
  classes = hf_families.FAMILIES[config.family]
  ids, types, mask = random_batch(config, [9, 4], 9, seed=2)
  model = BertForPreTraining(config)
  params = perturbed(nn.unbox(model.init(jax.random.key(3), ids)["params"]), seed=5)
  hf.save(str(tmp_path / "mlm"), config, params)
  with open(tmp_path / "mlm" / "config.json") as f:
    assert json.load(f)["architectures"] == [classes.pretraining_class]
  hf_mlm = hf_from_pretrained(str(tmp_path / "mlm"), classes.pretraining_class)
  ref = hf_forward(hf_mlm, config, ids, types, mask)
  out = model.apply({"params": params}, ids, types, mask, output_hidden_states=True)
  assert_parity(out, ref, config, mask, _mlm_logits(ref))
  # ours -> HF -> ours is bit-identical, through load_pretrained (config.json picks the
  # family) as through hf.load.
  loaded, variables = load_pretrained(str(tmp_path / "mlm"))
  assert loaded.config == config and type(loaded).__name__ == "BertForPreTraining"
  assert_bit_identical(params, variables["params"])

  # The bare encoder: the family's HF encoder class loads it with nothing missing.
  encoder = BertModel(config)
  enc_params = perturbed(nn.unbox(encoder.init(jax.random.key(4), ids)["params"]), seed=6)
  hf.save(str(tmp_path / "encoder"), config, enc_params)
  hf_encoder = hf_from_pretrained(str(tmp_path / "encoder"), classes.encoder_class)
  ref = hf_forward(hf_encoder, config, ids, types, mask)
  out = encoder.apply({"params": enc_params}, ids, types, mask, output_hidden_states=True)
  assert_parity(out, ref, config, mask)
  if family_of(config).pooler:
    assert max_diff(out.pooled_output, ref.pooler_output) < TOL
  _, back, _ = load_params(str(tmp_path / "encoder"))
  assert_bit_identical(enc_params, back)

  # ELECTRA's discriminator: ElectraForPreTraining loads it; load_pretrained gives it back.
  for headed_model, cls_name in classes.other_head_classes:
    disc = BertForReplacedTokenDetection(config)
    disc_params = perturbed(nn.unbox(disc.init(jax.random.key(5), ids)["params"]), seed=7)
    folder = str(tmp_path / headed_model)
    hf.save(folder, config, disc_params)
    ref = hf_forward(hf_from_pretrained(folder, cls_name), config, ids, types, mask)
    out = disc.apply({"params": disc_params}, ids, types, mask, output_hidden_states=True)
    _assert_discriminator_parity(out, ref, config, mask)
    loaded, variables = load_pretrained(folder)
    assert type(loaded).__name__ == "BertForReplacedTokenDetection"
    assert_bit_identical(disc_params, variables["params"])


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_convert_cli_round_trip_keeps_the_family(family, tmp_path):
  from bert_jax.commands.convert import convert
  config = CONFIGS[f"{family}_h48_l3"]
  params = perturbed(nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"]), seed=1)
  hf.save(str(tmp_path / "hf"), config, params)
  convert(str(tmp_path / "hf"), str(tmp_path / "native"), to="native")
  assert checkpoint.read_model_config(str(tmp_path / "native")) == config
  convert(str(tmp_path / "native"), str(tmp_path / "back"), to="hf")
  original = hf_files.read_state(str(tmp_path / "hf"))
  back = hf_files.read_state(str(tmp_path / "back"))
  assert original.keys() == back.keys()
  for k in original:
    np.testing.assert_array_equal(original[k], back[k], err_msg=k)
  with open(tmp_path / "back" / "config.json") as f:
    assert json.load(f)["model_type"] == family


# --- configs --------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CONFIGS) + [
    "roberta-base", "distilbert-base-uncased", "roberta-tiny", "distilbert-tiny",
    "albert-base-v2", "albert-tiny", "electra-small", "electra-small-generator",
    "electra-tiny", "electra-tiny-generator"])
def test_config_round_trips_through_model_config_and_hf_config_json(name, tmp_path):
  config = CONFIGS[name] if name in CONFIGS else config_for_size(name)
  checkpoint.write_model_config(str(tmp_path), config)
  assert checkpoint.read_model_config(str(tmp_path)) == config
  raw = hf_families.config_to_hf(config)
  assert raw["model_type"] == config.family
  assert hf_families.config_from_hf(json.loads(json.dumps(raw))) == config
  hf_config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
  assert type(hf_config).__name__ == {"roberta": "RobertaConfig", "distilbert":
                                      "DistilBertConfig", "albert": "AlbertConfig",
                                      "electra": "ElectraConfig"}[config.family]
  assert (hf_config.hidden_size, hf_config.num_hidden_layers, hf_config.num_attention_heads,
          hf_config.pad_token_id) == (config.hidden_size, config.num_hidden_layers,
                                      config.num_attention_heads, config.pad_token_id)


def test_bad_hf_configs_are_one_line_errors(tmp_path):
  (tmp_path / "config.json").write_text(json.dumps({"model_type": "xlnet", "d_model": 8}))
  known = ", ".join(sorted(hf_families.FAMILIES))
  with pytest.raises(ValueError, match=rf"model_type='xlnet' is not supported \(known: "
                                       rf"{known}\)") as error:
    load_pretrained(str(tmp_path))
  assert "\n" not in str(error.value)
  raw = hf_families.config_to_hf(CONFIGS["distilbert_h48_l3"])
  with pytest.raises(ValueError, match="sinusoidal_pos_embds=true is not supported"):
    hf_families.config_from_hf({**raw, "sinusoidal_pos_embds": True})
  with pytest.raises(ValueError, match="model_type='roberta' is an HF config of another"):
    BertConfig.from_json_dict(hf_families.config_to_hf(CONFIGS["roberta_h48_l3"]))
  with pytest.raises(ValueError, match="family='xlnet' is not one of"):
    BertConfig(family="xlnet")
  # ALBERT: HF's layer groups express no sharing or full sharing only, and ours -> HF
  # refuses the attention-/FFN-only ablations.
  raw = hf_families.config_to_hf(CONFIGS["albert_h48_l3"])
  assert (raw["num_hidden_groups"], raw["inner_group_num"]) == (1, 1)
  for groups, inner in ((1, 2), (2, 1)):
    with pytest.raises(ValueError, match=f"num_hidden_groups={groups}, inner_group_num={inner} "
                                         "is not supported"):
      hf_families.config_from_hf({**raw, "num_hidden_groups": groups, "inner_group_num": inner})
  for sharing in ("attention", "ffn"):
    ablation = CONFIGS["albert_h48_l3"].replace(layer_sharing=sharing)
    with pytest.raises(ValueError, match=f"layer_sharing='{sharing}'"):
      hf_families.config_to_hf(ablation)
    params = nn.unbox(BertModel(ablation).init(jax.random.key(0), np.zeros((1, 4), np.int32)))
    with pytest.raises(ValueError, match=f"this config has layer_sharing='{sharing}'"):
      hf.save(str(tmp_path / sharing), ablation, params["params"])
    with pytest.raises(ValueError, match=f"layer_sharing='{sharing}' has no HF equivalent"):
      hf.params_to_state(params["params"], ablation)
  with pytest.raises(ValueError, match="no HF bert equivalent"):  # BERT cannot share either
    hf_families.config_to_hf(BertConfig(layer_sharing="all"))


@pytest.mark.parametrize("family", FAMILIES)
def test_wrong_shape_names_tensor_and_both_shapes(family, tmp_path):
  config = CONFIGS[f"{family}_h48_l3"]
  params = nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  hf.save(str(tmp_path), config, jax.device_get(params))
  raw = json.loads((tmp_path / "config.json").read_text())
  (tmp_path / "config.json").write_text(json.dumps({**raw, "vocab_size": 98}))
  e = config.embedding_width
  names = mapping.NAMES[family]
  table = f"{names.prefix}.{names.encoder['embeddings/word_embeddings']}.weight"
  with pytest.raises(ValueError, match=rf"tensor {table} has "
                                       rf"shape \(97, {e}\) but the config expects \(98, {e}\)"):
    load_pretrained(str(tmp_path))


def test_untied_decoder_refused(tmp_path):
  config = CONFIGS["distilbert_h48_l3"]
  hf_mlm = random_hf_model(config, seed=0, cls_name="DistilBertForMaskedLM")
  state = hf_state(hf_mlm)
  state["vocab_projector.weight"] = state["vocab_projector.weight"] + 1.0
  with pytest.raises(ValueError, match="vocab_projector.weight is not tied to "
                                       "distilbert.embeddings.word_embeddings.weight"):
    hf.normalize_names(state, "t", "distilbert")


# --- ALBERT's cross-layer sharing ---------------------------------------------------------

_ATTENTION = {"attention", "attention_layer_norm"}
_FFN = {"intermediate", "output", "output_layer_norm"}


@pytest.mark.parametrize("sharing, shared, own", [
    ("all", _ATTENTION | _FFN, None), ("attention", _ATTENTION, _FFN),
    ("ffn", _FFN, _ATTENTION), ("none", None, _ATTENTION | _FFN)])
def test_layer_sharing_param_trees_and_outputs(sharing, shared, own):
  """The shared sub-layers are ONE set of params (`encoder/shared_layer`), each layer keeps
  the rest; with every layer's own params equal to the shared layer's, each sharing mode
  computes exactly the all-shared model (so each applies attention, then FFN, L times)."""
  base = CONFIGS["albert_h48_l3"]
  ids, types, mask = random_batch(base, [7, 3], 7, seed=3)
  all_params = perturbed(nn.unbox(BertModel(base).init(jax.random.key(0), ids)["params"]), 1)
  config = base.replace(layer_sharing=sharing)
  model = BertModel(config)
  params = nn.unbox(model.init(jax.random.key(0), ids)["params"])
  layers = [f"layer_{i}" for i in range(config.num_hidden_layers)]
  assert set(params["encoder"]) == ({"shared_layer"} if shared else set()) | (
      set(layers) if own else set())
  if shared:
    assert set(params["encoder"]["shared_layer"]) == shared
  for name in layers if own else ():
    assert set(params["encoder"][name]) == own
  one_layer = all_params["encoder"]["shared_layer"]
  params["embeddings"], params["pooler"] = all_params["embeddings"], all_params["pooler"]
  for name in params["encoder"]:
    params["encoder"][name] = {k: one_layer[k] for k in params["encoder"][name]}
  reference = BertModel(base).apply({"params": all_params}, ids, types, mask,
                                    output_hidden_states=True)
  out = model.apply({"params": params}, ids, types, mask, output_hidden_states=True)
  for a, b in zip(out.hidden_states, reference.hidden_states):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  # With dropout on, too (each application draws its own mask).
  train = model.apply({"params": params}, ids, types, mask, deterministic=False,
                      rngs={"dropout": jax.random.key(1)})
  assert np.isfinite(np.asarray(train.sequence_output)).all()
