r"""SWAG multiple-choice fine-tuning (4 endings), from all-MiniLM-L6-v2.

  python -m bert_jax.train --config=configs/swag.py --workdir=runs/swag \
      --config.data.sources.train=swag/train.csv --config.data.sources.dev=swag/val.csv

The full SWAG csvs are not in ../shared/data; by default this trains and evaluates on
the small samples that are (see shared/data/README.md), which only shows the pipeline
runs end to end (2026-11-22 to 2026-11-24, a7ca5d3: with --config.optim.learning_rate=1e-4,
6 steps in 0.5 min on a 2-core AMD EPYC, accuracy 90.91 on the 11-row sample it trained on;
docs/results/finetuning.md).
"""
from bert_jax.configs.common import finetuning_config, parse_arg


def get_config(arg=None):
  arg = parse_arg(arg, train="", dev="", runlocal=False)
  # test: the unlabeled test.csv's name (not in ../shared/data), for predictions only.
  config = finetuning_config("swag", {"train": arg.train or _sample(),
                                      "dev": arg.dev or _sample(), "test": "swag/test.csv"})
  config.data.max_seq_length = 64
  config.data.batch_size = 4
  config.data.eval_batch_size = 4
  config.optim.learning_rate = 2e-5
  if arg.runlocal:
    config.num_train_epochs = 1.0
    config.log_every_steps = 1
  return config


def _sample() -> str:
  return "swag/swag.csv"
