"""bench/recipe_plan.py: the paper recipes' rows (micro-batches of each paper's batch), their
token budgets and the hours at the bound that bench/target_plan.py --recipes prints."""
import importlib.util
import os

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "recipe_plan", os.path.join(REPO, "bench", "recipe_plan.py"))
recipe_plan = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(recipe_plan)


def _fake_compiler(monkeypatch):
  """A v6e-8 compile whose bound allows 1M tokens/s per chip for 256 rows of 512."""
  report = {"device_kind": "TPU v6 lite", "devices": 8, "global_batch": 256, "seq_len": 512,
            "peak_bytes_per_device": 2 ** 30, "model_flops_per_step": 8 * 918e12 * 0.016384,
            "xla_flops_per_device": None, "xla_bytes_accessed_per_device": 0.0}
  monkeypatch.setattr(recipe_plan.target_plan.compile_report, "compile_report",
                      lambda *_: dict(report))


def test_every_recipe_row_is_a_micro_batch_of_its_papers_batch():
  """Each paper recipe on each host: a whole number of rows per chip whose accumulation
  gives the paper's global batch, and the budget is the paper's steps x batch x length."""
  rows = recipe_plan.recipe_rows()
  assert len(rows) == len(recipe_plan.RECIPES) * len(recipe_plan.RECIPE_TARGETS)
  for row in rows:
    chips = int(row.mesh.split("=")[1])
    plan = recipe_plan.budget(row)
    assert row.batch % chips == 0 and plan["paper_batch"] % row.batch == 0, row
    assert plan["accumulation"] * row.batch == plan["paper_batch"]
  by_recipe = {row.recipe: recipe_plan.budget(row) for row in rows}
  assert by_recipe["roberta:size=base"]["budget_tokens"] == 500_000 * 8192 * 512
  assert by_recipe["base:seq=128"]["budget_tokens"] == 900_000 * 256 * 128
  assert abs(by_recipe["modernbert:size=base"]["budget_tokens"] / 1.719e12 - 1) < 1e-4
  assert by_recipe["ernie:size=base"]["budget_tokens"] == 1_000_000 * 256 * 512
  config = recipe_plan.recipe_config(next(r for r in rows if r.recipe == "reformer:size=enwik8"
                                          and r.target == "tpu:v5p-8"))
  assert (config.data.batch_size, config.grad_accum_steps, config.mesh.fsdp) == (4, 1, 4)
  assert recipe_plan.select_recipes(rows, "albert", "tpu:v6e-8") == [
      r for r in rows if r.recipe.startswith("albert") and r.target == "tpu:v6e-8"]


def test_a_recipes_hours_are_its_budget_at_the_bound(monkeypatch):
  """RoBERTa-base's 2.1T tokens on a v6e-8 whose bound allows 1M tokens/s per chip: the
  budget over 8M tokens/s, in hours, and 8 chip-hours an hour."""
  _fake_compiler(monkeypatch)
  row = recipe_plan.RecipeRow("roberta:size=base", "tpu:v6e-8", "fsdp=8", 256)
  result = recipe_plan.target_plan.plan(row)
  assert result["accumulation"] == 32 and round(result["tokens_per_s_per_chip"]) == 1_000_000
  assert abs(result["budget_hours"] - 500_000 * 8192 * 512 / 8e6 / 3600) < 1e-6
  assert abs(result["budget_chip_hours"] - 8 * result["budget_hours"]) < 1e-6
  line = recipe_plan.recipe_table([result], False).splitlines()[-1]
  assert line.startswith("| roberta:size=base | 512 | tpu:v6e-8 | fsdp=8 | 256 (x 32) |")


