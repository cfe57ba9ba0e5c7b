"""ERNIE (Sun et al. 2019; HF `Ernie*`): BERT's encoder and heads plus the task-type table,
a config of the one model code, proven equal to HF transformers.

Random-weight models of odd shapes on padded batches (fp32), with task ids (3.0's
`use_task_id`) and without (1.0's): HF -> ours and ours -> HF for ErnieModel,
ErnieForPreTraining and ErnieForMaskedLM (every hidden state, the pooled output, the MLM
and NSP logits) and for the four task classes, within 1e-5; ours -> HF -> ours
bit-identical; HF `from_pretrained` of our exports with nothing missing or unexpected;
parameter counts equal HF's at ernie-1.0-base-zh's and ernie-3.0-base-zh's released sizes.
"""
import json

import jax
import numpy as np
import pytest
from flax import linen as nn

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import hf_families, hf  # noqa: E402
from bert_jax.commands.convert import convert  # noqa: E402
from bert_jax.models import headed, specs  # noqa: E402
from bert_jax.models.bert import BertModel  # noqa: E402
from bert_jax.models.config import BertConfig, config_for_size  # noqa: E402
from bert_jax.models.headed import BertForPreTraining  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402
from tests.helpers.hf_reference import (assert_bit_identical, hf_config,  # noqa: E402
                                        hf_from_pretrained, hf_state, max_diff, perturbed,
                                        random_batch, random_hf_model)

TOL = 1e-5
CONFIGS = {
    # 3.0-style: task types (an odd count), 3 segment rows, pad id 0.
    "with_task_ids": BertConfig(
        family="ernie", vocab_size=97, hidden_size=48, num_hidden_layers=3,
        num_attention_heads=3, intermediate_size=80, max_position_embeddings=40,
        type_vocab_size=3, task_type_vocab_size=5, layer_norm_eps=1e-5),
    # 1.0-style: no task types, ReLU (ernie-1.0's activation).
    "without_task_ids": BertConfig(
        family="ernie", vocab_size=61, hidden_size=32, num_hidden_layers=2,
        num_attention_heads=4, intermediate_size=64, max_position_embeddings=24,
        hidden_act="relu", layer_norm_eps=1e-5),
}
TASK_CLASSES = dict(hf_families.FAMILIES["ernie"].task_classes)


def _task_ids(config, shape, seed):
  """int [B, T] task ids (None without a task-type table)."""
  if not config.task_type_vocab_size:
    return None
  return np.random.default_rng(seed).integers(0, config.task_type_vocab_size, shape,
                                              dtype=np.int32)


def _hf_call(model, ids, types, mask, tasks, **kwargs):
  inputs = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
            "task_type_ids": tasks}
  with torch.no_grad():
    return model(**{k: torch.tensor(v, dtype=torch.long) for k, v in inputs.items()
                    if v is not None}, **kwargs)


def _assert_encoder_parity(out, ref, mask):
  diffs = {f"hidden_states[{i}]": max_diff(a, b, mask)
           for i, (a, b) in enumerate(zip(out.hidden_states, ref.hidden_states, strict=True))}
  assert max(diffs.values()) < TOL, diffs


