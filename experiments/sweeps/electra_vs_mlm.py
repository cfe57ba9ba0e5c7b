r"""ELECTRA against MLM at equal pretraining FLOPs, at CPU scale.

Clark et al. (2020) compare replaced-token detection (a small generator's MLM samples
replace 15% of the tokens; the discriminator tells which) with BERT's MLM on the same
discriminator-sized model and equal pretraining compute, and find ELECTRA ahead downstream,
most clearly for small models (Table 1: ELECTRA-Small 79.9 against BERT-Small 75.1 GLUE
dev score at the same training FLOPs). Here configs/electra.py (ELECTRA-Tiny: L2/H128, E64, a
quarter-width generator; rows of 64 tokens, 25% masked (16 predictions: ELECTRA-Large's
rate, the config's), FULL-SENTENCES) on the ablation
baseline (experiments/sweeps/_ablation.py: 8k WordPiece vocab, two seeds, the same
fine-tunings, which start from the discriminator) against the same model and input trained
with BERT's MLM alone (80/10/10, attention guidance at tiny.py's weight 1). ELECTRA runs
_ablation.STEPS steps; the MLM run gets the steps that spend the same model FLOPs, from
each task's `step_flops` (bert_jax.core.flops: what the run report counts). With the learned
8,065-piece vocab: ELECTRA 7.358e9 FLOPs per step x 1,000 steps = 7.358e12, MLM 6.949e9 x
1,059 = 7.359e12 (`python -m experiments.sweeps.electra_vs_mlm` prints them). The
held-out MLM column is the generator's for ELECTRA, the model's own for MLM: compare the
fine-tunings.

  python -m experiments.run electra_vs_mlm
  python -m experiments.report
"""
import numpy as np

from experiments.sweeps import _ablation as ablation

CONFIG = "configs/electra.py"
PREPARE = ablation.PREPARE
METRICS = ablation.METRICS
_RATE = {"data.max_predictions_per_seq": 16}  # the config's 25%, not the baseline's 15%
VARIANTS = {
    "mlm": ({**_RATE, "task": "pretraining", "objectives": "mlm", "data.mask_token_prob": 0.8,
             "data.random_token_prob": 0.1, "attention_guidance.weight": 1.0},
            "MLM (BERT), same model and FLOPs"),
    "electra": (_RATE, "ELECTRA (generator MLM + RTD)"),
}
PAPER = {
    "source": "Clark et al. 2020 (ELECTRA, arXiv 2003.10555), Table 1 (ELECTRA-Small against "
              "BERT-Small: 14M parameters, the same 1.4e18 training FLOPs), GLUE dev score; "
              "Table 5 (compute-efficiency experiments, BERT against ELECTRA), GLUE score",
    "metric": "GLUE dev score, Table 1 (small, equal FLOPs)",
    "ours": ("sst2", "eval_accuracy"),
    "values": {"mlm": 75.1, "electra": 79.9},
    "also": ({"metric": "GLUE score, Table 5", "values": {"mlm": 82.2, "electra": 85.0}},),
    "direction": "ELECTRA above MLM at equal pretraining compute (small: 79.9 against 75.1); "
                 "Table 5's stepping stones between BERT (82.2) and ELECTRA (85.0): Replace MLM "
                 "82.4, ELECTRA 15% 82.4, All-Tokens MLM 84.3",
}


def step_flops(overrides: dict) -> float:
  """Model FLOPs of one training step of CONFIG with these overrides (the task's count)."""
  from bert_jax.run import tasks
  from bert_jax.run import trainer
  from configs import electra
  config = electra.get_config()
  config.update_from_flattened_dict(overrides)
  task = tasks.make_task(config, trainer.resolve_model_config(config))
  data = config.data
  return task.step_flops({
      "input_ids": np.zeros((data.batch_size, data.max_seq_length), np.int32),
      "masked_lm_positions": np.zeros((data.batch_size, data.max_predictions_per_seq),
                                      np.int32)})


def _variants() -> dict:
  """VARIANTS with each run's step count: ELECTRA's STEPS, MLM's the same FLOPs."""
  base = ablation.baseline_overrides(ablation.vocab_size())
  per_step = {name: step_flops({**base, **changes}) for name, (changes, _) in VARIANTS.items()}
  variants = {}
  for name, (changes, label) in VARIANTS.items():
    steps = round(ablation.STEPS * per_step["electra"] / per_step[name])
    variants[name] = ({**changes, "num_train_steps": steps, "eval_every_steps": steps // 4,
                       "checkpoint_every_steps": steps}, label)
  return variants


def flops_per_run() -> dict:
  """{variant: (FLOPs per step, steps, FLOPs per run)}."""
  base = ablation.baseline_overrides(ablation.vocab_size())
  out = {}
  for name, (changes, _) in _variants().items():
    per_step = step_flops({**base, **changes})
    out[name] = (per_step, changes["num_train_steps"], per_step * changes["num_train_steps"])
  return out


def get_sweep():
  return ablation.sweep(_variants(), config=CONFIG)()


COLUMNS = ablation.columns(VARIANTS)

if __name__ == "__main__":
  for name, (per_step, steps, total) in flops_per_run().items():
    print(f"{name}: {per_step:.3e} FLOPs/step x {steps} steps = {total:.3e}")