def test_target_plan_with_recipes_prints_the_recipe_table(monkeypatch, capsys):
  """bench/target_plan.py --recipes plans recipe_plan's rows and prints recipe_table, then
  the rows' JSON (a fake compiler: no libtpu needed)."""
  _fake_compiler(monkeypatch)
  results = recipe_plan.target_plan.main(["--recipes", "--rows=roberta", "--targets=tpu:v6e-8"])
  head, _, line, _ = capsys.readouterr().out.splitlines()
  assert head.startswith("| recipe | seq | target | mesh | micro-batch (x accum.) |")
  assert line.startswith("| roberta:size=base | 512 | tpu:v6e-8 | fsdp=8 | 256 (x 32) |")
  assert [r["row"]["recipe"] for r in results] == ["roberta:size=base"]


def test_distilberts_row_plans_with_a_config_only_bert_base_teacher():
  """DistilBERT's recipe reads its teacher's architecture from a folder holding only the
  config.json of BERT-base (12 x 768): the row is planned without any weights."""
  from bert_jax import weights
  row = next(r for r in recipe_plan.recipe_rows() if r.recipe == "distilbert:size=base")
  config = recipe_plan.recipe_config(row)
  teacher = config.distillation.teacher
  assert os.listdir(teacher) == ["config.json"]
  source = weights.resolve(teacher, check_weights=False)
  assert (source.config.num_hidden_layers, source.config.hidden_size) == (12, 768)
  assert config.model.num_hidden_layers == 6 and config.objectives == "distill:5,mlm:2,cosine:1"


def test_set_and_rows_per_chip_change_the_rows_and_name_them_in_the_table(monkeypatch, capsys):
  """--set=KEY=VALUE sets a config field (read as its type) after the recipe's, and
  --rows_per_chip the micro-batch; the table names the change; bad input is refused in one
  line naming the field or the batch."""
  import pytest
  rows = recipe_plan.select_recipes(recipe_plan.recipe_rows(), "base:seq=128", "tpu:v5e-8")
  changed = recipe_plan.with_changes(rows, ["model.dtype=bfloat16", "optim.learning_rate=2e-4"],
                                     rows_per_chip=16)
  config = recipe_plan.recipe_config(changed[0])
  assert (config.model.dtype, config.optim.learning_rate) == ("bfloat16", 2e-4)
  assert config.data.batch_size == 16 * 8 and recipe_plan.budget(changed[0])["accumulation"] == 2
  with pytest.raises(ValueError, match="micro-batch of 24, which does not divide"):
    recipe_plan.with_changes(rows, rows_per_chip=3)
  with pytest.raises(ValueError, match="no field 'modle'"):
    recipe_plan.recipe_config(recipe_plan.with_changes(rows, ["modle.dtype=bfloat16"])[0])
  _fake_compiler(monkeypatch)
  recipe_plan.target_plan.main(["--recipes", "--rows=roberta", "--targets=tpu:v6e-8",
                                "--set=model.dtype=float32"])
  line = capsys.readouterr().out.splitlines()[2]
  assert line.startswith("| roberta:size=base, model.dtype=float32 | 512 | tpu:v6e-8 |")


def test_a_float32_recipe_plans_with_xla_attention_on_gpus():
  """BERT's recipe computes in float32, which cuDNN's flash kernel refuses: on 8 H100s its
  row takes XLA's attention, and cuDNN's (where installed) once --set makes it bfloat16;
  a TPU row takes splash either way."""
  rows = recipe_plan.recipe_rows()
  gpu = next(r for r in rows if r.recipe == "base:seq=128" and r.target == "gpu:h100x8")
  assert recipe_plan.recipe_config(gpu).model.attention_impl == "xla"
  bf16 = recipe_plan.with_changes([gpu], ["model.dtype=bfloat16"])[0]
  assert (recipe_plan.recipe_config(bf16).model.attention_impl
          == recipe_plan.target_plan.ATTENTION["gpu"])
  tpu = next(r for r in rows if r.recipe == "base:seq=128" and r.target == "tpu:v5e-8")
  assert recipe_plan.recipe_config(tpu).model.attention_impl == "splash"
