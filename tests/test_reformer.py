"""Reformer: a family of the one model code (models/reformer.py), proven equal to HF's.

Random-weight models of odd shapes (N * D != H, several hash rounds, factorised buckets,
mixed attn_layers, chunks that also look ahead, axial and learned positions, chunked
feed-forward, padded rows), fp32, every hidden state, the 2H-wide output and the MLM
logits within 1e-5:
  - local-only models both ways through HF folders (the family-generic round trip);
  - LSH layers with the same rotations on both sides: ours from the "lsh_rotations"
    collection, HF's by substituting them for the torch.randn draw in its hashing (HF seeds
    torch's generator with hash_seed, a stream JAX cannot reproduce);
  - ReformerForSequenceClassification / ForQuestionAnswering through load_pretrained;
  - the reversible stack's gradients equal plain autodiff's, with dropout on, and its
    compiled backward pass holds a fraction of the plain stack's temporaries.
"""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import hf_families, hf  # noqa: E402
from bert_jax.models import reformer  # noqa: E402
from bert_jax.models.bert import BertModel  # noqa: E402
from bert_jax.models.config import BertConfig  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402
from tests.helpers.hf_reference import (assert_parity, hf_forward,  # noqa: E402
                                        hf_param_count, hf_state, max_diff, our_param_count,
                                        perturbed, random_batch, random_hf_model, TOL)

_TINY = dict(family="reformer", vocab_size=61, hidden_size=32, num_attention_heads=3,
             attention_head_size=8, intermediate_size=40, max_position_embeddings=64,
             type_vocab_size=0, pad_token_id=0, hidden_act="relu", hidden_dropout_prob=0.0,
             attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12,
             axial_pos_embds_dim=(12, 20))
CONFIGS = {
    # Local layers whose chunks of 3 see the chunk before and the one after (9 tokens:
    # 3 chunks, wrapping around), axial positions 3 x 3, the feed-forward 3 tokens at a time.
    "reformer_local_h32_l2": BertConfig(
        **_TINY, num_hidden_layers=2, attn_layers=("local", "local"),
        local_attn_chunk_length=3, local_num_chunks_after=1, axial_pos_shape=(3, 3),
        chunk_size_feed_forward=3),
    # LSH and local mixed, 3 hash rounds of 4 buckets, chunks of 4 (16 tokens), 4 x 4 axial.
    "reformer_mixed_h32_l3": BertConfig(
        **_TINY, num_hidden_layers=3, attn_layers=("lsh", "local", "lsh"),
        local_attn_chunk_length=4, lsh_attn_chunk_length=4, num_buckets=4, num_hashes=3,
        axial_pos_shape=(4, 4), hash_seed=0),
    # LSH only, factorised buckets (2 x 4), chunks of 4 that see the chunk after too, two
    # rounds, learned positions, the feed-forward 8 tokens at a time.
    "reformer_lsh_h32_l2": BertConfig(
        **{**_TINY, "axial_pos_embds_dim": ()}, num_hidden_layers=2, attn_layers=("lsh", "lsh"),
        lsh_attn_chunk_length=4, lsh_num_chunks_after=1, num_buckets=(2, 4), num_hashes=2,
        chunk_size_feed_forward=8, hash_seed=0),
}
LSH_LENGTHS, LSH_LEN = [16, 11], 16  # the second row padded: its pad tokens' own bucket


def _random_hf(config, seed, cls_name):
  """random_hf_model with lm_head.bias left at zero: HF's forward never adds it, and a
  non-zero one is refused when read."""
  model = random_hf_model(config, seed=seed, cls_name=cls_name)
  if hasattr(model, "lm_head"):
    with torch.no_grad():
      model.lm_head.bias.zero_()
  return model


# --- HF with given rotations ------------------------------------------------------------

def _rotations(config, length, seed):
  """{"layer_i": rotations} for each LSH layer (ours: the "lsh_rotations" collection)."""
  rng = np.random.default_rng(seed)
  return {f"layer_{i}": rng.normal(size=reformer.rotation_shape(config, length)).astype(
      np.float32) for i, kind in enumerate(config.attn_layers) if kind == "lsh"}


