"""The family tables agree: every member is in models/families.py's FAMILIES, weights/
hf_families.py's FAMILIES and weights/mapping.py's NAMES (no other table is keyed by the
members, and each side writes only its own), and its HF names cover every param of a tiny
model of each of its HF classes (bare encoder, heads, fine-tuned heads)."""
import ast
import dataclasses
import os

import pytest

from bert_jax.weights import hf_families, mapping
from bert_jax.models import families as model_families
from tests.helpers.family_tables import assert_every_param_maps, tiny_config

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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
    model_families.register("roberta", model_families.FAMILIES["roberta"])
  with pytest.raises(ValueError, match="family 'roberta' is already in bert_jax.weights"):
    hf_families.register("roberta", hf_families.FAMILIES["roberta"], mapping.NAMES["roberta"])
  hf_families.check_tables()


def test_the_hf_side_of_a_member_needs_its_models_entry_first():
  with pytest.raises(ValueError, match=r"family 'xlnet' is not in bert_jax.models.families."
                     r"FAMILIES \(declare it there first"):
    hf_families.register("xlnet", hf_families.FAMILIES["bert"], mapping.NAMES["bert"])
  assert "xlnet" not in hf_families.FAMILIES and "xlnet" not in mapping.NAMES


@pytest.mark.parametrize("old,new", [("task_head", "prediction_head"),
                                     ("task_head_from", "prediction_head_from")])  # old, new
def test_a_renamed_family_field_is_refused_with_its_new_name(old, new):
  with pytest.raises(ValueError, match=rf"^Family\({old}=\.\.\.\): the field is now '{new}'$"):
    dataclasses.replace(model_families.FAMILIES["modernbert"], **{old: "prediction"})
  assert dataclasses.replace(model_families.FAMILIES["bert"], prediction_head="prediction"
                             ).prediction_head == "prediction"


def _keyed_by_members(node: ast.AST, members: set[str], architectures: set[str]) -> bool:
  """Whether `node` is a dict display with two or more of the members' names as keys (a
  table keyed by `Family.architecture`, whose names some members share, is not)."""
  if not isinstance(node, ast.Dict):
    return False
  keys = {key.value for key in node.keys if isinstance(key, ast.Constant)}
  return len(keys & members) >= 2 and not keys <= architectures


def _source(module) -> str:
  """A module's file, relative to the repository."""
  return os.path.relpath(module.__file__, REPO).replace(os.sep, "/")


def test_no_other_table_in_the_package_is_keyed_by_family_member():
  """The members' names key the models' table and the weights side's only: a new table
  keyed by them (a per-family dict elsewhere) would be one more place for a member to be
  missing; its data goes into the member's row of one of these instead."""
  members = set(model_families.FAMILIES)
  architectures = {family.architecture for family in model_families.FAMILIES.values()}
  declared = {(_source(model_families), "FAMILIES"), (_source(hf_families), "FAMILIES"),
              (_source(mapping), "NAMES"),
              # one experiment's choice per checkpoint family (not a table a member must
              # be in: the config refuses the others by name)
              ("configs/continued.py", "RECIPES")}
  found, seen = [], set()
  for folder in ("bert_jax", "configs"):
    for root, _, names in os.walk(os.path.join(REPO, folder)):
      for name in sorted(n for n in names if n.endswith(".py")):
        path = os.path.relpath(os.path.join(root, name), REPO).replace(os.sep, "/")
        tree = ast.parse(open(os.path.join(REPO, path), encoding="utf-8").read())
        allowed = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
                   and len(node.targets) == 1
                   and (path, getattr(node.targets[0], "id", None)) in declared}
        seen |= {(path, node.targets[0].id) for node in ast.walk(tree)
                 if isinstance(node, ast.Assign) and id(node.value) in allowed}
        found += [f"{path}:{node.lineno}" for node in ast.walk(tree)
                  if _keyed_by_members(node, members, architectures)
                  and id(node) not in allowed]
  assert seen == declared
  assert not found, f"tables keyed by family member outside the declared ones: {found}"
