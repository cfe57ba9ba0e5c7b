"""The HF side of each family, as one table: config.json in and out, and HF's classes.

HF's `config.json` names the family in `model_type`; `FAMILIES` maps it to the family's
config reader and writer and to its HF classes (its HF tensor names are
`mapping.NAMES[family]`).

A member is keyed by one name in three tables: `bert_jax.models.families.FAMILIES` (what it
changes in the model code), `FAMILIES` here (its config.json and HF classes) and
`mapping.NAMES` (its HF tensor names). `check_tables` says in one line where they disagree
(run when this module is imported). A member added from outside the package (e.g.
tests/extension/xlm_roberta.py) goes into the models' table with
`bert_jax.models.families.register`, then into the two here with `register`.

  config = config_from_hf(json.load(f), source=path)   # dispatch on model_type
  raw = config_to_hf(config)                            # config.json of config.family
"""
import dataclasses
from typing import Any, Callable

from bert_jax.weights import mapping
from bert_jax.models import families as model_families
from bert_jax.models.config import HF_ACT_NAMES, BertConfig, hf_bert_fields
from bert_jax.text import tokenizers


@dataclasses.dataclass(frozen=True)
class HFFamily:
  """config_from_hf: (HF config.json dict, source for errors) -> BertConfig.
  config_to_hf: BertConfig -> HF config.json dict (without `architectures`).
  encoder_class / pretraining_class: HF's classes of the bare encoder and of the
  pretraining model (what `architectures` names, by whether the heads are written).
  other_head_classes: (our headed model, HF class) of further HF classes with heads
  (ELECTRA's discriminator next to its generator).
  task_classes: (our fine-tuning headed model, HF class) where HF's head is ours exactly
  (the pooler, with the family's activation, + a linear classifier; a linear tagger; a
  linear span head; ModernBERT's prediction head before each); a family whose HF head for a
  task differs would list only the tasks that agree.
  classifier_pooling: our sequence classifier's pooling -> the value of HF config.json's
  `classifier_pooling` that reads the same sentence vector (ModernBERT: the [CLS] row or
  the mean); empty where HF's classifiers read only the pooler.
  masked_lm_class: HF's class of the encoder with the MLM head alone, where it is not the
  pretraining class (BERT's and ALBERT's; what a prompt-based classifier exports as).
  token_id_fields: (HF config.json field, tokenizer attribute) of the special-token ids that
  HF's config holds, written from the tokenizer the model is saved with (RoBERTa's and
  ModernBERT's defaults, 0/2 and 50281/50282, belong to their released vocabularies)."""
  config_from_hf: Callable[[dict, str], BertConfig]
  config_to_hf: Callable[[BertConfig], dict]
  encoder_class: str
  pretraining_class: str
  other_head_classes: tuple[tuple[str, str], ...] = ()
  task_classes: tuple[tuple[str, str], ...] = ()
  classifier_pooling: tuple[tuple[str, str], ...] = ()
  token_id_fields: tuple[tuple[str, str], ...] = ()
  masked_lm_class: str = ""

  @property
  def mlm_class(self) -> str:
    """HF's class of the encoder + MLM head (`masked_lm_class`, else the pretraining one)."""
    return self.masked_lm_class or self.pretraining_class

  @property
  def head_classes(self) -> dict[str, str]:
    """Our headed model (`specs.HEADED_MODELS` name) -> the HF class with its heads."""
    return {"pretraining": self.pretraining_class, **dict(self.other_head_classes),
            **dict(self.task_classes)}

  def task_of_class(self, hf_class: str) -> str | None:
    """Our fine-tuning headed model of an HF class name (None: not a task class here)."""
    return {cls: task for task, cls in self.task_classes}.get(hf_class)


def _task_classes(hf_name: str, tasks=("sequence_classification", "token_classification",
                                       "question_answering", "multiple_choice")):
  """(headed model, HF class) of each task, e.g. ("token_classification",
  "BertForTokenClassification") for hf_name "Bert"."""
  suffix = {"sequence_classification": "ForSequenceClassification",
            "token_classification": "ForTokenClassification",
            "question_answering": "ForQuestionAnswering", "multiple_choice": "ForMultipleChoice"}
  return tuple((task, hf_name + suffix[task]) for task in tasks)


# --- BERT and RoBERTa: HF's config uses BertConfig's field names -----------------------

