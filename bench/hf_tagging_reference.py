r"""Fine-tunes HF `BertForTokenClassification` (torch, CPU) as `configs/conll.py` fine-tunes ours.

The question it answers: does a CoNLL-2003 tagging run of ours (NER, POS or chunks) score
what HF's token-classification fine-tuning scores from the same weights and settings? The
same config file and overrides as `python -m bert_jax.train`: the same features (our
reader: the label on each word's first sub-token, -100 elsewhere, as HF's examples align
them), the same random training subset, batch size, epochs, AdamW with BERT's decay mask,
warmup + linear decay and clipping; the eval split is scored by our scorer
(finetune/conll_reader.py), so the two runs' numbers are the same metric:

  python bench/hf_tagging_reference.py \
      --config=configs/conll.py:column=pos,train_examples=2000 \
      --config.data.max_seq_length=64 --config.num_train_epochs=1 \
      --config.optim.learning_rate=1e-4

Batches are padded to their longest row (ours pack each batch: the same losses).
"""
import json
import math
import os
import sys
import time

import numpy as np
import torch
import transformers
from absl import app
from ml_collections import config_flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bert_jax/

from bert_jax.finetune import conll_reader  # noqa: E402
from bert_jax.text.tokenizers import make_tokenizer  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "A configs/conll.py config.")


def batches(features, rows, batch_size):
  """Torch tensors of `rows`, batch_size at a time, cut to the longest row of each."""
  for start in range(0, len(rows), batch_size):
    take = rows[start:start + batch_size]
    width = int(features["attention_mask"][take].sum(1).max())
    labels = np.where(features["label_weights"][take] > 0, features["labels"][take], -100)
    yield {"input_ids": features["input_ids"][take, :width],
           "token_type_ids": features["token_type_ids"][take, :width],
           "attention_mask": features["attention_mask"][take, :width],
           "labels": labels[:, :width]}


def optimizer(model, optim, total_steps: int):
  """torch AdamW with BERT's decay mask (no decay on biases and LayerNorm weights), linear
  warmup over optim.warmup_fraction of the steps, then linear decay to 0."""
  decays = {True: [], False: []}
  for name, param in model.named_parameters():
    decays[not name.endswith(("bias", "LayerNorm.weight"))].append(param)
  opt = torch.optim.AdamW([{"params": decays[True], "weight_decay": optim.weight_decay},
                           {"params": decays[False], "weight_decay": 0.0}],
                          lr=optim.learning_rate, betas=(optim.b1, optim.b2), eps=optim.eps)
  warmup = max(round(optim.warmup_fraction * total_steps), 1)
  return opt, torch.optim.lr_scheduler.LambdaLR(
      opt, lambda s: min(s / warmup, max(0.0, (total_steps - s) / (total_steps - warmup))))


def as_torch(batch):
  return {k: torch.from_numpy(np.asarray(v, np.int64)) for k, v in batch.items()}


def main(argv):
  del argv
  config = _CONFIG.value
  data = config.data
  torch.manual_seed(config.seed)
  tokenizer = make_tokenizer(data, model_dir=config.init_from)
  train, _ = conll_reader.load_split(data, data.train_split, tokenizer, data.max_seq_length)
  dev, metadata = conll_reader.load_split(data, data.eval_split, tokenizer, data.max_seq_length)
  rows = np.arange(len(train["input_ids"]))
  if data.train_examples:  # the subset bert_jax's FinetuningTask.make_inputs takes
    rows = np.sort(np.random.default_rng(data.seed).permutation(rows)[:data.train_examples])
  labels = conll_reader.get_column(data.column).labels
  model = transformers.BertForTokenClassification.from_pretrained(
      config.init_from, num_labels=len(labels), id2label=dict(enumerate(labels)),
      hidden_dropout_prob=config.model.hidden_dropout_prob,
      attention_probs_dropout_prob=config.model.attention_probs_dropout_prob)
  steps_per_epoch = math.ceil(len(rows) / data.batch_size)
  total = round(config.num_train_epochs * steps_per_epoch)
  opt, schedule = optimizer(model, config.optim, total)
  rng, step, start = np.random.default_rng(data.seed), 0, time.time()
  model.train()
  while step < total:
    for batch in batches(train, rng.permutation(rows), data.batch_size):
      loss = model(**as_torch(batch)).loss
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip_norm)
      opt.step()
      schedule.step()
      opt.zero_grad()
      step += 1
      if step % config.log_every_steps == 0 or step == total:
        print(f"step {step}/{total} | loss {loss.item():.4f} | {time.time() - start:.0f} s")
      if step == total:
        break
  model.eval()
  logits = np.zeros(dev["input_ids"].shape + (len(labels),), np.float32)
  with torch.no_grad():
    for start_row, batch in zip(range(0, len(dev["input_ids"]), data.eval_batch_size),
                                batches(dev, np.arange(len(dev["input_ids"])),
                                        data.eval_batch_size)):
      batch.pop("labels")
      out = model(**as_torch(batch)).logits.numpy()
      logits[start_row:start_row + len(out), :out.shape[1]] = out
  scores = conll_reader.score(logits, metadata)
  scores.pop("per_type", None)
  print(json.dumps({"step": step, "wall_seconds": round(time.time() - start, 1),
                    **{f"eval_{k}": v for k, v in scores.items()}}))


if __name__ == "__main__":
  app.run(main)
