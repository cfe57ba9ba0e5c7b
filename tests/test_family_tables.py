"""The family tables agree: every member is in models/families.py's FAMILIES, weights/
hf_families.py's FAMILIES and weights/mapping.py's NAMES, and its HF names cover every param
of a tiny model of each of its HF classes (bare encoder, heads, fine-tuned heads)."""
import pytest

from bert_jax.weights import hf_families, mapping
from bert_jax.models import families as model_families
from tests.helpers.family_tables import assert_every_param_maps, tiny_config


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


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(model_families.FAMILIES))
def test_hf_names_cover_every_param_of_each_class(name):
  assert_every_param_maps(tiny_config(name))
