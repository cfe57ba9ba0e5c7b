"""Probes of what a pretrained encoder holds: syntax_heads.py (which attention heads track
dependency relations, after Clark et al. 2019) on the relations of relations.py."""