def _bert_from_hf(raw: dict, source: str) -> BertConfig:
  return BertConfig.from_json_dict(raw, source)


def _roberta_from_hf(raw: dict, source: str) -> BertConfig:
  return BertConfig.from_json_dict({**raw, "family": "roberta"}, source)


def _unshared_unprojected(config: BertConfig, family: str) -> None:
  """HF's RoBERTa and DistilBERT have one layer per depth and no E -> H projection."""
  if config.layer_sharing != "none" or config.projects_embeddings:
    raise ValueError(f"BertConfig: layer_sharing={config.layer_sharing!r}, embedding_size="
                     f"{config.embedding_size} (hidden_size {config.hidden_size}) have no HF "
                     f"{family} equivalent; this model cannot be exported to HF")


def _roberta_to_hf(config: BertConfig) -> dict[str, Any]:
  _unshared_unprojected(config, "roberta")
  raw = hf_bert_fields(config)  # the field names BERT and RoBERTa share
  raw.update(model_type="roberta", position_embedding_type="absolute", pad_token_id=config.pad_token_id, bos_token_id=0,
             eos_token_id=2)
  return raw


# --- DistilBERT: its own field names; LayerNorm eps fixed at 1e-12; no segments ------

_DISTILBERT_NAMES = {  # HF DistilBertConfig name -> ours
    "dim": "hidden_size", "n_layers": "num_hidden_layers", "n_heads": "num_attention_heads",
    "hidden_dim": "intermediate_size", "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob", "activation": "hidden_act",
}
_DISTILBERT_SHARED = ("vocab_size", "max_position_embeddings", "initializer_range",
                      "pad_token_id")
_DISTILBERT_LAYER_NORM_EPS = 1e-12  # hard-coded in HF's DistilBERT


def _distilbert_from_hf(raw: dict, source: str) -> BertConfig:
  if raw.get("sinusoidal_pos_embds"):
    raise ValueError(f"{source}: sinusoidal_pos_embds=true is not supported (DistilBERT "
                     "with learned position embeddings only)")
  fields = {ours: raw[theirs] for theirs, ours in _DISTILBERT_NAMES.items() if theirs in raw}
  fields.update({k: raw[k] for k in _DISTILBERT_SHARED if k in raw})
  fields.update(family="distilbert", type_vocab_size=0,
                layer_norm_eps=_DISTILBERT_LAYER_NORM_EPS)
  return BertConfig.from_json_dict(fields, source)


def _distilbert_to_hf(config: BertConfig) -> dict[str, Any]:
  if config.type_vocab_size or config.layer_norm_eps != _DISTILBERT_LAYER_NORM_EPS:
    raise ValueError(f"DistilBERT in HF has no segment table and LayerNorm eps 1e-12; this "
                     f"config has type_vocab_size={config.type_vocab_size}, layer_norm_eps="
                     f"{config.layer_norm_eps}")
  _unshared_unprojected(config, "distilbert")
  bert = hf_bert_fields(config)
  raw = {theirs: bert[ours] for theirs, ours in _DISTILBERT_NAMES.items()}
  raw.update({k: bert[k] for k in _DISTILBERT_SHARED})
  raw.update(model_type="distilbert", sinusoidal_pos_embds=False, tie_word_embeddings=True)
  return raw


# --- ALBERT: BERT's names plus embedding_size and layer groups -------------------------

def _albert_from_hf(raw: dict, source: str) -> BertConfig:
  groups, inner = raw.get("num_hidden_groups", 1), raw.get("inner_group_num", 1)
  layers = raw.get("num_hidden_layers")
  if inner != 1 or groups not in (1, layers):
    raise ValueError(f"{source}: num_hidden_groups={groups}, inner_group_num={inner} is not "
                     f"supported (only 1 group of 1 layer, or {layers} groups of 1: no sharing)")
  return BertConfig.from_json_dict(
      {**raw, "family": "albert", "embedding_size": raw.get("embedding_size", 128),
       "layer_sharing": "all" if groups == 1 else "none"}, source)


