"""The run machinery: the training loop (trainer.py), its jitted steps, pre-run checks,
metric writers, the workdir and its lock, stop signals, the run report and compile-only
planning. Entry points (bert_jax.train) call in; nothing below imports it."""
