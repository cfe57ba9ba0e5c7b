"""Fine-tuning: one reader (jax-free: read, featurize, score) and one task (model, loss,
predictions) per fine-tuning task (glue, conll, squad, swag), and what they share (base.py, array_input.py, metrics.py);
classify.py (+ classify_reader.py) and tag.py run GLUE's and CoNLL's tasks on the user's own files."""