def _albert_to_hf(config: BertConfig) -> dict[str, Any]:
  if config.layer_sharing not in ("none", "all") or config.embedding_size is None:
    raise ValueError(f"ALBERT in HF shares whole layers or none and always has embedding_size;"
                     f" this config has layer_sharing={config.layer_sharing!r}, embedding_size="
                     f"{config.embedding_size}")
  raw = hf_bert_fields(config)
  raw.update(model_type="albert", position_embedding_type="absolute", embedding_size=config.embedding_size, inner_group_num=1,
             num_hidden_groups=1 if config.layer_sharing == "all" else config.num_hidden_layers)
  return raw


# --- ELECTRA: BERT's names plus embedding_size -----------------------------------------

# ElectraForMultipleChoice's sequence summary is our pooler (dense + GELU on the first
# token) with these settings, ElectraConfig's defaults.
_ELECTRA_SUMMARY = {"summary_type": "first", "summary_use_proj": True,
                    "summary_activation": "gelu", "summary_proj_to_labels": False}


def _electra_from_hf(raw: dict, source: str) -> BertConfig:
  if "ElectraForMultipleChoice" in (raw.get("architectures") or ()):
    for field, ours in _ELECTRA_SUMMARY.items():
      if raw.get(field, ours) != ours:
        raise ValueError(f"{source}: {field}={raw[field]!r} is not supported for "
                         f"ElectraForMultipleChoice (only {ours!r}: the pooler's summary)")
  return BertConfig.from_json_dict(
      {**raw, "family": "electra", "embedding_size": raw.get("embedding_size", 128)}, source)


def _electra_to_hf(config: BertConfig) -> dict[str, Any]:
  raw = hf_bert_fields(config)
  raw.update(model_type="electra", position_embedding_type="absolute", embedding_size=config.embedding_width)
  return raw


# --- ModernBERT: its own field names; layer types and RoPE bases as HF 5 writes them ---

_MODERNBERT_NAMES = {  # HF ModernBertConfig name -> ours
    "hidden_activation": "hidden_act", "norm_eps": "layer_norm_eps",
    "mlp_dropout": "hidden_dropout_prob", "attention_dropout": "attention_probs_dropout_prob",
    "classifier_bias": "mlm_transform_bias",
}
_MODERNBERT_SHARED = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
                      "intermediate_size", "max_position_embeddings", "initializer_range",
                      "pad_token_id", "norm_bias", "attention_bias", "mlp_bias",
                      "local_attention")
# HF's defaults where a config.json leaves a field out (ModernBertConfig's).
_MODERNBERT_DEFAULTS = {"norm_eps": 1e-5, "norm_bias": False, "attention_bias": False,
                        "mlp_bias": False, "classifier_bias": False, "mlp_dropout": 0.0,
                        "attention_dropout": 0.0, "hidden_activation": "gelu",
                        "local_attention": 128, "max_position_embeddings": 8192,
                        "pad_token_id": 50283}
_GLOBAL, _LOCAL = "full_attention", "sliding_attention"


def _every_n_from_layer_types(layer_types: list, source: str) -> int:
  """HF's per-layer list -> n with layer i global iff i % n == 0; refuses other patterns."""
  for n in range(1, len(layer_types) + 1):
    if layer_types == [_LOCAL if i % n else _GLOBAL for i in range(len(layer_types))]:
      return n
  raise ValueError(f"{source}: layer_types={layer_types} is not global every n layers "
                   "(layer i global iff i % n == 0), the only pattern supported")


def _modernbert_rope_thetas(raw: dict, source: str) -> tuple[float, float]:
  """(global, local) RoPE bases: HF 5's rope_parameters, or the older top-level fields."""
  params = raw.get("rope_parameters") or {}
  thetas = []
  for kind, old_name, default in ((_GLOBAL, "global_rope_theta", 160_000.0),
                                  (_LOCAL, "local_rope_theta", 10_000.0)):
    entry = params.get(kind) or {}
    if entry.get("rope_type", "default") != "default":
      raise ValueError(f"{source}: rope_parameters.{kind}.rope_type="
                       f"{entry['rope_type']!r} is not supported (only 'default')")
    thetas.append(float(entry.get("rope_theta", raw.get(old_name, default))))
  return thetas[0], thetas[1]


