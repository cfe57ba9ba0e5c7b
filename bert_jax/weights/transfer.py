"""A checkpoint's weights into the params of the model a run builds (`init_params`, the
trainer's config.init_from, and the frozen encoder whose layers fine-tuning caches).

  params, notes = init_params(params, source, config)

The weights come from the loader (loader.py: `resolve`, `load_params`); this module adapts
them to the model (an encoder under a headed model, heads kept or dropped, layers stacked)
and says what it changed.
"""
import jax.numpy as jnp
import numpy as np

from bert_jax.models import specs
from bert_jax.models.config import BertConfig
from bert_jax.models.families import family_of
from bert_jax.models.layout import stack_layers, stacked_layout
from bert_jax.weights.loader import Pretrained, load_params, model_spec, resolve


def init_params(params: dict, path: "str | Pretrained", model_config: BertConfig):
  """(params with every tensor of the checkpoint at `path` copied in, notes on what was
  adapted): the trainer's config.init_from. `params` are the freshly initialised ones."""
  source = resolve(path)
  path = source.path
  pretrained_config, pretrained, _ = load_params(source)
  # A pretraining model of two networks passes on the one it names (ELECTRA: the
  # discriminator); the other (its generator) is dropped.
  part = getattr(specs.HEADED_MODELS.get(model_spec(source, pretrained)["headed_model"]),
                 "transfer_part", None)
  if part:
    pretrained = pretrained[part]
  if pretrained_config.vocab_size != model_config.vocab_size:
    raise ValueError(f"init_from {path}: vocab_size {pretrained_config.vocab_size} != "
                     f"config.model.vocab_size {model_config.vocab_size}")
  if model_config.scan_layers:
    pretrained = stack_layers(pretrained, *stacked_layout(model_config))
  with_head = _prediction_head_from(pretrained, params, model_config)
  params, notes = _merge(params, with_head, path)
  if with_head is not pretrained:
    notes.append(f"started the prediction head from the checkpoint's "
                 f"{family_of(model_config).prediction_head_from} transform (as HF does)")
  return params, notes


def _prediction_head_from(pretrained: dict, params: dict, model_config: BertConfig) -> dict:
  """A pretraining checkpoint's head transform as the prediction head's start, where the family
  says HF's from_pretrained does so (`Family.prediction_head_from`: ModernBERT's MLM head)."""
  source = family_of(model_config).prediction_head_from
  if not source or "head" not in params or "head" in pretrained or source not in pretrained:
    return pretrained
  head = pretrained[source]
  return {**pretrained, "head": {"dense": head["transform"],
                                 "layer_norm": head["transform_layer_norm"]}}


def _merge(params, pretrained, path: str):
  """Copies every tensor of `pretrained` into `params`; shapes and names must match.

  Adapts the usual encoder/task differences and says so: an encoder-only checkpoint goes
  under a headed model's `bert`; a pretraining checkpoint gives only its encoder to a
  fine-tuning model (its MLM/NSP heads are dropped); a pooler the model lacks (token
  tasks) is dropped. Heads the checkpoint lacks keep their fresh initialisation, and so do
  task heads whose shapes differ from the model's (a fine-tuned checkpoint of another
  label count, e.g. MNLI's 3 classes before RTE's 2: HF's ignore_mismatched_sizes).
  """
  def merge(ours, theirs, prefix):
    if not isinstance(theirs, dict):
      if ours.shape != theirs.shape:
        raise ValueError(f"init_from {path}: {prefix} has shape {theirs.shape}, the model "
                         f"expects {ours.shape}")
      return jnp.asarray(theirs, ours.dtype)
    unknown = set(theirs) - set(ours)
    if unknown:
      raise ValueError(f"init_from {path}: {prefix or 'params'} has no {sorted(unknown)}")
    return {k: merge(ours[k], theirs[k], f"{prefix}/{k}" if prefix else k) if k in theirs
            else ours[k] for k in ours}

  notes = []
  if "bert" in params and "bert" not in pretrained:
    pretrained = {"bert": pretrained}  # an encoder-only checkpoint under a headed model
  dropped = sorted(set(pretrained) - set(params))
  if "bert" in params and dropped:
    pretrained = {k: v for k, v in pretrained.items() if k in params}
    notes.append(f"dropped the checkpoint's {dropped}")
  mismatched = [head for head in sorted(set(pretrained) & set(params) - {"bert"})
                if _shapes(pretrained[head]) != _shapes(params[head])]
  for head in mismatched:
    notes.append(f"newly initialised {head}: the checkpoint's has the shapes "
                 f"{_shapes(pretrained[head])}, the model's {_shapes(params[head])}")
  pretrained = {k: v for k, v in pretrained.items() if k not in mismatched}
  encoder, theirs = params.get("bert", params), pretrained.get("bert", pretrained)
  if "pooler" in theirs and "pooler" not in encoder:
    theirs = {k: v for k, v in theirs.items() if k != "pooler"}
    pretrained = {**pretrained, "bert": theirs} if "bert" in pretrained else theirs
    notes.append("dropped the checkpoint's pooler (the model has none)")
  fresh = sorted(set(params) - set(pretrained) - set(mismatched))
  if "bert" in params:  # e.g. the pooler a classifier adds to a RoBERTa/DistilBERT encoder
    fresh += [f"bert/{k}" for k in sorted(set(params["bert"]) - set(pretrained["bert"]))]
  if fresh:
    notes.append(f"newly initialised {fresh}")
  return merge(params, pretrained, ""), notes


def _shapes(tree) -> dict:
  """{"dense/kernel": (768, 3), ...}: the shapes of a params subtree, by path."""
  if not isinstance(tree, dict):
    return {"": tuple(np.shape(tree))}
  return dict(sorted((f"{k}/{path}".rstrip("/"), shape) for k, sub in tree.items()
                     for path, shape in _shapes(sub).items()))
