r"""Trains HF `BertForPreTraining` (torch, CPU) on bert_jax's own pretraining batches.

The question it answers: is a pretraining curve of ours what BERT itself does with the same
recipe? Same config file and overrides as `python -m bert_jax.train`, same batches (our
tf.data pipeline), same init range, AdamW with BERT's decay mask, warmup + linear decay,
clipping at 1.0; the MLM head runs on the masked positions only, as ours does. It logs
the metric names of our metrics.jsonl, so the two runs compare line by line:

  python bench/hf_pretraining_reference.py --config=configs/tiny.py \
      --config.num_train_steps=300 --config.eval_every_steps=100 --log_every=50

`--write_synthetic_corpus=PATH` writes (and trains on) a corpus whose masked words are fixed
by their neighbours: 400 documents of 4-9 sentences, each a run of 5-14 consecutive words
of the cycle "one two ... twenty". Any model that uses its context solves it.

Measured (2-core CPU, 2026-11-22; tiny config, that corpus, seq 64, lr 2e-3), HF and bert_jax give
the same held-out MLM accuracy at steps 100/200/300 (0.089/0.191/0.200 vs 0.089/0.196/0.196),
both still at the unigram guess on corrupted positions (10-12%).
"""
import json
import os
import sys
import time

import numpy as np
import torch
import transformers
from absl import app, flags
from ml_collections import config_flags

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # bert_jax/

from bert_jax.pretrain import pipeline as pretraining  # noqa: E402
from bert_jax.text.tokenizers import make_tokenizer  # noqa: E402

_CONFIG = config_flags.DEFINE_config_file("config", None, "A pretraining config file.")
_LOG_EVERY = flags.DEFINE_integer("log_every", 50, "Print train metrics every N steps.")
_SYNTHETIC = flags.DEFINE_string("write_synthetic_corpus", None,
                                 "Write the synthetic corpus here and train on it.")
_CYCLE = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
          "fifteen sixteen seventeen eighteen nineteen twenty").split()


def write_synthetic_corpus(path: str) -> None:
  rng = np.random.default_rng(0)
  documents = []
  for _ in range(400):
    sentences = []
    for _ in range(rng.integers(4, 10)):
      first, length = rng.integers(0, 20), rng.integers(5, 15)
      sentences.append(" ".join(_CYCLE[(first + i) % 20] for i in range(length)) + ".")
    documents.append("\n".join(sentences))
  with open(path, "w") as f:
    f.write("\n\n".join(documents) + "\n")


def hf_model(model_config) -> transformers.BertForPreTraining:
  torch.manual_seed(0)
  return transformers.BertForPreTraining(transformers.BertConfig(
      vocab_size=model_config.vocab_size, hidden_size=model_config.hidden_size,
      num_hidden_layers=model_config.num_hidden_layers,
      num_attention_heads=model_config.num_attention_heads,
      intermediate_size=model_config.intermediate_size,
      max_position_embeddings=model_config.max_position_embeddings,
      hidden_dropout_prob=model_config.hidden_dropout_prob,
      attention_probs_dropout_prob=model_config.attention_probs_dropout_prob,
      initializer_range=model_config.initializer_range))


def optimizer(model, optim, total_steps):
  no_decay = ("bias", "LayerNorm.weight")
  named = list(model.named_parameters())
  groups = [{"params": [p for n, p in named if not n.endswith(no_decay)],
             "weight_decay": optim.weight_decay},
            {"params": [p for n, p in named if n.endswith(no_decay)], "weight_decay": 0.0}]
  opt = torch.optim.AdamW(groups, lr=optim.learning_rate, betas=(optim.b1, optim.b2),
                          eps=optim.eps)
  warmup = max(int(optim.warmup_steps), 1)
  schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: s / warmup if s < warmup else
                                               max(0.0, (total_steps - s) / (total_steps - warmup)))
  return opt, schedule


def forward(model, batch):
  """-> (loss, metric sums): MLM on the masked positions only, plus NSP."""
  t = {k: torch.from_numpy(np.asarray(v)) for k, v in batch.items()}
  out = model.bert(input_ids=t["input_ids"].long(), token_type_ids=t["token_type_ids"].long(),
                   attention_mask=t["attention_mask"].long())
  positions = t["masked_lm_positions"].long()
  gathered = torch.gather(out[0], 1, positions[..., None].expand(-1, -1, out[0].shape[-1]))
  logits = model.cls.predictions(gathered)  # [B, P, V]
  labels, weights = t["masked_lm_ids"].long(), t["masked_lm_weights"].float()
  xent = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(),
                                           reduction="none").view_as(weights)
  correct = (logits.argmax(-1) == labels).float()
  corrupted = weights * (torch.gather(t["input_ids"].long(), 1, positions) != labels).float()
  nsp_logits = model.cls.seq_relationship(out[1])
  nsp_labels = t["next_sentence_labels"].long()
  nsp_loss = torch.nn.functional.cross_entropy(nsp_logits, nsp_labels)
  mlm_loss = (xent * weights).sum() / weights.sum().clamp(min=1)
  with torch.no_grad():
    sums = {"mlm_loss": (xent * weights).sum(), "mlm_correct": (correct * weights).sum(),
            "mlm": weights.sum(), "corrupted_correct": (correct * corrupted).sum(),
            "corrupted": corrupted.sum(), "nsp_loss": nsp_loss * len(nsp_labels),
            "nsp_correct": (nsp_logits.argmax(-1) == nsp_labels).sum(),
            "nsp": torch.tensor(len(nsp_labels))}
    sums = {k: float(v) for k, v in sums.items()}
  return mlm_loss + nsp_loss, sums


def metrics(sums, prefix=""):
  values = {"mlm_loss": sums["mlm_loss"] / max(sums["mlm"], 1),
            "mlm_accuracy": sums["mlm_correct"] / max(sums["mlm"], 1),
            "mlm_accuracy_corrupted": sums["corrupted_correct"] / max(sums["corrupted"], 1),
            "nsp_loss": sums["nsp_loss"] / sums["nsp"],
            "nsp_accuracy": sums["nsp_correct"] / sums["nsp"]}
  return {prefix + k: round(v, 4) for k, v in values.items()}


def main(argv):
  del argv
  config = _CONFIG.value
  if _SYNTHETIC.value:
    write_synthetic_corpus(_SYNTHETIC.value)
    config.data.train_files = (_SYNTHETIC.value,)
    config.data.cache_dir = ""
  train_input, eval_input = pretraining.make_inputs(config.data, make_tokenizer(config.data))
  model = hf_model(config.model)
  total = int(config.num_train_steps)
  opt, schedule = optimizer(model, config.optim, total)
  start = time.time()
  for step in range(1, total + 1):
    loss, sums = forward(model, next(train_input))
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), config.optim.grad_clip_norm)
    opt.step()
    schedule.step()
    opt.zero_grad()
    if step % _LOG_EVERY.value == 0:
      print(json.dumps({"step": step, "seconds": round(time.time() - start), **metrics(sums)}),
            flush=True)
    if eval_input is not None and config.eval_every_steps and (
        step % config.eval_every_steps == 0 or step == total):
      model.eval()
      totals = {}
      with torch.no_grad():
        for i, batch in enumerate(eval_input.epoch_batches(0)):
          if config.eval_batches and i >= config.eval_batches:
            break
          for k, v in forward(model, batch)[1].items():
            totals[k] = totals.get(k, 0.0) + v
      model.train()
      print(json.dumps({"step": step, **metrics(totals, "eval_")}), flush=True)


if __name__ == "__main__":
  flags.mark_flag_as_required("config")
  app.run(main)
