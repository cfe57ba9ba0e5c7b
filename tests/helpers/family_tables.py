"""Random params of each family member's HF classes, mapped both ways."""
import numpy as np

from bert_jax.weights import hf_families, hf, mapping
from bert_jax.models import families as model_families
from bert_jax.models.config import SIZES, BertConfig, config_for_size

# Odd tiny shapes of each member (head and task-model tests in and out of HF).
TINY_MEMBERS = {
    "bert": BertConfig(vocab_size=83, hidden_size=36, num_hidden_layers=2,
                       num_attention_heads=3, intermediate_size=52,
                       max_position_embeddings=32),
    "roberta": BertConfig(family="roberta", vocab_size=83, hidden_size=36,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=52,
                          max_position_embeddings=40, type_vocab_size=1,
                          layer_norm_eps=1e-5, pad_token_id=1),
    "albert": BertConfig(family="albert", vocab_size=83, hidden_size=36, embedding_size=20,
                         num_hidden_layers=2, num_attention_heads=3, intermediate_size=52,
                         max_position_embeddings=32, layer_sharing="all"),
    "electra": BertConfig(family="electra", vocab_size=83, hidden_size=36, embedding_size=20,
                          num_hidden_layers=2, num_attention_heads=3, intermediate_size=52,
                          max_position_embeddings=32),
    "distilbert": BertConfig(family="distilbert", vocab_size=83, hidden_size=36,
                             num_hidden_layers=2, num_attention_heads=3, intermediate_size=52,
                             max_position_embeddings=32, type_vocab_size=0),
    # The released structure (no biases; layer 1 local, window +-2) ...
    "modernbert": BertConfig(family="modernbert", vocab_size=83, hidden_size=36,
                             num_hidden_layers=2, num_attention_heads=3, intermediate_size=52,
                             max_position_embeddings=32, type_vocab_size=0, pad_token_id=3,
                             layer_norm_eps=1e-5, norm_bias=False, mlm_transform_bias=False,
                             attention_bias=False, mlp_bias=False, local_attention=5,
                             global_attn_every_n_layers=2),
    # ... and every bias on (the prediction head's dense and norm biases too), tanh GELU.
    "modernbert_biases": BertConfig(family="modernbert", vocab_size=83, hidden_size=36,
                                    num_hidden_layers=2, num_attention_heads=3,
                                    intermediate_size=52, max_position_embeddings=32,
                                    type_vocab_size=0, pad_token_id=0, layer_norm_eps=1e-5,
                                    hidden_act="gelu_tanh", local_attention=5,
                                    global_attn_every_n_layers=2),
}


def tiny_config(name: str):
  """The member's "-tiny" size (else BERT's tiny shape with its family), 99 pieces."""
  config = (config_for_size(f"{name}-tiny") if f"{name}-tiny" in SIZES
            else config_for_size("tiny", family=name))
  return config.replace(vocab_size=99, pad_token_id=min(config.pad_token_id, 1))


def random_params(shapes: dict, seed: int = 0) -> dict:
  """Nested float32 params of the flat {path: shape}, normal values."""
  rng = np.random.default_rng(seed)
  return mapping.unflatten({path: rng.normal(size=shape).astype(np.float32)
                            for path, shape in shapes.items()})


def hf_classes(name: str) -> list[tuple[str, dict | None]]:
  """(HF class, our spec or None) of each class the member converts to and from."""
  entry = hf_families.FAMILIES[name]
  specs = [(cls, None) for cls in entry.head_classes.values()
           if entry.task_of_class(cls) is None]
  for task, cls in entry.task_classes:
    spec = {"headed_model": task}
    if task in ("sequence_classification", "token_classification"):
      spec["num_labels"] = 3
    specs.append((cls, spec))
  return specs


def assert_every_param_maps(config) -> None:
  """Each HF class of config.family: random params of our model -> HF state -> the same
  params (an unmapped param or an unconsumed tensor is an error in either direction)."""
  name = config.family
  entry = hf_families.FAMILIES[name]
  head_model = {cls: task for task, cls in entry.head_classes.items()}
  rows = [(entry.encoder_class, None, False)] + [(cls, spec, True)
                                                for cls, spec in hf_classes(name)]
  for cls, spec, with_heads in rows:
    headed_model = (spec or head_model[cls]) if with_heads else None
    shapes = hf.expected_shapes(config, with_heads, headed_model=headed_model,
                                with_pooler=model_families.FAMILIES[name].pooler)
    params = random_params(shapes)
    state = hf.params_to_state(params, config, spec)
    back, _ = hf.state_to_params(hf.normalize_names(dict(state), cls, name), config, cls,
                                 spec=spec)
    flat, again = mapping.flatten(params), mapping.flatten(back)
    assert flat.keys() == again.keys(), cls
    for path in flat:
      np.testing.assert_array_equal(flat[path], again[path], err_msg=f"{cls}: {path}")