def _hf_use_rotations(model, rotations, monkeypatch):
  """Each HF LSHSelfAttention hashes with our layer's rotations: its one torch.randn draw
  (the rotations; HF's _hash_vectors draws nothing else) returns them."""
  from transformers.models.reformer import modeling_reformer
  layers = [layer for layer in model.modules()
            if isinstance(layer, modeling_reformer.LSHSelfAttention)]
  assert len(layers) == len(rotations)
  for layer, name in zip(layers, sorted(rotations, key=lambda n: int(n.split("_")[1]))):
    given = torch.tensor(rotations[name])
    original = layer._hash_vectors

    def hash_vectors(*args, given=given, original=original, **kwargs):
      def randn(shape, device=None, dtype=None):
        assert tuple(shape) == tuple(given.shape), (shape, given.shape)
        return given.to(dtype)
      with monkeypatch.context() as m:
        m.setattr(modeling_reformer.torch, "randn", randn)
        return original(*args, **kwargs)
    monkeypatch.setattr(layer, "_hash_vectors", hash_vectors)


def _variables(params, rotations, encoder_path):
  """params + the rotations at the encoder (encoder_path: ("bert", "encoder") ...)."""
  collection = rotations
  for name in reversed(encoder_path):
    collection = {name: collection}
  return {"params": params, "lsh_rotations": collection}


@pytest.mark.slow
@pytest.mark.parametrize("name", ["reformer_mixed_h32_l3", "reformer_lsh_h32_l2"])
def test_hf_to_ours_parity_with_the_same_rotations(name, monkeypatch):
  """HF ReformerForMaskedLM / ReformerModel -> ours: hidden states, the output and the MLM
  logits within TOL; other rotations are far from HF (the rotations decide)."""
  config = CONFIGS[name]
  ids, types, mask = random_batch(config, LSH_LENGTHS, LSH_LEN, seed=1)
  rotations = _rotations(config, LSH_LEN, seed=2)
  hf_mlm = _random_hf(config, 0, "ReformerForMaskedLM")
  _hf_use_rotations(hf_mlm, rotations, monkeypatch)
  state = hf.normalize_names(hf_state(hf_mlm), "t", "reformer")
  params, with_heads = hf.state_to_params(state, config, "t")
  assert with_heads and set(params) == {"bert", "mlm_head"}
  ref = hf_forward(hf_mlm, config, ids, types, mask)
  model = BertForPreTraining(config)
  out = model.apply(_variables(params, rotations, ("bert", "encoder")), ids, types, mask,
                    output_hidden_states=True)
  assert_parity(out, ref, config, mask, ref.logits)
  other = _rotations(config, LSH_LEN, seed=3)
  wrong = model.apply(_variables(params, other, ("bert", "encoder")), ids, types, mask)
  assert max_diff(wrong.mlm_logits, ref.logits, mask) > 100 * TOL
  # The reversible stack (no hidden states asked) gives the same values.
  plain = model.apply(_variables(params, rotations, ("bert", "encoder")), ids, types, mask)
  assert max_diff(plain.mlm_logits, ref.logits, mask) < TOL

  hf_encoder = _random_hf(config, 4, "ReformerModel")
  _hf_use_rotations(hf_encoder, rotations, monkeypatch)
  params, with_heads = hf.state_to_params(
      hf.normalize_names(hf_state(hf_encoder), "t", "reformer"), config, "t")
  assert not with_heads
  ref = hf_forward(hf_encoder, config, ids, types, mask)
  out = BertModel(config).apply(_variables(params, rotations, ("encoder",)), ids, types, mask,
                                output_hidden_states=True)
  assert_parity(out, ref, config, mask)
  assert max_diff(out.sequence_output, ref.last_hidden_state, mask) < TOL


