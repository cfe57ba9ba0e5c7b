"""Prompt-based fine-tuning (headed.BertForPromptClassification, GLUE's
config.data.prompt_template / prompt_verbalizer): the class logits are exactly the MLM
head's at the template's mask, packed rows give each example its unpacked logits, the
template lands as the second segment with one mask, and bad templates or verbalizers fail
in one line."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import linen as nn

from bert_jax.finetune import glue_reader, example_packing
from bert_jax.models.config import BertConfig
from bert_jax.models.headed import BertForPreTraining, BertForPromptClassification

MASK, VERBALIZER = 4, (7, 11)


def _config(family):
  return BertConfig(vocab_size=40, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=20, family=family,
                    type_vocab_size=2 if family == "bert" else 1,
                    pad_token_id=0 if family == "bert" else 1,
                    global_attn_every_n_layers=2, local_attention=4)


def _rows(pad_id, n=9, seq=12, seed=0):
  """[CLS]=2 words [SEP]=3 words-with-one-mask [SEP]=3 rows of lengths 5..seq."""
  rng = np.random.default_rng(seed)
  ids = np.full((n, seq), pad_id, np.int32)
  types = np.zeros((n, seq), np.int32)
  lengths = rng.integers(5, seq + 1, size=n)
  for i, length in enumerate(lengths):
    ids[i, :length] = rng.integers(5, 40, size=length)  # never the mask id 4
    split = int(rng.integers(2, length - 2))
    ids[i, 0], ids[i, split], ids[i, length - 1] = 2, 3, 3
    ids[i, rng.integers(split + 1, length - 1)] = MASK
    types[i, split + 1:length] = 1
  mask = (np.arange(seq)[None] < lengths[:, None]).astype(np.int32)
  return {"input_ids": ids, "token_type_ids": types, "attention_mask": mask,
          "label": rng.integers(0, 2, size=n).astype(np.int32)}


@pytest.mark.slow
@pytest.mark.parametrize("family", ("bert", "roberta", "modernbert"))
def test_prompt_logits_are_the_mlm_heads_at_the_mask_packed_or_not(family):
  config = _config(family)
  features = _rows(config.pad_token_id)
  pretraining = BertForPreTraining(config)
  params = nn.unbox(pretraining.init(jax.random.key(0), jnp.asarray(features["input_ids"]))
                    ["params"])
  prompt = BertForPromptClassification(config, label_token_ids=VERBALIZER, mask_token_id=MASK)
  own = nn.unbox(prompt.init(jax.random.key(1), jnp.asarray(features["input_ids"]))["params"])
  # No params of its own: the encoder (less any pooler) and the MLM head, by the same names.
  assert set(own) == {"bert", "mlm_head"}
  shared = {"bert": {k: v for k, v in params["bert"].items() if k != "pooler"},
            "mlm_head": params["mlm_head"]}
  assert jax.tree.map(np.shape, own) == jax.tree.map(np.shape, shared)
  inputs = [jnp.asarray(features[k]) for k in example_packing.TOKEN_KEYS]
  positions = np.argmax(features["input_ids"] == MASK, axis=1)[:, None].astype(np.int32)
  reference = pretraining.apply({"params": params}, *inputs, jnp.asarray(positions)).mlm_logits
  logits = prompt.apply({"params": shared}, *inputs).logits  # [N, 2]
  np.testing.assert_allclose(np.asarray(logits),
                             np.asarray(reference)[:, 0][:, list(VERBALIZER)], atol=1e-5)
  # masked_lm (what fill_mask shows): the whole vocabulary's logits, as the MLM model's.
  np.testing.assert_allclose(np.asarray(prompt.apply({"params": shared}, *inputs, positions,
                                                     method="masked_lm")),
                             np.asarray(reference), atol=1e-5)
  packed = example_packing.pack(features, max_per_row=3, pad_id=config.pad_token_id)
  out = prompt.apply({"params": shared}, *(jnp.asarray(packed[k]) for k in example_packing.TOKEN_KEYS),
                     packing={k: jnp.asarray(packed[k]) for k in example_packing.PACKING_KEYS})
  real = packed["example_mask"] > 0
  np.testing.assert_allclose(np.asarray(out.logits)[real],
                             np.asarray(logits)[packed["example_index"][real]], atol=1e-5)


def _example(a, b=None, label="1"):
  return glue_reader.GlueExample(guid="g", text_a=a, text_b=b, label=label, provenance="t:1")


def test_template_is_the_second_segment_with_one_mask(tokenizer):
  single = [_example("a gripping , funny film"), _example("dull", label="0")]
  features = glue_reader.featurize(single, "sst2", tokenizer, 16, "it was {mask} .")
  for row, example in zip(features["input_ids"], single):
    tokens = [tokenizer.vocab[i] for i in row if i != tokenizer.pad_id]
    words = tokenizer.encode([example.text_a])[0]
    assert tokens == (["[CLS]"] + [tokenizer.vocab[i] for i in words]
                      + ["[SEP]", "it", "was", "[MASK]", ".", "[SEP]"])
  pair = [_example("he came home .", "he went out .")]
  row = glue_reader.featurize(pair, "mrpc", tokenizer, 32, "{mask} , {b}")["input_ids"][0]
  tokens = [tokenizer.vocab[i] for i in row if i != tokenizer.pad_id]
  assert tokens[tokens.index("[SEP]"):] == ["[SEP]", "[MASK]", ",", "he", "went", "out", ".",
                                            "[SEP]"]
  # Longest-first truncation cuts the sentence, not the template.
  long = [_example(" ".join(["good"] * 40))]
  row = glue_reader.featurize(long, "sst2", tokenizer, 16, "it was {mask} .")["input_ids"][0]
  assert list(row).count(tokenizer.mask_id) == 1 and len(row) == 16


@pytest.mark.parametrize("dataset,template,texts,length,error", [
    ("sst2", "it was .", ("fine",), 16, "expected exactly one {mask}"),
    ("sst2", "{mask} , {b}", ("fine",), 16, "a single-sentence task has no {b}"),
    ("mrpc", "it was {mask} .", ("a", "b"), 16, "a pair task's template must hold {b}"),
    ("sst2", "it was {mask} .", ("a [MASK] film",), 16, "t:1: the prompted example holds 2 "
     "mask tokens instead of one (1 such examples"),
    ("sst2", "it was a long long long long long {mask} .", ("fine film",), 8,
     "holds 0 mask tokens instead of one")])
def test_bad_templates_fail_in_one_line(tokenizer, dataset, template, texts, length, error):
  with pytest.raises(ValueError, match=error.replace("{", r"\{").replace("}", r"\}")
                     .replace("(", r"\(")):
    glue_reader.featurize([_example(*texts)], dataset, tokenizer, length, template)


@pytest.mark.parametrize("verbalizer,dataset,error", [
    ("great", "sst2", r"expected 2 comma-separated words, one per label \['0', '1'\]"),
    ("terrible,,great", "sst2", "expected 2 comma-separated words"),
    ("terrible,greatishly", "sst2",
     r"'greatishly' is \d tokens of this tokenizer; each label word must be one"),
    ("low,high", "stsb", "stsb is regression"),
    ("great,Great", "sst2", "two labels have the same token"),
    ("bad,good", "sst2 feature_layers=-2,-1", "config.feature_layers='-2,-1': a prompt-based"),
    ("bad,good", "sst2 freeze_encoder=True", "config.freeze_encoder=True: a prompt-based"),
    ("bad,good", "sst2 classifier_pooling=mean", "config.classifier_pooling='mean': a prompt")])
def test_bad_verbalizers_and_options_fail_in_one_line(vocab_path, verbalizer, dataset, error):
  from bert_jax.finetune.glue import GlueTask
  from configs import glue
  dataset, *option = dataset.split()
  config = glue.get_config(f"dataset={dataset},runlocal=True")
  config.init_from, config.data.vocab_path = "", vocab_path
  for field, value in (o.split("=") for o in option):
    config[field] = {"True": True}.get(value, value)
  config.data.prompt_template = "it was {mask} ."
  config.data.prompt_verbalizer = verbalizer
  with pytest.raises(ValueError, match=error):
    GlueTask(config, _config("bert")).model_spec()
  config.data.prompt_verbalizer = "terrible, great"
  if dataset == "sst2" and not option:
    spec = GlueTask(config, _config("bert")).model_spec()
    from bert_jax.text.wordpiece import WordPieceTokenizer
    vocab = WordPieceTokenizer(vocab_path).vocab
    assert spec["headed_model"] == "prompt_classification"
    assert [vocab[i] for i in spec["label_token_ids"]] == ["terrible", "great"]
    assert vocab[spec["mask_token_id"]] == "[MASK]"


@pytest.mark.slow
def test_prompt_fine_tuning_starts_from_the_checkpoints_mlm_head(tmp_path, vocab_path):
  """Through the trainer (SST-2 runlocal, 2 steps at lr 0, from a tiny BERT saved as an HF
  folder): every param of the prompt model comes from the checkpoint, the MLM head
  included, and the workdir reloads as the prompt classifier with its spec."""
  from bert_jax.weights import checkpoint
  from bert_jax.run import trainer
  from bert_jax.weights import hf
  from bert_jax.models.config import config_for_size
  from bert_jax.text.wordpiece import WordPieceTokenizer
  from bert_jax.weights import load_pretrained
  from configs import glue
  config = config_for_size("tiny", vocab_size=30522, max_position_embeddings=64)
  params = nn.unbox(BertForPreTraining(config).init(jax.random.key(0),
                                                    np.zeros((1, 4), np.int32))["params"])
  folder = str(tmp_path / "tiny_bert")
  hf.save(folder, config, jax.device_get(params), vocab_path=vocab_path)
  run = glue.get_config("dataset=sst2,runlocal=True")
  run.init_from, run.num_train_steps, run.optim.learning_rate = folder, 2, 0.0
  run.data.prompt_template, run.data.prompt_verbalizer = "it was {mask} .", "terrible,great"
  workdir = str(tmp_path / "sst2")
  result = trainer.train_and_evaluate(run, workdir)
  assert 0.0 <= result["eval_accuracy"] <= 1.0
  assert checkpoint.read_model_config(workdir).family == "bert"
  model, variables = load_pretrained(workdir)
  assert type(model).__name__ == "BertForPromptClassification"
  vocab = WordPieceTokenizer(vocab_path).vocab
  assert vocab[model.mask_token_id] == "[MASK]"
  assert [vocab[i] for i in model.label_token_ids] == ["terrible", "great"]
  tuned = variables["params"]
  for name in ("bert", "mlm_head"):
    jax.tree.map(np.testing.assert_array_equal, tuned[name],
                 {k: v for k, v in params[name].items() if k != "pooler"})
  # HF has no prompt class: the export is the family's masked LM, the same tensors.
  from bert_jax.commands.convert import convert
  convert(workdir, str(tmp_path / "hf"), to="hf")
  with open(tmp_path / "hf" / "config.json") as f:
    assert json.load(f)["architectures"] == ["BertForMaskedLM"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ("bert", "roberta", "albert", "electra", "distilbert",
                                  "modernbert"))
def test_prompt_model_exports_as_the_familys_masked_lm(name, tmp_path):
  """Exported (hf.save with the prompt spec), HF's masked LM class of the family reads it
  with nothing missing and gives our class logits at the mask (1e-5)."""
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  from bert_jax.weights import hf_families, hf
  from tests.helpers.family_tables import TINY_MEMBERS
  config = TINY_MEMBERS[name]
  mask = 5
  spec = {"headed_model": "prompt_classification", "label_token_ids": [9, 17, 40],
          "mask_token_id": mask}
  model = BertForPromptClassification(config, label_token_ids=(9, 17, 40), mask_token_id=mask)
  ids = np.random.default_rng(0).integers(6, config.vocab_size, size=(3, 10)).astype(np.int32)
  ids[:, 0], ids[np.arange(3), [3, 6, 8]] = 2, mask
  params = nn.unbox(model.init(jax.random.key(0), jnp.asarray(ids))["params"])
  ours = np.asarray(model.apply({"params": params}, jnp.asarray(ids)).logits)
  folder = str(tmp_path / name)
  hf.save(folder, config, jax.device_get(params), spec=spec)
  with open(f"{folder}/config.json") as f:
    architecture = json.load(f)["architectures"][0]
  assert architecture == hf_families.FAMILIES[config.family].mlm_class
  theirs, info = getattr(transformers, architecture).from_pretrained(
      folder, output_loading_info=True)
  assert not info["missing_keys"] and not info["unexpected_keys"], info
  with torch.no_grad():
    logits = theirs.eval()(input_ids=torch.tensor(ids, dtype=torch.long)).logits.numpy()
  np.testing.assert_allclose(ours, logits[np.arange(3), [3, 6, 8]][:, [9, 17, 40]], atol=1e-5)
