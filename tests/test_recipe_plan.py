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


def _linear_compiler(monkeypatch, fixed_gib, gib_per_row, seq=512, refuse_over_gib=None):
  """A v4-8 (4 chips, 32 GiB) compile whose per-chip peak is fixed_gib + gib_per_row x rows
  per chip, its bytes (and so the bound) the same; over refuse_over_gib the compiler refuses
  it, naming what it needs. Returns the batches compiled."""
  compiled = []

  def compile_report(config, target):
    batch = int(config.data.batch_size)
    compiled.append(batch)
    peak = (fixed_gib + gib_per_row * batch / 4) * 2 ** 30
    report = {"device_kind": "TPU v4", "devices": 4, "global_batch": batch, "seq_len": seq,
              "model_flops_per_step": 1.0, "xla_flops_per_device": None,
              "xla_bytes_accessed_per_device": peak}
    if refuse_over_gib and peak > refuse_over_gib * 2 ** 30:
      return dict(report, out_of_memory="RESOURCE_EXHAUSTED", peak_bytes_per_device=0,
                  temp_bytes_per_device=peak, compiler_hbm_bytes_per_device=30.75 * 2 ** 30)
    return dict(report, peak_bytes_per_device=peak)

  monkeypatch.setattr(recipe_plan.target_plan.compile_report, "compile_report", compile_report)
  return compiled


def test_the_fewest_accumulation_steps_are_the_largest_dividing_micro_batch_that_fits(
    monkeypatch):
  """RoBERTa-base's 8,192 rows on a v4-8 (2,048 a chip): the micro-batches are 4 x the
  divisors of 2,048. With 2 GiB fixed and 0.1 GiB a row, 300 rows a chip fit 32 GiB and 512
  do not: the search ends at 256 a chip (x 8) in three compiles (the line through zero
  and the recipe's 32 a chip aims at 128, the line through both at 256, then 512 misses);
  the bound's bytes fall per token, so the hours fall below the recipe's own
  micro-batch's."""
  compiled = _linear_compiler(monkeypatch, fixed_gib=2.0, gib_per_row=0.1)
  row = next(r for r in recipe_plan.recipe_rows()
             if r.recipe == "roberta:size=base" and r.target == "tpu:v4-8")
  assert recipe_plan.micro_batches(row) == [4 * 2 ** k for k in range(12)]
  first = recipe_plan.target_plan.plan(row)
  trail = []
  best = recipe_plan.fewest_accumulation(row, first, trail)
  assert (best["global_batch"], best["accumulation"]) == (1024, 8)
  assert compiled == [128, 512, 1024, 2048]
  assert [t["fits"] for t in trail] == [True, True, False]
  assert best["next_micro_batch"]["batch"] == 2048 and not best["next_micro_batch"]["refused"]
  assert best["recipe_micro_batch"]["accumulation"] == 64
  assert best["budget_hours"] < best["recipe_micro_batch"]["budget_hours"]
  line = recipe_plan.recipe_table([best], True).splitlines()[-1]
  assert line.startswith("| roberta:size=base | 512 | tpu:v4-8 | fsdp=4 | 1,024 (x 8) | 27.60 "
                         "| 32 | yes | 2,048: 53.20 |")
  assert line.endswith(f"({first['global_batch']:,} x 64) |")


def test_the_search_bisects_past_a_refusal_and_stops_at_the_papers_batch(monkeypatch):
  """A compiler that refuses past 20 GiB: the line's guess is refused, and the divisors
  between are bisected to the last that fits. ELECTRA-small's 128 rows on 8 chips fit at
  once: no compile beyond the recipe's, and the table says the paper's batch fits."""
  compiled = _linear_compiler(monkeypatch, fixed_gib=2.0, gib_per_row=0.1, refuse_over_gib=20)
  row = next(r for r in recipe_plan.recipe_rows()
             if r.recipe == "roberta:size=base" and r.target == "tpu:v4-8")
  best = recipe_plan.fewest_accumulation(row, recipe_plan.target_plan.plan(row))
  assert best["global_batch"] == 512 and best["next_micro_batch"]["refused"]
  assert compiled[0] == 128 and compiled[-1] in (512, 1024) and len(compiled) <= 4
  small = next(r for r in recipe_plan.recipe_rows()
               if r.recipe == "electra:size=small" and r.target == "tpu:v5e-8")
  compiled.clear()
  first = recipe_plan.target_plan.plan(small)
  best = recipe_plan.fewest_accumulation(small, first)
  assert compiled == [small.batch] and best["accumulation"] == 1
  assert "none: the paper's batch fits" in recipe_plan.recipe_table([best], True)


def test_target_plan_with_recipes_and_max_batch_prints_the_searched_row(monkeypatch, capsys):
  """`--recipes --max_batch`: the row at the fewest accumulation steps, its compiles in the
  JSON and the recipe's own micro-batch's hours in the last column."""
  _linear_compiler(monkeypatch, fixed_gib=2.0, gib_per_row=0.1)
  results = recipe_plan.target_plan.main(
      ["--recipes", "--rows=roberta", "--targets=tpu:v4-8", "--max_batch"])
  head, _, line, _ = capsys.readouterr().out.splitlines()
  assert head.endswith("| next micro-batch: peak GiB/chip | bound ms/micro-step | tokens/s/chip "
                       "at the bound | paper tokens | hours at the bound (estimate) | chip-hours "
                       "(estimate) | hours at the recipe's micro-batch (estimate) |")
  assert "| 1,024 (x 8) |" in line and line.endswith("(128 x 64) |")
  assert [c["batch"] for c in results[0]["max_batch_compiles"]] == [512, 1024, 2048]


def test_the_search_goes_down_when_the_recipes_micro_batch_does_not_fit(monkeypatch):
  """A chip that takes 3 GiB (refusing more): the recipe's 32 rows a chip (5.2 GiB) do
  are refused, so the search halves the micro-batch: 16 a chip (3.6 GiB) is refused too,
  8 (2.8 GiB) fits, and the row is planned there with 16 a chip as its next."""
  compiled = _linear_compiler(monkeypatch, fixed_gib=2.0, gib_per_row=0.1, refuse_over_gib=3)
  row = next(r for r in recipe_plan.recipe_rows()
             if r.recipe == "roberta:size=base" and r.target == "tpu:v4-8")
  best = recipe_plan.fewest_accumulation(row, recipe_plan.target_plan.plan(row))
  assert (best["global_batch"], best["accumulation"]) == (32, 256)
  assert compiled == [128, 64, 32] and best["next_micro_batch"]["batch"] == 64
  assert best["fits"] and best["next_micro_batch"]["refused"]