@pytest.mark.slow
def test_rows_off_the_chunk_multiple_run_padded_as_hf_pads_them(monkeypatch):
  """14 tokens with chunks of 4: both sides run 16 (two masked pad tokens), same values."""
  config = CONFIGS["reformer_mixed_h32_l3"]
  ids, types, mask = random_batch(config, [14, 9], 14, seed=8)
  rotations = _rotations(config, 16, seed=9)
  hf_mlm = _random_hf(config, 10, "ReformerForMaskedLM")
  _hf_use_rotations(hf_mlm, rotations, monkeypatch)
  params, _ = hf.state_to_params(hf.normalize_names(hf_state(hf_mlm), "t", "reformer"),
                                 config, "t")
  ref = hf_forward(hf_mlm, config, ids, types, mask)
  out = BertForPreTraining(config).apply(_variables(params, rotations, ("bert", "encoder")),
                                         ids, types, mask, output_hidden_states=True)
  assert max_diff(out.mlm_logits, ref.logits, mask) < TOL  # HF cuts its output back to 14
  for ours, theirs in zip(out.hidden_states, ref.hidden_states):  # but not hidden states
    assert max_diff(ours, theirs[:, :14], mask) < TOL


def test_rows_within_one_chunk_are_full_attention_without_self(monkeypatch):
  """Rows no longer than the LSH chunk: HF attends to every other key, no hashing."""
  config = CONFIGS["reformer_mixed_h32_l3"]
  ids, types, mask = random_batch(config, [4, 3], 4, seed=5)
  hf_mlm = _random_hf(config, 6, "ReformerForMaskedLM")
  params, _ = hf.state_to_params(hf.normalize_names(hf_state(hf_mlm), "t", "reformer"),
                                 config, "t")
  ref = hf_forward(hf_mlm, config, ids, types, mask)
  out = BertForPreTraining(config).apply({"params": params}, ids, types, mask,
                                         output_hidden_states=True)
  assert_parity(out, ref, config, mask, ref.logits)


# --- ours -> HF, local layers end to end ------------------------------------------------

@pytest.fixture
def family_parity(monkeypatch):
  """tests/test_family_parity.py with these configs: its family-generic checks run here."""
  from tests import test_family_parity
  for name, config in CONFIGS.items():
    monkeypatch.setitem(test_family_parity.CONFIGS, name, config)
  return test_family_parity


@pytest.mark.slow
def test_local_layers_ours_to_hf_and_back(tmp_path, family_parity):
  """Ours -> HF ReformerForMaskedLM and ReformerModel folders (HF loads them with nothing
  missing or unexpected) within TOL on a padded batch of 9 (3 chunks); HF -> ours
  through load_pretrained bit-identical."""
  family_parity.test_ours_to_hf_parity_and_round_trip("reformer_local_h32_l2", tmp_path)


def test_convert_cli_round_trip(tmp_path, family_parity, monkeypatch):
  monkeypatch.setitem(family_parity.CONFIGS, "reformer_h48_l3",
                      CONFIGS["reformer_local_h32_l2"])
  family_parity.test_convert_cli_round_trip_keeps_the_family("reformer", tmp_path)


def test_task_heads_from_hf_and_back(tmp_path):
  """ReformerForSequenceClassification (dense + tanh on the first token, then out_proj:
  our pooler + classifier) and ReformerForQuestionAnswering load as our headed models,
  within TOL, and save back to the same HF class."""
  config = CONFIGS["reformer_local_h32_l2"]
  ids, types, mask = random_batch(config, [9, 6], 9, seed=7)
  for seed, cls_name, ours in ((8, "ReformerForSequenceClassification",
                                  "BertForSequenceClassification"),
                                 (9, "ReformerForQuestionAnswering", "BertForQuestionAnswering")):
    hf_model = random_hf_model(config, seed=seed, cls_name=cls_name)
    hf_model.save_pretrained(str(tmp_path / cls_name))
    model, variables = load_pretrained(str(tmp_path / cls_name))
    assert type(model).__name__ == ours
    ref = hf_forward(hf_model, config, ids, types, mask)
    out = model.apply(variables, ids, types, mask)
    for field in ("logits", "start_logits", "end_logits"):
      if hasattr(ref, field) and getattr(ref, field) is not None:
        assert max_diff(getattr(out, field), getattr(ref, field)) < TOL, field
  hf_qa = hf_model
  spec = {"headed_model": "question_answering"}
  hf.save(str(tmp_path / "qa_back"), config, jax.device_get(variables["params"]), spec=spec)
  back = transformers.ReformerForQuestionAnswering.from_pretrained(str(tmp_path / "qa_back"))
  for key, value in hf_qa.state_dict().items():
    np.testing.assert_array_equal(back.state_dict()[key].numpy(), value.numpy(), err_msg=key)