def _assert_pretraining_parity(out, ref, mask):
  _assert_encoder_parity(out, ref, mask)
  assert max_diff(out.mlm_logits, ref.prediction_logits, mask) < TOL
  assert max_diff(out.sentence_logits["nsp"], ref.seq_relationship_logits) < TOL


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hf_pretraining_model_to_ours_and_back(name, tmp_path):
  """ErnieForPreTraining, HF -> ours: the MLM and NSP logits and every hidden state within
  TOL, task ids read; ours -> HF: the HF class loads our export with nothing missing and
  gives our outputs; back to ours bit-identical."""
  config = CONFIGS[name]
  ids, types, mask = random_batch(config, [11, 5, 1], 11, seed=1)
  types = types % config.type_vocab_size
  tasks = _task_ids(config, ids.shape, seed=2)
  reference = random_hf_model(config, seed=0, cls_name="ErnieForPreTraining")
  state = hf.normalize_names(hf_state(reference), "t", "ernie")
  params, with_heads = hf.state_to_params(state, config, "t")
  assert with_heads and ("task_type_embeddings" in params["bert"]["embeddings"]) == (
      config.task_type_vocab_size > 0)
  model = BertForPreTraining(config)
  out = model.apply({"params": params}, ids, types, mask, output_hidden_states=True,
                    task_type_ids=tasks)
  _assert_pretraining_parity(
      out, _hf_call(reference, ids, types, mask, tasks, output_hidden_states=True), mask)
  if tasks is not None:  # the task ids change the outputs: the table is read
    other = model.apply({"params": params}, ids, types, mask,
                        task_type_ids=(tasks + 1) % config.task_type_vocab_size)
    assert max_diff(other.mlm_logits, out.mlm_logits, mask) > 1e-3

  ours = perturbed(nn.unbox(model.init(jax.random.key(3), ids)["params"]), seed=5)
  folder = str(tmp_path / "ours")
  hf.save(folder, config, ours)
  with open(f"{folder}/config.json") as f:
    raw = json.load(f)
  assert raw["architectures"] == ["ErnieForPreTraining"]
  assert raw["use_task_id"] == (config.task_type_vocab_size > 0)
  exported = hf_from_pretrained(folder, "ErnieForPreTraining")
  out = model.apply({"params": ours}, ids, types, mask, output_hidden_states=True,
                    task_type_ids=tasks)
  _assert_pretraining_parity(
      out, _hf_call(exported, ids, types, mask, tasks, output_hidden_states=True), mask)
  loaded, variables = load_pretrained(folder)
  assert loaded.config == config and type(loaded).__name__ == "BertForPreTraining"
  assert_bit_identical(ours, variables["params"])


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_masked_lm_exports_as_ernie_for_masked_lm(name, tmp_path):
  """Our encoder + MLM head without a pooler (the prompt classifier's model) is HF's
  ErnieForMaskedLM: loaded with nothing missing, the MLM logits at every position within
  TOL (task ids left to both sides' default, 0)."""
  config = CONFIGS[name]
  ids, types, mask = random_batch(config, [10, 3], 10, seed=4)
  types = types % config.type_vocab_size
  model = headed.BertForPromptClassification(config, label_token_ids=(3, 4),
                                                  mask_token_id=2)
  params = perturbed(nn.unbox(model.init(jax.random.key(1), ids)["params"]), seed=2)
  spec = {"headed_model": "prompt_classification", "label_token_ids": [3, 4],
          "mask_token_id": 2}
  hf.save(str(tmp_path / "mlm"), config, params, spec=spec)
  exported = hf_from_pretrained(str(tmp_path / "mlm"), "ErnieForMaskedLM")
  ours = model.apply({"params": params}, ids, types, mask, method="masked_lm")
  theirs = _hf_call(exported, ids, types, mask, None).logits
  assert max_diff(ours, theirs, mask) < TOL


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_hf_encoder_to_ours_and_back(name, tmp_path):
  """ErnieModel (with its pooler) both ways; load_pretrained keeps family and config."""
  config = CONFIGS[name]
  ids, types, mask = random_batch(config, [9, 4], 9, seed=3)
  types = types % config.type_vocab_size
  tasks = _task_ids(config, ids.shape, seed=4)
  reference = random_hf_model(config, seed=1, cls_name="ErnieModel")
  params, with_heads = hf.state_to_params(
      hf.normalize_names(hf_state(reference), "t", "ernie"), config, "t")
  assert not with_heads
  ref = _hf_call(reference, ids, types, mask, tasks, output_hidden_states=True)
  out = BertModel(config).apply({"params": params}, ids, types, mask,
                                output_hidden_states=True, task_type_ids=tasks)
  _assert_encoder_parity(out, ref, mask)
  assert max_diff(out.pooled_output, ref.pooler_output) < TOL

  encoder = BertModel(config)
  ours = perturbed(nn.unbox(encoder.init(jax.random.key(4), ids)["params"]), seed=6)
  hf.save(str(tmp_path / "encoder"), config, ours)
  exported = hf_from_pretrained(str(tmp_path / "encoder"), "ErnieModel")
  ref = _hf_call(exported, ids, types, mask, tasks, output_hidden_states=True)
  out = encoder.apply({"params": ours}, ids, types, mask, output_hidden_states=True,
                      task_type_ids=tasks)
  _assert_encoder_parity(out, ref, mask)
  assert max_diff(out.pooled_output, ref.pooler_output) < TOL
  loaded, variables = load_pretrained(str(tmp_path / "encoder"))
  assert loaded.config == config
  assert_bit_identical(ours, variables["params"])


def _task_outputs(out, task):
  if task == "question_answering":
    return np.asarray(out.start_logits), np.asarray(out.end_logits)
  return (np.asarray(out.logits),)


