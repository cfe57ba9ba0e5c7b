"""What pretraining and fine-tuning share: the task contract (task.py), the optimizer
(optim.py), FLOP counts (flops.py), losses (losses.py) and packed rows (packed_rows.py)."""
