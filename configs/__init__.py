"""Experiment configs, one file per experiment: `get_config(arg)` -> ConfigDict.

The package ships them as `bert_jax.configs` (bert_jax/configs links to this folder), so
`bert-jax-train --config=glue:dataset=sst2` works from any directory once installed, and a
config file of one's own imports `from bert_jax.configs.common import parse_arg`.
"""
