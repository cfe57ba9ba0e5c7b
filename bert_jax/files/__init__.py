"""Where every file is read and written: local paths and URLs (storage.py) and models by
name from the Hugging Face Hub (hub.py). The bottom layer: imports nothing of bert_jax."""