def _modernbert_from_hf(raw: dict, source: str) -> BertConfig:
  raw = {**_MODERNBERT_DEFAULTS, **{k: v for k, v in raw.items() if v is not None}}
  for field, supported in (("decoder_bias", True), ("tie_word_embeddings", True)):
    if raw.get(field, supported) != supported:
      raise ValueError(f"{source}: {field}={raw[field]!r} is not supported (only {supported})")
  if raw.get("classifier_activation", raw["hidden_activation"]) != raw["hidden_activation"]:
    raise ValueError(f"{source}: classifier_activation={raw['classifier_activation']!r} differs "
                     f"from hidden_activation={raw['hidden_activation']!r}, not supported")
  if raw.get("embedding_dropout", raw["mlp_dropout"]) != raw["mlp_dropout"]:
    raise ValueError(f"{source}: embedding_dropout={raw['embedding_dropout']} differs from "
                     f"mlp_dropout={raw['mlp_dropout']}, not supported (one hidden dropout)")
  fields = {ours: raw[theirs] for theirs, ours in _MODERNBERT_NAMES.items()}
  fields.update({k: raw[k] for k in _MODERNBERT_SHARED if k in raw})
  if raw.get("layer_types"):
    every_n = _every_n_from_layer_types(list(raw["layer_types"]), source)
  else:
    every_n = raw.get("global_attn_every_n_layers", 3)
  global_theta, local_theta = _modernbert_rope_thetas(raw, source)
  fields.update(family="modernbert", type_vocab_size=0, global_attn_every_n_layers=every_n,
                global_rope_theta=global_theta, local_rope_theta=local_theta)
  return BertConfig.from_json_dict(fields, source)


def _modernbert_to_hf(config: BertConfig) -> dict[str, Any]:
  ours = dataclasses.asdict(config)
  raw = {theirs: ours[name] for theirs, name in _MODERNBERT_NAMES.items()}
  raw.update({k: ours[k] for k in _MODERNBERT_SHARED})
  act = HF_ACT_NAMES[config.hidden_act]
  layers = range(config.num_hidden_layers)
  raw.update(
      model_type="modernbert", hidden_activation=act, classifier_activation=act,
      embedding_dropout=config.hidden_dropout_prob, decoder_bias=True,
      tie_word_embeddings=True,
      layer_types=[_LOCAL if i % config.global_attn_every_n_layers else _GLOBAL for i in layers],
      rope_parameters={_GLOBAL: {"rope_type": "default", "rope_theta": config.global_rope_theta},
                       _LOCAL: {"rope_type": "default", "rope_theta": config.local_rope_theta}})
  return raw


# --- ERNIE: BERT's names plus the task-type table (use_task_id) -------------------------

_ERNIE_TASK_TYPES = 3  # HF ErnieConfig's task_type_vocab_size when use_task_id is off


def _ernie_from_hf(raw: dict, source: str) -> BertConfig:
  tasks = int(raw.get("task_type_vocab_size", _ERNIE_TASK_TYPES)) if raw.get("use_task_id") else 0
  return BertConfig.from_json_dict({**raw, "family": "ernie", "task_type_vocab_size": tasks},
                                   source)


def _ernie_to_hf(config: BertConfig) -> dict[str, Any]:
  _unshared_unprojected(config, "ernie")
  raw = hf_bert_fields(config)
  raw.update(model_type="ernie", position_embedding_type="absolute",
             use_task_id=config.task_type_vocab_size > 0,
             task_type_vocab_size=config.task_type_vocab_size or _ERNIE_TASK_TYPES)
  return raw


# --- Reformer: HF ReformerConfig's names; layers counted by attn_layers ------------------

_REFORMER_NAMES = {  # HF ReformerConfig name -> ours
    "feed_forward_size": "intermediate_size",
    "local_attention_probs_dropout_prob": "attention_probs_dropout_prob",
}
_REFORMER_SHARED = ("vocab_size", "hidden_size", "num_attention_heads", "hidden_act",
                    "hidden_dropout_prob", "max_position_embeddings", "initializer_range",
                    "layer_norm_eps", "pad_token_id", "attention_head_size", "attn_layers",
                    "axial_norm_std", "local_attn_chunk_length", "local_num_chunks_before",
                    "local_num_chunks_after", "lsh_attn_chunk_length", "lsh_num_chunks_before",
                    "lsh_num_chunks_after", "lsh_attention_probs_dropout_prob", "num_buckets",
                    "num_hashes", "hash_seed", "chunk_size_feed_forward")
