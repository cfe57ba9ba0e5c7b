"""The family tables agree: every member is in models/families.py's FAMILIES, convert/
hf_families.py's FAMILIES and convert/mapping.py's NAMES, and its HF names cover every param
of a tiny model of each of its HF classes (bare encoder, heads, fine-tuned heads)."""
import numpy as np
import pytest

from bert_jax.convert import hf_families, hf, mapping
from bert_jax.models import families as model_families
from bert_jax.models.config import SIZES, config_for_size


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
    spec = {"task_model": task}
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
    task_model = (spec or head_model[cls]) if with_heads else None
    shapes = hf.expected_shapes(config, with_heads, task_model=task_model,
                                with_pooler=model_families.FAMILIES[name].pooler)
    params = random_params(shapes)
    state = hf.params_to_state(params, config, spec)
    back, _ = hf.state_to_params(hf.normalize_names(dict(state), cls, name), config, cls,
                                 spec=spec)
    flat, again = mapping.flatten(params), mapping.flatten(back)
    assert flat.keys() == again.keys(), cls
    for path in flat:
      np.testing.assert_array_equal(flat[path], again[path], err_msg=f"{cls}: {path}")


def test_the_three_tables_have_the_same_members():
  hf_families.check_tables()
  assert (set(model_families.FAMILIES) == set(hf_families.FAMILIES) == set(mapping.NAMES)
          == {"bert", "roberta", "distilbert", "albert", "electra", "modernbert", "ernie",
              "reformer"})


def test_a_member_missing_from_one_table_is_a_one_line_error(monkeypatch):
  monkeypatch.setitem(mapping.NAMES, "xlnet", mapping.NAMES["bert"])
  with pytest.raises(ValueError, match=r"bert_jax.models.families.FAMILIES lacks the family "
                     r"member\(s\) \['xlnet'\]") as raised:
    hf_families.check_tables()
  assert "\n" not in str(raised.value)


def test_register_refuses_a_name_already_taken():
  with pytest.raises(ValueError, match="family 'roberta' is already in bert_jax.models"):
    hf_families.register("roberta", model_families.FAMILIES["roberta"],
                      hf_families.FAMILIES["roberta"], mapping.NAMES["roberta"])
  hf_families.check_tables()


@pytest.mark.parametrize("name", sorted(model_families.FAMILIES))
def test_hf_names_cover_every_param_of_each_class(name):
  assert_every_param_maps(tiny_config(name))
