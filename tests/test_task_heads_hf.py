"""Fine-tuned headed models in and out of HF: BertForSequenceClassification and its kin.

For every family and task whose HF head is ours (weights/hf_families.py `task_classes`), a
random HF model of odd shapes loads as our headed model with the HF logits (1e-5, fp32, a
padded batch), and our export of it is the HF state again, tensor for tensor, loaded by
the HF class with nothing missing or unexpected. HF classes whose heads differ are
refused in one line.
"""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import hf_families, hf  # noqa: E402
from bert_jax.commands.convert import convert  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402
from tests.helpers.family_tables import TINY_MEMBERS  # noqa: E402
from tests.helpers.hf_reference import hf_config, hf_state  # noqa: E402

TOL = 1e-5
NUM_LABELS = 3
CONFIGS = TINY_MEMBERS
CASES = [(name, task, cls) for name, config in CONFIGS.items()
         for task, cls in hf_families.FAMILIES[config.family].task_classes]
HF_NAMES = {"bert": "Bert", "roberta": "Roberta", "albert": "Albert", "electra": "Electra",
            "distilbert": "DistilBert", "modernbert": "ModernBert"}


def _random_hf(config, cls_name, seed, **hf_fields):
  torch.manual_seed(seed)
  hf_cfg = hf_config(config)
  if not cls_name.endswith(("QuestionAnswering", "MultipleChoice")):  # those read 2 / 1
    hf_cfg.num_labels = NUM_LABELS
  for field, value in hf_fields.items():
    setattr(hf_cfg, field, value)
  model = getattr(transformers, cls_name)(hf_cfg).eval()
  with torch.no_grad():  # non-zero biases and norms, so a mapping slip shows
    for name, p in model.named_parameters():
      if name.endswith("bias") or "LayerNorm" in name or "norm" in name:
        p.add_(torch.randn_like(p) * 0.1)
  return model


def _batch(config, task, seed=0):
  """ids / types / mask [B, T] ([B, C, T] for multiple choice); padding is the pad id."""
  rng = np.random.default_rng(seed)
  shape = (2, 3, 9) if task == "multiple_choice" else (3, 9)
  lengths = rng.integers(3, 10, size=shape[:-1])
  mask = (np.arange(shape[-1]) < lengths[..., None]).astype(np.int32)
  ids = rng.integers(config.pad_token_id + 1, config.vocab_size, size=shape)
  ids = np.where(mask == 1, ids, config.pad_token_id).astype(np.int32)
  types = (rng.integers(0, 2, size=shape) * mask).astype(np.int32)
  if config.type_vocab_size < 2:
    types = np.zeros_like(types)
  return ids, types, mask


def _hf_outputs(model, config, task, ids, types, mask):
  kwargs = {"input_ids": torch.tensor(ids, dtype=torch.long),
            "attention_mask": torch.tensor(mask, dtype=torch.long)}
  if config.type_vocab_size:
    kwargs["token_type_ids"] = torch.tensor(types, dtype=torch.long)
  with torch.no_grad():
    out = model(**kwargs)
  if task == "question_answering":
    return out.start_logits.numpy(), out.end_logits.numpy()
  return (out.logits.numpy(),)


def _our_outputs(model, variables, task, ids, types, mask):
  out = model.apply(variables, ids, types, mask)
  if task == "question_answering":
    return np.asarray(out.start_logits), np.asarray(out.end_logits)
  return (np.asarray(out.logits),)


def _assert_close(ours, theirs, task, mask):
  for a, b in zip(ours, theirs):
    assert a.shape == b.shape
    diff = np.abs(a - b)
    if task in ("token_classification", "question_answering"):  # real tokens only
      diff = diff * mask.reshape(mask.shape + (1,) * (diff.ndim - mask.ndim))
    assert diff.max() < TOL, (task, float(diff.max()))


@pytest.mark.slow
@pytest.mark.parametrize("name, task, cls_name", CASES)
def test_hf_headed_model_in_and_out(name, task, cls_name, tmp_path):
  _check_in_and_out(CONFIGS[name], task, cls_name, tmp_path)


def test_modernbert_mean_pooled_classifier_in_and_out(tmp_path):
  """HF ModernBERT's classifier_pooling="mean" is our pooling="mean", both ways."""
  model = _check_in_and_out(CONFIGS["modernbert_biases"], "sequence_classification",
                            "ModernBertForSequenceClassification", tmp_path,
                            classifier_pooling="mean")
  assert model.pooling == "mean"


def _check_in_and_out(config, task, cls_name, tmp_path, **hf_fields):
  reference = _random_hf(config, cls_name, seed=len(cls_name), **hf_fields)
  reference.save_pretrained(str(tmp_path / "hf"))
  ids, types, mask = _batch(config, task)

  model, variables = load_pretrained(str(tmp_path / "hf"))
  assert model.__class__.__name__ == cls_name.replace(HF_NAMES[config.family], "Bert")
  if task in ("sequence_classification", "token_classification"):
    assert model.num_labels == NUM_LABELS
  _assert_close(_our_outputs(model, variables, task, ids, types, mask),
                _hf_outputs(reference, config, task, ids, types, mask), task, mask)

  # Through the convert CLI both ways: our saved model records the task; its HF export is
  # the original state again, which the HF class loads with nothing missing.
  convert(str(tmp_path / "hf"), str(tmp_path / "ours"))
  convert(str(tmp_path / "ours"), str(tmp_path / "back"), to="hf")
  with open(tmp_path / "back" / "config.json") as f:
    raw = json.load(f)
  assert raw["architectures"] == [cls_name]
  back, info = getattr(transformers, cls_name).from_pretrained(
      str(tmp_path / "back"), output_loading_info=True, attn_implementation="eager")
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  original, exported = hf_state(reference), hf_state(back)
  assert original.keys() == exported.keys()
  for name in original:
    np.testing.assert_array_equal(original[name], exported[name], err_msg=name)
  for field, value in hf_fields.items():
    assert raw[field] == value
  return model


