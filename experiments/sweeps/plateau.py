r"""The tiny model's unigram plateau: which change ends it within 800 steps?

Plain BERT-Tiny (configs/tiny.py, attention guidance off) predicts the unigram
distribution for thousands of steps. Each run changes one thing (pre-LN, a larger learning
rate, more heads, BERT-Mini size, attention guidance on layer 0 or on both layers) and
trains 800 steps on the learned 8k vocab (lr 2e-3 unless changed), evaluating on 320
held-out pairs at steps 400 and 800. ~4 min a run on the 2-core CPU (mini: 4x that).
The README's table (Results, "Leaving the MLM plateau") is this sweep's:

  python -m experiments.run plateau                          # every run, in order
  python -m experiments.run plateau baseline guided_layer0   # just these
  python -m experiments.tables plateau

Needs the prepared corpus and a vocab learned from it (PREPARE; the runner runs these
first when their outputs are missing). model.vocab_size is the vocab file's line count,
read when the sweep is built.
"""
import os

from experiments.sweeps._ablation import PREPARE, VOCAB  # the prepared corpus, 8k vocab

_EVAL_KEYS = ("eval_mlm_accuracy", "eval_mlm_accuracy_corrupted", "eval_nsp_accuracy",
              "eval_mlm_loss", "eval_nsp_loss")
METRICS = {"eval_results.json": ("step", "train_examples_per_sec", *_EVAL_KEYS),
           "metrics.jsonl": _EVAL_KEYS}

_OFF = {"attention_guidance.weight": 0}
# Run name -> (what it changes, table label).
_RUNS = {
    "baseline": (_OFF, "baseline (plain BERT-Tiny)"),
    "pre_ln": ({**_OFF, "model.pre_layer_norm": True}, "pre-LN"),
    "pre_ln_lr5e-3": ({**_OFF, "model.pre_layer_norm": True, "optim.learning_rate": "5e-3"},
                      "pre-LN, lr 5e-3"),
    "heads8": ({**_OFF, "model.num_attention_heads": 8}, "8 heads of 16"),
    "mini": ({**_OFF, "model.num_hidden_layers": 4, "model.hidden_size": 256,
              "model.num_attention_heads": 4, "model.intermediate_size": 1024,
              "optim.learning_rate": "1e-3"},
             "BERT-Mini size (L4/H256, lr 1e-3; 4x slower)"),
    "guided_layer0": ({"attention_guidance.weight": 1, "attention_guidance.layers": "0"},
                      "attention guidance, layer 0"),
    "guided_all_layers": ({"attention_guidance.weight": 1, "attention_guidance.layers": ""},
                          "attention guidance, both layers"),
}


def get_sweep():
  vocab = os.path.abspath(VOCAB)
  with open(vocab) as f:  # one piece per line
    vocab_size = sum(1 for _ in f)
  common = {"data.vocab_path": vocab, "model.vocab_size": vocab_size,
            "num_train_steps": 800, "eval_every_steps": 400,
            "checkpoint_every_steps": 100000, "data.eval_held_out_docs": 20,
            "eval_batches": 10}
  return {name: {"config": "configs/tiny.py", "overrides": {**common, **changes}}
          for name, (changes, _) in _RUNS.items()}


def _at_800(key, digits):
  return lambda row: f"{row['metrics']['eval_by_step']['800'][key]:.{digits}f}"


COLUMNS = (
    ("run (800 steps)", lambda row: _RUNS[row["run"]][1] if row["run"] in _RUNS else row["run"]),
    ("held-out MLM accuracy", _at_800("eval_mlm_accuracy", 3)),
    ("at corrupted positions", _at_800("eval_mlm_accuracy_corrupted", 3)),
    ("NSP", _at_800("eval_nsp_accuracy", 2)),
)