# --- reversible layers ------------------------------------------------------------------

def _loss_and_grads(config, params, ids, mask, rotations):
  model = BertForPreTraining(config)

  def loss(p):
    out = model.apply(_variables(p, rotations, ("bert", "encoder")), ids, None, mask,
                      deterministic=False, rngs={"dropout": jax.random.key(11)})
    return jnp.mean(jax.nn.log_softmax(out.mlm_logits)[..., 3])
  return jax.jit(jax.value_and_grad(loss))(params)


@pytest.mark.slow
def test_reversible_gradients_equal_plain_autodiff_with_dropout():
  """The custom_vjp that rebuilds each layer's input gives plain autodiff's gradients
  (1e-5), dropout and LSH attention included (the same masks in the recomputation)."""
  config = CONFIGS["reformer_mixed_h32_l3"].replace(
      num_hidden_layers=2, attn_layers=("lsh", "local"), num_hashes=2,
      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
      lsh_attention_probs_dropout_prob=0.1, chunk_size_feed_forward=4)
  ids, _, mask = random_batch(config, LSH_LENGTHS, LSH_LEN, seed=3)
  rotations = _rotations(config, LSH_LEN, seed=4)
  params = perturbed(nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), ids)["params"]), seed=1)
  loss_rev, grads_rev = _loss_and_grads(config, params, ids, mask, rotations)
  loss_plain, grads_plain = _loss_and_grads(config.replace(reversible=False), params, ids,
                                            mask, rotations)
  assert abs(float(loss_rev) - float(loss_plain)) < TOL
  diffs = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), grads_rev, grads_plain)
  assert max(jax.tree.leaves(diffs)) < TOL, diffs
  assert min(float(jnp.max(jnp.abs(g))) for g in jax.tree.leaves(grads_rev)) > 0


def _compiled_temp_bytes(config, length):
  ids = jnp.zeros((1, length), jnp.int32)
  model = BertForPreTraining(config)
  params = jax.eval_shape(lambda: nn.unbox(model.init(jax.random.key(0), ids[:, :8])["params"]))

  def loss(p):
    return jnp.mean(model.apply({"params": p}, ids).mlm_logits)
  compiled = jax.jit(jax.grad(loss)).lower(params).compile()
  return compiled.memory_analysis().temp_size_in_bytes


@pytest.mark.slow
def test_reversible_backward_holds_a_fraction_of_the_plain_stacks_memory():
  """Compiled for 8 local layers at 2,048 tokens: the reversible backward pass keeps no
  layer's activations, so its temporaries are under a third of the plain stack's."""
  config = CONFIGS["reformer_local_h32_l2"].replace(
      num_hidden_layers=8, attn_layers=("local",) * 8, local_attn_chunk_length=64,
      local_num_chunks_after=0, axial_pos_shape=(32, 64), chunk_size_feed_forward=0)
  reversible = _compiled_temp_bytes(config, 2048)
  plain = _compiled_temp_bytes(config.replace(reversible=False), 2048)
  assert reversible < plain / 3, (reversible, plain)


