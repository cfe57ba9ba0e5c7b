"""The command-line programs besides train: convert, download, embed, fill_mask,
tag_spans, and the console scripts that pip puts on PATH (console.py). Nothing imports them."""