# HF's ReformerConfig defaults where a config.json leaves a field out.
_REFORMER_DEFAULTS = {
    "attention_head_size": 64, "attn_layers": ["local", "lsh", "local", "lsh", "local", "lsh"],
    "axial_norm_std": 1.0, "axial_pos_embds": True, "axial_pos_shape": [64, 64],
    "axial_pos_embds_dim": [64, 192], "feed_forward_size": 512, "hidden_act": "relu",
    "hidden_dropout_prob": 0.05, "hidden_size": 256, "initializer_range": 0.02,
    "layer_norm_eps": 1e-12, "local_num_chunks_before": 1, "local_num_chunks_after": 0,
    "local_attention_probs_dropout_prob": 0.05, "local_attn_chunk_length": 64,
    "lsh_attn_chunk_length": 64, "lsh_attention_probs_dropout_prob": 0.0,
    "lsh_num_chunks_before": 1, "lsh_num_chunks_after": 0, "max_position_embeddings": 4096,
    "num_attention_heads": 12, "num_hashes": 1, "vocab_size": 320, "pad_token_id": 0,
    "chunk_size_feed_forward": 0}


def _reformer_from_hf(raw: dict, source: str) -> BertConfig:
  raw = {**_REFORMER_DEFAULTS, **{k: v for k, v in raw.items() if v is not None or
                                   k in ("num_buckets", "hash_seed")}}
  if raw.get("is_decoder"):
    raise ValueError(f"{source}: is_decoder=true (causal Reformer) is not supported (only the "
                     "encoder use)")
  fields = {ours: raw[theirs] for theirs, ours in _REFORMER_NAMES.items()}
  fields.update({k: raw.get(k) for k in _REFORMER_SHARED})
  axial = raw["axial_pos_embds"]
  fields.update(family="reformer", type_vocab_size=0,
                num_hidden_layers=len(raw["attn_layers"]),
                axial_pos_shape=tuple(raw["axial_pos_shape"]) if axial else (),
                axial_pos_embds_dim=tuple(raw["axial_pos_embds_dim"]) if axial else ())
  return BertConfig.from_json_dict(fields, source)


def _reformer_to_hf(config: BertConfig) -> dict[str, Any]:
  ours = dataclasses.asdict(config)
  raw = {theirs: ours[name] for theirs, name in _REFORMER_NAMES.items()}
  raw.update({k: ours[k] for k in _REFORMER_SHARED})
  raw.update(model_type="reformer", hidden_act=HF_ACT_NAMES[config.hidden_act],
             attention_head_size=config.head_dim, attn_layers=list(config.attn_layers),
             axial_pos_embds=bool(config.axial_pos_shape), is_decoder=False,
             num_buckets=(list(config.num_buckets) if isinstance(config.num_buckets, tuple)
                          else config.num_buckets),
             tie_word_embeddings=False)
  if config.axial_pos_shape:
    raw.update(axial_pos_shape=list(config.axial_pos_shape),
               axial_pos_embds_dim=list(config.axial_pos_embds_dim))
  return raw


FAMILIES = {
    "bert": HFFamily(_bert_from_hf, BertConfig.to_hf_dict, "BertModel", "BertForPreTraining",
                     task_classes=_task_classes("Bert"), masked_lm_class="BertForMaskedLM"),
    # RoBERTa's (ELECTRA's, DistilBERT's) sequence head is our pooler + classifier under
    # other names (mapping.NAMES[family].task_names).
    "roberta": HFFamily(_roberta_from_hf, _roberta_to_hf, "RobertaModel",
                        "RobertaForMaskedLM", task_classes=_task_classes("Roberta"),
                        token_id_fields=(("bos_token_id", "cls_id"),
                                         ("eos_token_id", "sep_id"))),
    "distilbert": HFFamily(_distilbert_from_hf, _distilbert_to_hf, "DistilBertModel",
                           "DistilBertForMaskedLM",
                           task_classes=_task_classes("DistilBert")),
    "albert": HFFamily(_albert_from_hf, _albert_to_hf, "AlbertModel", "AlbertForPreTraining",
                       task_classes=_task_classes("Albert"), masked_lm_class="AlbertForMaskedLM"),
    # The generator is the MLM model; the discriminator our replaced_token_detection model.
    "electra": HFFamily(_electra_from_hf, _electra_to_hf, "ElectraModel", "ElectraForMaskedLM",
                        (("replaced_token_detection", "ElectraForPreTraining"),),
                        task_classes=_task_classes("Electra")),
    "modernbert": HFFamily(_modernbert_from_hf, _modernbert_to_hf, "ModernBertModel",
                           "ModernBertForMaskedLM", task_classes=_task_classes("ModernBert"),
                           classifier_pooling=(("pooler", "cls"), ("mean", "mean")),
                           token_id_fields=(("bos_token_id", "cls_id"),
                                            ("eos_token_id", "sep_id"),
                                            ("cls_token_id", "cls_id"),
                                            ("sep_token_id", "sep_id"))),
    "ernie": HFFamily(_ernie_from_hf, _ernie_to_hf, "ErnieModel", "ErnieForPreTraining",
                      task_classes=_task_classes("Ernie"), masked_lm_class="ErnieForMaskedLM"),
    # Its classification head is our pooler (dense + tanh on the first token) + classifier.
    "reformer": HFFamily(_reformer_from_hf, _reformer_to_hf, "ReformerModel",
                         "ReformerForMaskedLM",
                         task_classes=_task_classes(
                             "Reformer", ("sequence_classification", "question_answering"))),
}


