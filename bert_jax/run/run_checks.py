"""What a run's config must satisfy, checked before anything is read or written (the
trainer calls these first): positive sizes and counts, a length to train or something to
evaluate, and a vocabulary of the model's size. Every path of a config may be a URL
(bert_jax.files.storage), the data root included."""
import ml_collections


def validate_config(config: ml_collections.ConfigDict, counts_in_steps: bool) -> None:
  """Sizes and counts that must be positive, checked before anything is read or written.
  counts_in_steps: the task's `counts_in_steps` (pretraining's stream has no fixed epoch:
  its length is num_train_steps; fine-tuning may count num_train_epochs)."""
  positive = {"data.batch_size": config.data.batch_size,
              "grad_accum_steps": config.grad_accum_steps,
              "log_every_steps": config.log_every_steps,
              "checkpoint_every_steps": config.checkpoint_every_steps,
              "max_checkpoints_to_keep": config.max_checkpoints_to_keep}
  if "eval_batch_size" in config.data:
    positive["data.eval_batch_size"] = config.data.eval_batch_size
  for name, value in positive.items():
    if value is None or value <= 0:
      raise ValueError(f"config.{name}={value}: must be > 0")
  for name in ("num_train_steps", "eval_every_steps", "eval_batches"):
    if config.get(name, 0) < 0:
      raise ValueError(f"config.{name}={config[name]}: must be >= 0")
  if config.num_train_steps == 0:
    if counts_in_steps:
      if not config.get("init_from"):  # else: evaluate init_from's model, train nothing
        raise ValueError("config.num_train_steps=0: pretraining counts its length in steps "
                         "(the stream's epochs have no fixed length); set it > 0, or set "
                         "config.init_from to only evaluate that model on held-out data")
      if not (config.data.get("eval_held_out_docs") or config.data.get("eval_files")):
        raise ValueError("config.num_train_steps=0 evaluates config.init_from's model, but "
                         "there is no held-out data: set config.data.eval_held_out_docs "
                         "or config.data.eval_files")
    elif not config.get("num_train_epochs", 0) > 0 and (
        not config.get("init_from") or config.get("random_init")):
      raise ValueError(f"config.num_train_steps=0 and config.num_train_epochs="
                       f"{config.get('num_train_epochs')}: set one of them > 0, or set "
                       "config.init_from to a fine-tuned model of this task to only evaluate it")


def check_vocab_size(config: ml_collections.ConfigDict, vocab_entries: int,
                     model_vocab_size: int) -> None:
  """The tokenizer's vocabulary must have exactly the model's vocab_size entries."""
  if vocab_entries == model_vocab_size:
    return
  source = (f"config.data.vocab_path={config.data.vocab_path}" if config.data.get("vocab_path")
            else f"the vocab.txt beside config.init_from={config.init_from}")
  raise ValueError(f"{source} has {vocab_entries} entries but the model's vocab_size is "
                   f"{model_vocab_size}: set --config.model.vocab_size={vocab_entries} or "
                   f"use a vocabulary of {model_vocab_size} entries")
