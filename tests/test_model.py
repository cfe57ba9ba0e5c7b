"""The encoder and heads: sizes, parameter counts, layouts, dtypes, headed models."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from bert_jax.models import headed, specs
from bert_jax.models.config import BertConfig, config_for_size
from bert_jax.models.bert import BertModel
from bert_jax.models.dropout import dropout, dropout_keep_mask, random_words
from bert_jax.models.layers import attention_probs
from bert_jax.models.layout import stack_layers, unstack_layers

SMALL = BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                   intermediate_size=32, max_position_embeddings=12)
IDS = jnp.array([[2, 3, 4, 5, 0, 0], [6, 7, 8, 9, 10, 11]], jnp.int32)
MASK = (IDS > 0).astype(jnp.int32)


def _count(module, ids=IDS):
  shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), ids))
  return sum(x.size for x in jax.tree.leaves(nn.unbox(shapes["params"])))


@pytest.mark.parametrize("size,cls,expected", [
    ("base", headed.BertForPreTraining, 110_106_428),
    ("base", BertModel, 109_482_240),
    ("large", BertModel, 335_141_888),
])
def test_exact_parameter_counts(size, cls, expected):
  assert _count(cls(config_for_size(size))) == expected


def test_every_param_has_logical_axes():
  boxed = jax.eval_shape(lambda: headed.BertForPreTraining(SMALL).init(jax.random.key(0), IDS))
  leaves = jax.tree.leaves(boxed["params"], is_leaf=lambda x: isinstance(x, nn.Partitioned))
  assert leaves and all(isinstance(x, nn.LogicallyPartitioned) for x in leaves)
  specs = nn.get_partition_spec(boxed)["params"]
  embedding = specs["bert"]["embeddings"]["word_embeddings"]["embedding"]
  assert embedding == jax.sharding.PartitionSpec("vocab", "embed")
  q = specs["bert"]["encoder"]["layer_0"]["attention"]["query"]["kernel"]
  assert q == jax.sharding.PartitionSpec("embed", "heads", "kv")


@pytest.mark.slow
def test_scan_and_remat_match_unrolled():
  model = headed.BertForPreTraining(SMALL)
  params = nn.unbox(model.init(jax.random.key(1), IDS)["params"])
  ref = model.apply({"params": params}, IDS, None, MASK, output_hidden_states=True)
  for changes in (dict(scan_layers=True), dict(remat_policy="full"),
                  dict(scan_layers=True, remat_policy="dots")):
    cfg = SMALL.replace(**changes)
    p = stack_layers(params, SMALL.num_hidden_layers) if cfg.scan_layers else params
    out = headed.BertForPreTraining(cfg).apply({"params": p}, IDS, None, MASK,
                                              output_hidden_states=True)
    np.testing.assert_allclose(out.mlm_logits, ref.mlm_logits, atol=1e-5, err_msg=str(changes))
    np.testing.assert_allclose(out.hidden_states[1], ref.hidden_states[1], atol=1e-5)
  # Gradients through the scanned+remat model match too.
  loss = lambda m, p: m.apply({"params": p}, IDS, None, MASK).mlm_logits.sum()  # noqa: E731
  g_ref = jax.grad(lambda p: loss(model, p))(params)
  cfg = SMALL.replace(scan_layers=True, remat_policy="full")
  g_scan = jax.grad(lambda p: loss(headed.BertForPreTraining(cfg), p))(
      stack_layers(params, SMALL.num_hidden_layers))
  g_scan = unstack_layers(g_scan, SMALL.num_hidden_layers)
  for a, b in zip(jax.tree.leaves(g_ref), jax.tree.leaves(g_scan)):
    np.testing.assert_allclose(a, b, atol=1e-4)


def test_attention_probs_are_returned_on_request():
  model = headed.BertForPreTraining(SMALL)
  params = nn.unbox(model.init(jax.random.key(1), IDS)["params"])
  plain = model.apply({"params": params}, IDS, None, MASK)
  out, state = model.apply({"params": params}, IDS, None, MASK, mutable=["intermediates"])
  np.testing.assert_array_equal(out.mlm_logits, plain.mlm_logits)
  probs = attention_probs(state["intermediates"], SMALL.num_hidden_layers)
  assert len(probs) == 2 and probs[0].shape == (2, 2, 6, 6)  # [B, N, F, T]
  np.testing.assert_allclose(probs[1].sum(-1), 1.0, atol=1e-6)
  assert float(probs[0][0, :, :, 4:].max()) == 0.0  # padding keys get no weight
  scan = SMALL.replace(scan_layers=True)
  _, scan_state = headed.BertForPreTraining(scan).apply(
      {"params": stack_layers(params, 2)}, IDS, None, MASK, mutable=["intermediates"])
  for a, b in zip(probs, attention_probs(scan_state["intermediates"], 2)):
    np.testing.assert_allclose(a, b, atol=1e-6)


def test_pre_layer_norm_variant():
  # initializer_range 0.5: sub-layer outputs as large as the residual, so LN placement shows.
  pre = SMALL.replace(pre_layer_norm=True, initializer_range=0.5)
  params = nn.unbox(headed.BertForPreTraining(pre).init(jax.random.key(1), IDS)["params"])
  post_cfg = pre.replace(pre_layer_norm=False)
  post_params = nn.unbox(headed.BertForPreTraining(post_cfg).init(jax.random.key(1), IDS)["params"])
  encoder = params["bert"]["encoder"]
  assert set(encoder) == set(post_params["bert"]["encoder"]) | {"final_layer_norm"}
  out = headed.BertForPreTraining(pre).apply({"params": params}, IDS, None, MASK,
                                            output_hidden_states=True)
  post = headed.BertForPreTraining(post_cfg).apply({"params": post_params}, IDS, None, MASK)
  assert np.abs(out.sequence_output - post.sequence_output).max() > 0.1
  # The last hidden state is the final LayerNorm's output: zero mean, unit variance rows.
  np.testing.assert_allclose(out.sequence_output.mean(-1), 0.0, atol=1e-5)
  np.testing.assert_array_equal(out.hidden_states[-1], out.sequence_output)
  # Scanned layers give the same outputs.
  scan = pre.replace(scan_layers=True)
  stacked = stack_layers(params, pre.num_hidden_layers)
  assert unstack_layers(stacked, pre.num_hidden_layers)["bert"]["encoder"].keys() == encoder.keys()
  scanned = headed.BertForPreTraining(scan).apply({"params": stacked}, IDS, None, MASK)
  np.testing.assert_allclose(scanned.mlm_logits, out.mlm_logits, atol=1e-5)
  with pytest.raises(ValueError, match="pre_layer_norm=True has no HF BERT equivalent"):
    pre.to_hf_dict()


def test_bfloat16_compute_keeps_float32_params_and_close_outputs():
  model = headed.BertForPreTraining(SMALL)
  params = nn.unbox(model.init(jax.random.key(2), IDS)["params"])
  assert all(x.dtype == jnp.float32 for x in jax.tree.leaves(params))
  ref = model.apply({"params": params}, IDS, None, MASK)
  out = headed.BertForPreTraining(SMALL.replace(dtype="bfloat16")).apply(
      {"params": params}, IDS, None, MASK)
  assert out.sequence_output.dtype == jnp.bfloat16
  assert out.mlm_logits.dtype == jnp.float32
  np.testing.assert_allclose(out.mlm_logits, ref.mlm_logits, atol=0.1)


def test_dropout_is_off_by_default_and_seeded_when_on():
  model = BertModel(SMALL)
  params = model.init(jax.random.key(0), IDS)
  a = model.apply(params, IDS).sequence_output
  np.testing.assert_array_equal(a, model.apply(params, IDS).sequence_output)
  rng = {"dropout": jax.random.key(5)}
  b = model.apply(params, IDS, deterministic=False, rngs=rng).sequence_output
  c = model.apply(params, IDS, deterministic=False, rngs=rng).sequence_output
  np.testing.assert_array_equal(b, c)
  assert not np.allclose(a, b)


@pytest.mark.parametrize("rate", [0.1, 0.3])
def test_dropout_masks_drop_at_the_rate_independently_and_keep_the_expectation(rate):
  shape = (64, 12, 127)  # an odd last axis: its last word gives one half only
  keep, keep_prob = dropout_keep_mask(jax.random.key(3), rate, shape)
  keep = np.asarray(keep)
  assert keep.shape == shape and abs(keep_prob - (1 - rate)) < 1 / 65536
  # 97,536 draws: the kept share is within 4 standard deviations (0.6% at 0.1) of it.
  assert abs(keep.mean() - keep_prob) < 4 * np.sqrt(keep_prob * (1 - keep_prob) / keep.size)
  # The two halves of one 32-bit word, and neighbours across words, are independent.
  for a, b in ((keep[..., 0:126:2], keep[..., 1:127:2]), (keep[..., 1:126:2], keep[..., 2:127:2])):
    both = (a & b).mean()
    assert abs(both - keep_prob ** 2) < 4 * np.sqrt(keep_prob ** 2 / a.size), both
  # Every position along the paired axis (the odd last one too) keeps its share, and rows
  # differ.
  columns = keep.reshape(-1, 127).mean(axis=0)  # 768 draws each
  assert np.abs(columns - keep_prob).max() < 5 * np.sqrt(keep_prob * (1 - keep_prob) / 768)
  assert len({r.tobytes() for r in keep.reshape(-1, 127)}) > 700
  x = jnp.full(shape, 2.0)
  y = np.asarray(dropout(x, rate, jax.random.key(3)))
  np.testing.assert_allclose(y[keep], 2.0 / keep_prob, rtol=1e-6)
  assert (y[~keep] == 0).all()
  np.testing.assert_array_equal(y, dropout(x, rate, jax.random.key(3)))
  assert not np.array_equal(y, dropout(x, rate, jax.random.key(4)))


@pytest.mark.parametrize("key", [jax.random.key(0), jax.random.fold_in(jax.random.key(5), 9),
                                 jax.random.PRNGKey(7)])  # typed keys and a raw uint32 one
def test_dropout_bits_are_jax_random_bits(key):
  """random_words writes threefry out round by round: jax.random.bits's exact words, eager
  and jitted, so the masks did not change with it (the 16-bit halves of each word: low,
  then high, as a little-endian bitcast)."""
  for shape in [(1,), (7,), (3, 5), (2, 3, 16, 33)]:
    want = np.asarray(jax.random.bits(key, shape, jnp.uint32))
    np.testing.assert_array_equal(random_words(key, shape), want)
    np.testing.assert_array_equal(jax.jit(random_words, static_argnums=1)(key, shape), want)
  shape, threshold = (4, 6, 9), round(0.9 * 65536)
  words = jax.random.bits(key, (4, 6, 5), jnp.uint32)
  halves = np.asarray(jax.lax.bitcast_convert_type(words, jnp.uint16)).reshape(4, 6, 10)[..., :9]
  keep, _ = dropout_keep_mask(key, 0.1, shape)
  np.testing.assert_array_equal(keep, halves < threshold)


def test_dropout_edge_rates():
  x = jnp.ones((4, 5))
  np.testing.assert_array_equal(dropout(x, 0.0, jax.random.key(0)), x)
  np.testing.assert_array_equal(dropout(x, 0.5, None), x)
  np.testing.assert_array_equal(dropout(x, 1.0, jax.random.key(0)), jnp.zeros_like(x))
  assert np.asarray(dropout(x, 1e-9, jax.random.key(0))).min() == 1.0  # keeps all: 65536/65536


def test_padding_does_not_change_real_tokens():
  model = BertModel(SMALL)
  params = model.init(jax.random.key(0), IDS)
  short = model.apply(params, IDS[:1, :4], None, MASK[:1, :4]).sequence_output
  padded = model.apply(params, IDS[:1], None, MASK[:1]).sequence_output[:, :4]
  np.testing.assert_allclose(short, padded, atol=1e-6)


@pytest.mark.parametrize("make,shape", [
    (lambda: headed.BertForSequenceClassification(SMALL, num_labels=3), (2, 3)),
    (lambda: headed.BertForSequenceClassification(SMALL, num_labels=1), (2, 1)),
    (lambda: headed.BertForTokenClassification(SMALL, num_labels=9), (2, 6, 9)),
])
def test_classifier_heads(make, shape):
  model = make()
  variables = model.init(jax.random.key(0), IDS, None, MASK)
  assert model.apply(variables, IDS, None, MASK).logits.shape == shape


def test_mean_pooling_classifier_reads_the_mean_of_the_real_tokens():
  model = headed.BertForSequenceClassification(SMALL, num_labels=2, pooling="mean")
  variables = nn.unbox(model.init(jax.random.key(0), IDS, None, MASK))
  assert "pooler" not in variables["params"]["bert"]  # nothing is built that is not read
  logits = model.apply(variables, IDS, None, MASK).logits
  tokens = BertModel(SMALL, add_pooling_layer=False).apply(
      {"params": variables["params"]["bert"]}, IDS, None, MASK).sequence_output
  head = variables["params"]["classifier"]["dense"]
  for row, length in enumerate((4, 6)):
    mean = np.asarray(tokens[row, :length]).mean(0)  # plain numpy over the real tokens
    np.testing.assert_allclose(logits[row], mean @ head["kernel"] + head["bias"], atol=1e-5)
  # More padding changes nothing: the first row again, padded to 9 positions.
  longer = jnp.pad(IDS[:1], ((0, 0), (0, 3)))
  np.testing.assert_allclose(model.apply(variables, longer, None, longer > 0).logits[0],
                             logits[0], atol=1e-5)
  with pytest.raises(ValueError, match="config.classifier_pooling='max'"):
    headed.BertForSequenceClassification(SMALL, num_labels=2, pooling="max").init(
        jax.random.key(0), IDS, None, MASK)


def test_question_answering_and_multiple_choice():
  qa = headed.BertForQuestionAnswering(SMALL)
  out = qa.apply(qa.init(jax.random.key(0), IDS), IDS)
  assert out.start_logits.shape == out.end_logits.shape == (2, 6)
  choices = jnp.stack([IDS, IDS[::-1], IDS], axis=1)  # [B=2, C=3, T=6]
  mc = headed.BertForMultipleChoice(SMALL)
  variables = mc.init(jax.random.key(0), choices)
  logits = mc.apply(variables, choices).logits
  assert logits.shape == (2, 3)
  np.testing.assert_allclose(logits[0, 0], logits[0, 2], atol=1e-6)  # same text, same score


def test_config_errors_are_clear():
  with pytest.raises(ValueError, match="not divisible"):
    BertConfig(hidden_size=10, num_attention_heads=3)
  with pytest.raises(ValueError, match="hidden_act"):
    BertConfig(hidden_act="swish")
  with pytest.raises(ValueError, match="max_position_embeddings=12"):
    BertModel(SMALL).init(jax.random.key(0), jnp.zeros((1, 13), jnp.int32))
  with pytest.raises(ValueError, match="Unknown model size"):
    config_for_size("huge")


def test_projection_init_starts_the_first_layer_input_at_the_chosen_scale():
  """ALBERT's E -> H projection: "normal" is HF's truncated normal at initializer_range
  (the same draws as before the field existed), "fan_in" is normal at 1/sqrt(E), so the
  projected embeddings start at unit scale; init only, so the layer-0 input of given
  params does not depend on it."""
  ids = jnp.asarray(np.random.default_rng(0).integers(0, 100, (4, 16)), jnp.int32)
  stds, params = {}, {}
  for init in ("normal", "fan_in"):
    config = config_for_size("albert-tiny", vocab_size=100, embedding_size=64,
                             projection_init=init)
    model = BertModel(config)
    params[init] = nn.unbox(model.init(jax.random.key(0), ids)["params"])
    kernel = params[init]["embeddings"]["projection"]["kernel"]
    stds[init] = float(jnp.std(kernel))
    layer0_input = model.apply({"params": params[init]}, ids, method=lambda m, x: m.embeddings(
        x, jnp.zeros_like(x), True))
    stds[init + "_input"] = float(jnp.std(layer0_input))
  assert 0.015 < stds["normal"] < 0.025
  assert abs(stds["fan_in"] - 64 ** -0.5) < 0.1 * 64 ** -0.5
  assert stds["normal_input"] < 0.3 < 0.8 < stds["fan_in_input"] < 1.2
  # Every other param starts the same; the init changes the starting point only.
  same = jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), params["normal"],
                      params["fan_in"])
  assert same["embeddings"]["word_embeddings"]["embedding"] and not same["embeddings"][
      "projection"]["kernel"]
  with pytest.raises(ValueError, match="projection_init='lecun' is not one of"):
    BertConfig(projection_init="lecun")


def test_a_recorded_spec_with_the_old_key_is_read_and_a_given_one_refused():
  """model_config.json's "model" spec written before "headed_model" (old key "task_model") reads
  as today's; a spec given to `build` with the old key is a one-line pointer to the new."""
  old = {"task_model": "sequence_classification", "num_labels": 3}
  assert specs.recorded_spec(old) == {"headed_model": "sequence_classification",
                                      "num_labels": 3}
  assert specs.recorded_spec({"headed_model": "encoder"}) == {"headed_model": "encoder"}
  assert specs.recorded_spec(None) is None
  model = specs.build(SMALL, specs.recorded_spec(old))
  assert isinstance(model, headed.BertForSequenceClassification) and model.num_labels == 3
  with pytest.raises(ValueError, match=(r"^model spec \{'task_model': "  # the old key
                                        r"'sequence_classification'\}: the key is now "
                                        r"'headed_model'$")):
    specs.build(SMALL, old)