def hf_family(name: str, source: str = "config") -> HFFamily:
  """The table entry of a family / HF model_type; one line naming the known ones if none."""
  if name not in FAMILIES:
    raise ValueError(f"{source}: model_type={name!r} is not supported (known: "
                     f"{', '.join(sorted(FAMILIES))})")
  return FAMILIES[name]


def config_from_hf(raw: dict, source: str = "config.json") -> BertConfig:
  """An HF config.json dict of any family -> BertConfig (model_type picks the reader;
  configs without one, as some old BERT ones, are BERT)."""
  return hf_family(raw.get("model_type", "bert"), source).config_from_hf(raw, source)


def config_to_hf(config: BertConfig) -> dict[str, Any]:
  """BertConfig -> the HF config.json dict of its family (without `architectures`)."""
  raw = hf_family(config.family).config_to_hf(config)
  raw.pop("architectures", None)  # hf.save names the class the weights are for
  return raw


def _weights_tables() -> dict[str, dict]:
  """The weights side's tables keyed by family member, by their dotted names."""
  return {"bert_jax.weights.hf_families.FAMILIES": FAMILIES,
          "bert_jax.weights.mapping.NAMES": mapping.NAMES}


def _tables() -> dict[str, dict]:
  """The three tables a family member is keyed in: the models' and the weights side's."""
  return {"bert_jax.models.families.FAMILIES": model_families.FAMILIES, **_weights_tables()}


def check_tables() -> None:
  """Raises a one-line ValueError naming the table that lacks a member the others have,
  or the member whose tokenizer kinds are not in `bert_jax.text.tokenizers.KINDS`."""
  for name, family in model_families.FAMILIES.items():
    tokenizers.check_kinds(family.tokenizers, f"bert_jax.models.families.FAMILIES[{name!r}]"
                           ".tokenizers")
  tables = _tables()
  members = set().union(*tables.values())
  for table, entries in tables.items():
    if set(entries) != members:
      raise ValueError(f"{table} lacks the family member(s) {sorted(members - set(entries))} "
                       "that the other family tables have; declare a member in all three "
                       "(bert_jax.weights.hf_families.register)")


def register(name: str, hf: HFFamily, names: "mapping.Names") -> None:
  """Declares the HF side of the family member `name` (also its HF `model_type`), which
  `bert_jax.models.families.register` has put in the models' table.

  hf: its config.json reader and writer and HF classes; names: its HF tensor names. A name
  already here, or not in the models' table, is refused.
  """
  if name not in model_families.FAMILIES:
    raise ValueError(f"family {name!r} is not in bert_jax.models.families.FAMILIES (declare "
                     "it there first: bert_jax.models.families.register)")
  taken = [table for table, entries in _weights_tables().items() if name in entries]
  if taken:
    raise ValueError(f"family {name!r} is already in {', '.join(taken)}")
  FAMILIES[name] = hf
  mapping.NAMES[name] = names
  check_tables()


def unregister(name: str) -> None:
  """Removes a member `register` added from the two tables here (a test's teardown; the
  models' table is `bert_jax.models.families.unregister`'s)."""
  for entries in _weights_tables().values():
    entries.pop(name, None)


check_tables()
