"""Fine-tuning: one reader (jax-free: read, featurize, score) and one task (model, loss,
predictions) per fine-tuning task (glue, conll, squad, swag), and what they share (base.py, array_input.py, metrics.py)."""