@pytest.mark.parametrize("task", sorted(TASK_CLASSES))
def test_hf_task_classes_in_and_out(task, tmp_path):
  """Each ERNIE task class loads as our headed model with HF's logits (task ids read; the
  encoder without them is the pretraining tests'); the convert CLI's export of it is HF's
  state again, tensor for tensor."""
  config, cls_name = CONFIGS["with_task_ids"], TASK_CLASSES[task]
  torch.manual_seed(len(cls_name))
  hf_cfg = hf_config(config)
  if task in ("sequence_classification", "token_classification"):
    hf_cfg.num_labels = 3
  reference = getattr(transformers, cls_name)(hf_cfg).eval()
  with torch.no_grad():  # non-zero biases and norms, so a mapping slip shows
    for p_name, p in reference.named_parameters():
      if p_name.endswith("bias") or "LayerNorm" in p_name:
        p.add_(torch.randn_like(p) * 0.1)
  reference.save_pretrained(str(tmp_path / "hf"))
  shape = (2, 3, 9) if task == "multiple_choice" else (3, 9)
  rng = np.random.default_rng(0)
  mask = (np.arange(shape[-1]) < rng.integers(3, 10, size=shape[:-1])[..., None]).astype(
      np.int32)
  ids = (rng.integers(1, config.vocab_size, size=shape) * mask).astype(np.int32)
  types = (rng.integers(0, config.type_vocab_size, size=shape) * mask).astype(np.int32)
  tasks = _task_ids(config, shape, seed=5)

  model, variables = load_pretrained(str(tmp_path / "hf"))
  assert type(model).__name__ == cls_name.replace("Ernie", "Bert")
  ours = _task_outputs(model.apply(variables, ids, types, mask, task_type_ids=tasks), task)
  # HF's ErnieForMultipleChoice flattens every input to [B * C, T] but task_type_ids,
  # which it hands to the encoder as given: it gets them flat.
  flat_tasks = tasks.reshape(-1, shape[-1]) if task == "multiple_choice" and tasks is not None \
      else tasks
  theirs = _hf_call(reference, ids, types, mask, flat_tasks)
  theirs = ((theirs.start_logits.numpy(), theirs.end_logits.numpy())
            if task == "question_answering" else (theirs.logits.numpy(),))
  for a, b in zip(ours, theirs, strict=True):
    real = mask if task in ("token_classification", "question_answering") else None
    assert max_diff(a, b, real) < TOL, task

  convert(str(tmp_path / "hf"), str(tmp_path / "ours"))
  convert(str(tmp_path / "ours"), str(tmp_path / "back"), to="hf")
  exported = hf_from_pretrained(str(tmp_path / "back"), cls_name)
  original, back = hf_state(reference), hf_state(exported)
  assert original.keys() == back.keys()
  for key in original:
    np.testing.assert_array_equal(original[key], back[key], err_msg=key)


def test_config_round_trips_and_bad_configs():
  for config in (*CONFIGS.values(), config_for_size("ernie-1.0-base-zh"),
                 config_for_size("ernie-3.0-base-zh"), config_for_size("ernie-tiny")):
    raw = hf_families.config_to_hf(config)
    assert raw["model_type"] == "ernie" and hf_families.config_from_hf(
        json.loads(json.dumps(raw))) == config
    hf_cfg = transformers.AutoConfig.for_model(raw.pop("model_type"), **raw)
    assert type(hf_cfg).__name__ == "ErnieConfig"
    assert hf_cfg.use_task_id == (config.task_type_vocab_size > 0)
  # HF's task_type_vocab_size is ignored without use_task_id.
  raw = hf_families.config_to_hf(CONFIGS["with_task_ids"])
  assert hf_families.config_from_hf({**raw, "use_task_id": False}).task_type_vocab_size == 0
  with pytest.raises(ValueError, match="task_type_vocab_size=3 has no HF BERT equivalent"):
    hf_families.config_to_hf(BertConfig(task_type_vocab_size=3))
  with pytest.raises(ValueError, match="task_type_vocab_size=2 .only the BERT architecture"):
    config_for_size("modernbert-tiny", task_type_vocab_size=2)


def _our_count(module):
  shapes = jax.eval_shape(lambda: module.init(jax.random.key(0), np.zeros((1, 8), np.int32)))
  return sum(x.size for x in jax.tree.leaves(nn.unbox(shapes["params"])))


def _hf_count(cls, hf_config):
  with torch.device("meta"):
    model = cls(hf_config)
  return sum(p.numel() for p in model.parameters())


def test_parameter_counts_equal_hf_at_the_released_sizes():
  """ernie-1.0-base-zh and ernie-3.0-base-zh: their config.json numbers, written here."""
  released = {
      "ernie-1.0-base-zh": dict(vocab_size=18000, hidden_act="relu",
                                max_position_embeddings=513, type_vocab_size=2,
                                use_task_id=False, layer_norm_eps=1e-5),
      "ernie-3.0-base-zh": dict(vocab_size=40000, max_position_embeddings=2048,
                                type_vocab_size=4, task_type_vocab_size=3, use_task_id=True,
                                layer_norm_eps=1e-5),
  }
  counts = {}
  for size, fields in released.items():
    theirs = transformers.ErnieConfig(hidden_size=768, num_hidden_layers=12,
                                      num_attention_heads=12, intermediate_size=3072, **fields)
    ours = config_for_size(size)
    assert hf_families.config_from_hf(theirs.to_dict()) == ours, size
    for model, cls in ((BertModel(ours), transformers.ErnieModel),
                       (BertForPreTraining(ours), transformers.ErnieForPreTraining),
                       (specs.build(ours, {"headed_model": "sequence_classification",
                                                "num_labels": 2}),
                        transformers.ErnieForSequenceClassification)):
      counts[size, cls.__name__] = (_our_count(model), _hf_count(cls, theirs))
  for key, (ours, theirs) in counts.items():
    assert ours == theirs, (key, ours, theirs)
  assert counts["ernie-3.0-base-zh", "ErnieModel"][0] == 117_944_832  # HF: the same
