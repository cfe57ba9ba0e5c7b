"""The command-line programs besides train: convert, download, embed, fill_mask,
finetune_shards, tag_spans, and the console scripts that pip puts on PATH (console.py).
Nothing imports them."""