@pytest.mark.slow
def test_lsh_attention_groups_give_the_same_loss_and_gradients_in_less_memory():
  """lsh_attention_groups=G attends LSH attention's sorted chunks G groups at a time: the
  loss and gradients of all at once (1e-5) without dropout; with dropout (masks drawn per
  group) the reversible stack's gradients still equal plain autodiff's; compiled for an LSH
  layer at 2,048 tokens (4 rounds, chunks of 128: 64 chunks), 8 groups hold under half the
  temporaries (24.1 against 81.9 MiB on the CPU backend)."""
  config = CONFIGS["reformer_mixed_h32_l3"]  # 3 rounds x 16 tokens / chunks of 4: 12 chunks
  ids, _, mask = random_batch(config, LSH_LENGTHS, LSH_LEN, seed=3)
  rotations = _rotations(config, LSH_LEN, seed=4)
  params = perturbed(nn.unbox(BertForPreTraining(config).init(
      jax.random.key(0), ids)["params"]), seed=1)
  loss_one, grads_one = _loss_and_grads(config, params, ids, mask, rotations)
  for groups in (3, 4):
    loss, grads = _loss_and_grads(config.replace(lsh_attention_groups=groups), params, ids,
                                  mask, rotations)
    assert abs(float(loss) - float(loss_one)) < TOL
    diffs = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), grads, grads_one)
    assert max(jax.tree.leaves(diffs)) < TOL, (groups, diffs)
  dropped = config.replace(lsh_attention_groups=4, lsh_attention_probs_dropout_prob=0.2)
  loss_rev, grads_rev = _loss_and_grads(dropped, params, ids, mask, rotations)
  loss_plain, grads_plain = _loss_and_grads(dropped.replace(reversible=False), params, ids,
                                            mask, rotations)
  assert abs(float(loss_rev) - float(loss_plain)) < TOL and abs(float(loss_rev) - float(
      loss_one)) > TOL  # dropout on: another loss, the same in both stacks
  diffs = jax.tree.map(lambda a, b: float(jnp.max(jnp.abs(a - b))), grads_rev, grads_plain)
  assert max(jax.tree.leaves(diffs)) < TOL, diffs
  with pytest.raises(ValueError, match="lsh_attention_groups=5 does not divide LSH "
                     "attention's 12 chunks"):
    _loss_and_grads(config.replace(lsh_attention_groups=5), params, ids, mask, rotations)
  long = CONFIGS["reformer_lsh_h32_l2"].replace(
      num_hidden_layers=1, attn_layers=("lsh",), lsh_attn_chunk_length=128,
      lsh_num_chunks_after=0, num_buckets=16, num_hashes=4, max_position_embeddings=2048,
      chunk_size_feed_forward=0)
  whole = _compiled_temp_bytes(long, 2048)
  grouped = _compiled_temp_bytes(long.replace(lsh_attention_groups=8), 2048)
  assert grouped < whole / 2, (grouped, whole)


# --- configs ----------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_config_round_trips_through_hf_config_json(name):
  config = CONFIGS[name]
  raw = hf_families.config_to_hf(config)
  assert hf_families.config_from_hf(json.loads(json.dumps(raw))) == config
  hf_config = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
  assert type(hf_config).__name__ == "ReformerConfig"
  assert hf_config.num_hidden_layers == config.num_hidden_layers


def test_default_size_is_hf_default_config_and_parameter_counts_equal_hf():
  """reformer-default = HF's ReformerConfig() (encoder use); ReformerModel's and
  ReformerForMaskedLM's parameter counts (its unused lm_head.bias left out of ours)."""
  from bert_jax.models.config import config_for_size
  default, hf_config = config_for_size("reformer-default"), transformers.ReformerConfig()
  assert hf_families.config_from_hf(hf_config.to_dict()) == default
  assert our_param_count(BertModel(default)) == hf_param_count(transformers.ReformerModel, hf_config)
  assert (our_param_count(BertForPreTraining(default)) + default.vocab_size
          == hf_param_count(transformers.ReformerForMaskedLM, hf_config))


def test_every_param_has_logical_axes_the_rules_cover():
  from tests.helpers.partition import ruled_partition_specs
  specs = ruled_partition_specs(CONFIGS["reformer_mixed_h32_l3"])
  assert tuple(specs["bert/encoder/layer_0/attention/query_key/kernel"]) == (
      "embed", "heads", "kv")