def test_hf_heads_unlike_ours_are_refused_in_one_line(tmp_path):
  # ELECTRA's multiple-choice summary is our pooler only with ElectraConfig's defaults.
  _random_hf(CONFIGS["electra"], "ElectraForMultipleChoice", 0,
             summary_type="last").save_pretrained(str(tmp_path / "electra"))
  with pytest.raises(ValueError, match="summary_type='last' is not supported for "
                                       "ElectraForMultipleChoice"):
    load_pretrained(str(tmp_path / "electra"))
  # A task class of another family than model_type's.
  folder = _saved(tmp_path, CONFIGS["roberta"], "RobertaForSequenceClassification")
  with open(folder / "config.json") as f:
    raw = json.load(f)
  with open(folder / "config.json", "w") as f:
    json.dump({**raw, "architectures": ["BertForSequenceClassification"]}, f)
  with pytest.raises(ValueError, match="BertForSequenceClassification's head is not one of "
                                       "ours.*heads='none'"):
    load_pretrained(str(folder))
  model, _ = load_pretrained(str(folder), heads="none")
  assert model.__class__.__name__ == "BertModel"
  # Our mean-pooled BERT classifier has no HF class (ModernBERT's has: classifier_pooling).
  config = CONFIGS["bert"]
  _, variables = load_pretrained(str(_saved(tmp_path, config)))
  with pytest.raises(ValueError, match="pooling='mean' has no HF class"):
    hf.save(str(tmp_path / "out"), config, variables["params"],
            spec={"headed_model": "sequence_classification", "num_labels": NUM_LABELS,
                  "pooling": "mean"})
  with pytest.raises(ValueError, match="HF bert has no class with our "
                                       "replaced_token_detection head"):
    hf._export_spec({"headed_model": "replaced_token_detection"}, config)


def _saved(tmp_path, config, cls_name="BertForSequenceClassification"):
  folder = tmp_path / cls_name
  _random_hf(config, cls_name, 1).save_pretrained(str(folder))
  return folder



def test_modernbert_prediction_head_starts_from_the_mlm_transform_as_hf(tmp_path):
  """HF's ModernBertForSequenceClassification.from_pretrained of an MLM folder loads the
  MLM head's transform into its prediction head (both are `head.*`); our init_from does the same,
  so fine-tuning starts where HF's does: every tensor but the fresh classifier equal."""
  import jax
  from flax import linen as nn
  from bert_jax import weights
  from bert_jax.models import specs
  config = CONFIGS["modernbert_biases"]
  _random_hf(config, "ModernBertForMaskedLM", 0).save_pretrained(str(tmp_path / "mlm"))
  theirs = transformers.ModernBertForSequenceClassification.from_pretrained(
      str(tmp_path / "mlm"), num_labels=NUM_LABELS, attn_implementation="eager")
  spec = {"headed_model": "sequence_classification", "num_labels": NUM_LABELS}
  fresh = nn.unbox(specs.build(config, spec).init(
      jax.random.key(0), np.zeros((1, 4), np.int32))["params"])
  params, notes = weights.init_params(fresh, str(tmp_path / "mlm"), config)
  assert any("prediction head from the checkpoint's mlm_head transform" in n for n in notes), notes
  ours, expected = hf.params_to_state(params, config, spec), hf_state(theirs)
  assert ours.keys() == expected.keys()
  for name in ours:
    if not name.startswith("classifier."):
      np.testing.assert_array_equal(ours[name], expected[name], err_msg=name)


@pytest.mark.parametrize("num_labels", [NUM_LABELS, 2])
def test_init_from_a_fine_tuned_model_of_another_label_count(num_labels, tmp_path):
  """Intermediate-task transfer (e.g. MNLI's 3 classes, then RTE's 2): the encoder and pooler
  come from the fine-tuned checkpoint; its classifier too where the shapes fit, else the
  model's fresh one stays (HF's ignore_mismatched_sizes), with a note naming both shapes."""
  import jax
  from flax import linen as nn
  from bert_jax import weights
  from bert_jax.models import specs
  config = CONFIGS["bert"]
  folder = _saved(tmp_path, config)  # BertForSequenceClassification, 3 labels
  _, loaded = load_pretrained(str(folder))
  fresh = nn.unbox(specs.build(config, {"headed_model": "sequence_classification",
                                             "num_labels": num_labels}).init(
      jax.random.key(1), np.zeros((1, 4), np.int32))["params"])
  params, notes = weights.init_params(fresh, str(folder), config)
  expected = loaded["params"] if num_labels == NUM_LABELS else {**loaded["params"],
                                                                "classifier": fresh["classifier"]}
  for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(expected)):
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
  mismatch = [n for n in notes if n.startswith("newly initialised classifier:")]
  if num_labels == NUM_LABELS:
    assert not mismatch, notes
  else:
    assert mismatch == ["newly initialised classifier: the checkpoint's has the shapes "
                        "{'dense/bias': (3,), 'dense/kernel': (36, 3)}, the model's "
                        "{'dense/bias': (2,), 'dense/kernel': (36, 2)}"], notes
