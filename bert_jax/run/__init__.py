"""The run machinery: the training loop (trainer.py), its jitted steps, pre-run checks,
metric writers, the workdir and its lock, stop signals, the run report and compile-only
planning; and what only the trainer uses: the task registry (tasks.py), its checkpoints
(checkpoints.py), a fresh run's start (init_chain.py), the mesh and logical-axis rules
(sharding.py) and the compile targets (targets.py). Entry points (bert_jax.train) call
in; nothing below imports it."""