def test_bad_configs_and_lengths_are_one_line_errors():
  config = CONFIGS["reformer_mixed_h32_l3"]
  ids = np.zeros((1, 16), np.int32)
  with pytest.raises(ValueError, match="attn_layers"):
    BertModel(config.replace(attn_layers=("lsh", "global", "lsh"))).init(jax.random.key(0), ids)
  with pytest.raises(ValueError, match="axial_pos_embds_dim"):
    BertModel(config.replace(axial_pos_embds_dim=(8, 8))).init(jax.random.key(0), ids)
  with pytest.raises(ValueError, match="lsh_attention_groups=0 must be at least 1"):
    BertModel(config.replace(lsh_attention_groups=0)).init(jax.random.key(0), ids)
  with pytest.raises(ValueError, match="scan_layers=True"):
    BertModel(config.replace(scan_layers=True)).init(jax.random.key(0), ids)
  with pytest.raises(ValueError, match="exceeds the axial positions"):
    BertModel(config).init(jax.random.key(0), np.zeros((1, 20), np.int32))
  with pytest.raises(ValueError, match="is_decoder"):
    hf_families.config_from_hf({**hf_families.config_to_hf(config), "is_decoder": True})
  # Packed pretraining rows: refused when the task is made, before any data or tracing.
  from bert_jax.run import tasks
  from configs import reformer
  run = reformer.get_config("runlocal=True")
  run.data.packing = True
  with pytest.raises(ValueError, match=r"config.data.packing: the reformer family's attention "
                     r"takes no packed rows \(segment ids\); set --config.data.packing=false"):
    tasks.make_task(run, config)


# --- pretraining through the CLI ---------------------------------------------------------

@pytest.mark.slow
def test_reformer_config_pretrains_and_its_workdir_exports_to_hf(corpus, tmp_path,
                                                                  tmp_path_factory, monkeypatch):
  """configs/reformer.py (SentencePiece vocabulary learned from the corpus) pretrains with
  MLM for 8 steps through the trainer (in this process: the command line is the same
  config file's, tests/test_family_configs.py runs it for the other families), its loss
  falling; the workdir converts to an HF folder that ReformerForMaskedLM loads, with our
  MLM logits under the same rotations."""
  from bert_jax.commands.convert import convert
  from bert_jax.run import trainer
  from configs import reformer
  from tests.helpers.runs import learn_vocab, set_fields
  vocab = learn_vocab("sentencepiece", corpus, tmp_path_factory)
  workdir = str(tmp_path / "reformer")
  config = set_fields(reformer.get_config(
      f"corpus={corpus},vocab={vocab},vocab_size=1000,runlocal=True"),
      {"num_train_steps": 8, "log_every_steps": 1, "eval_every_steps": 0,
       "data.cache_dir": ""})
  trainer.train_and_evaluate(config, workdir)
  with open(tmp_path / "reformer" / "metrics.jsonl") as f:
    losses = [row["mlm_loss"] for row in map(json.loads, f) if "mlm_loss" in row]
  assert len(losses) == 8 and np.mean(losses[-2:]) < np.mean(losses[:2]), losses
  with open(tmp_path / "reformer" / "model_config.json") as f:
    model = json.load(f)
  assert (model["family"], model["attn_layers"], model["reversible"]) == (
      "reformer", ["local", "lsh"], True)
  folder = str(tmp_path / "reformer_hf")
  convert(workdir, folder, to="hf")
  hf_model = transformers.ReformerForMaskedLM.from_pretrained(folder).eval()
  model_ours, variables = load_pretrained(workdir)
  ids = np.random.default_rng(0).integers(4, 1000, size=(2, 64)).astype(np.int32)
  rotations = _rotations(model_ours.config, 64, seed=0)
  _hf_use_rotations(hf_model, rotations, monkeypatch)
  ours = model_ours.apply({**variables, "lsh_rotations": {"bert": {"encoder": rotations}}},
                          ids).mlm_logits
  with torch.no_grad():
    theirs = hf_model(input_ids=torch.tensor(ids, dtype=torch.long)).logits.numpy()
  assert max_diff(ours, theirs) < 1e-4
