"""Building blocks of end-to-end runs in tests: the repository root, dotted config
changes, the tiny pretraining config, fine-tuning from a small model, killing a run."""
import json
import os
import signal
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def set_fields(config, changes: dict):
  """config with each dotted `changes` key ("data.batch_size") set; returns config."""
  for key, value in changes.items():
    node = config
    *parents, leaf = key.split(".")
    for p in parents:
      node = node[p]
    node[leaf] = value
  return config


# Tiny shapes for end-to-end pretraining tests: H32, T32, 12 steps, log every step.
TINY_PRETRAINING = {"model.hidden_size": 32, "model.intermediate_size": 64,
                    "model.num_attention_heads": 2, "model.max_position_embeddings": 64,
                    "data.max_seq_length": 32, "data.max_predictions_per_seq": 5,
                    "num_train_steps": 12, "log_every_steps": 1,
                    "checkpoint_every_steps": 4}


def tiny_pretraining_config(corpus, **changes):
  """configs/tiny.py's runlocal variant at TINY_PRETRAINING shapes, plus `changes`.

  Its tokenized corpus is cached beside the corpus (keyed by the file's path, size and
  mtime, the vocab and the casing), so the worker's end-to-end tests tokenize it once.
  """
  from configs import tiny
  config = tiny.get_config(f"corpus={corpus},runlocal=True")
  cache = os.path.join(os.path.dirname(os.path.abspath(corpus)), "token_cache")
  return set_fields(config, {**TINY_PRETRAINING, "data.cache_dir": cache, **changes})


def sigkill_when(cmd: list[str], ready, timeout_s: float = 300) -> None:
  """Runs cmd (a training command) from the repository root and kills it with SIGKILL
  as soon as ready() is true (polled every 50 ms), or when timeout_s has passed."""
  proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  deadline = time.time() + timeout_s
  while time.time() < deadline and proc.poll() is None and not ready():
    time.sleep(0.05)
  proc.send_signal(signal.SIGKILL)
  proc.wait()


def run_finetune(config, workdir, small_bert):
  """Fine-tunes config from the small_bert folder (sequences cut to 64) into workdir; its
  eval_results.json."""
  config.init_from = small_bert
  config.data.max_seq_length = min(config.data.max_seq_length, 64)
  from bert_jax.run import trainer
  trainer.train_and_evaluate(config, str(workdir))
  with open(os.path.join(workdir, "eval_results.json")) as f:
    return json.load(f)


def run_python(*args):
  """python *args from the repository root; its stdout (a failure shows its stderr's end)."""
  out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout


def learn_vocab(kind, corpus, tmp_path_factory):
  """A 1,000-entry vocabulary of `kind` learned from the corpus: its folder."""
  folder = tmp_path_factory.mktemp(kind) / "vocab-1k"
  run_python("-m", "bert_jax.text.learn_vocab", f"--kind={kind}", f"--input={corpus}",
             "--vocab_size=1000", f"--output={folder}")
  return str(folder)
