"""The headed model a spec names: `HEADED_MODELS` and `build(config, spec)`.

A spec is {"headed_model": NAME, **the model's fields}, e.g. {"headed_model":
"sequence_classification", "num_labels": 2}: what a task's `model_spec()` gives and a
workdir's model_config.json records under "model".

    model = specs.build(BertConfig(), {"headed_model": "token_classification", "num_labels": 9})
    spec = specs.recorded_spec(json.load(f)["model"])   # a model_config.json's, old key read

A new headed model lands as its module (models/headed.py's or a file of its own, as
models/electra.py) plus one entry in `HEADED_MODELS`.
"""
import flax.linen as nn

from bert_jax.models.bert import BertModel
from bert_jax.models.config import BertConfig
from bert_jax.models.electra import BertForReplacedTokenDetection, ElectraForPreTraining
from bert_jax.models.headed import (BertForMultipleChoice, BertForPreTraining,
                                    BertForPromptClassification, BertForQuestionAnswering,
                                    BertForSequenceClassification, BertForTokenClassification)

HEADED_MODELS = {
    "encoder": BertModel,
    "pretraining": BertForPreTraining,
    "sequence_classification": BertForSequenceClassification,
    "prompt_classification": BertForPromptClassification,
    "token_classification": BertForTokenClassification,
    "question_answering": BertForQuestionAnswering,
    "multiple_choice": BertForMultipleChoice,
    "replaced_token_detection": BertForReplacedTokenDetection,
    "electra_pretraining": ElectraForPreTraining,
}


# The spec's key before "headed_model": read in a model_config.json (`recorded_spec`),
# refused in a spec given to `build`.
OLD_KEY = "task_model"


def recorded_spec(spec: dict | None) -> dict | None:
  """A model_config.json's "model" spec in today's terms: the old key "task_model", which
  workdirs and saved models written before "headed_model" hold, read as "headed_model"."""
  if not spec or OLD_KEY not in spec:
    return spec
  return {"headed_model": spec[OLD_KEY], **{k: v for k, v in spec.items() if k != OLD_KEY}}


def build(config: BertConfig, spec: dict) -> nn.Module:
  """The headed model a spec names: {"headed_model": NAME, **its fields} (see HEADED_MODELS)."""
  if OLD_KEY in spec:
    raise ValueError(f"model spec {{{OLD_KEY!r}: {spec[OLD_KEY]!r}}}: the key is now "
                     f"'headed_model'")
  spec = dict(spec)
  name = spec.pop("headed_model", None)
  if name not in HEADED_MODELS:
    raise ValueError(f"model spec {{'headed_model': {name!r}}}: expected one of "
                     f"{sorted(HEADED_MODELS)}")
  # JSON lists -> hashable tuples
  for key in ("sentence_heads", "feature_layers", "label_token_ids"):
    if key in spec:
      spec[key] = tuple(spec[key])
  return HEADED_MODELS[name](config, **spec)
