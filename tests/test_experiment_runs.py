"""experiments.run carrying out runs: one results row per finished run (its stages'
metrics in it), rows reused across sweeps by fingerprint, and a run's dependencies trained
first. No training: the train command is replaced by a stand-in that writes its results.
"""
import json
import os
import shutil

import pytest

from experiments import run as runner
from experiments import sweeps


def test_finished_runs_write_one_row_each_and_failures_none(tmp_path, monkeypatch, capsys):
  """The train command is replaced: swag 'finishes' (eval_results.json), wnli fails."""
  monkeypatch.chdir(tmp_path)
  accuracy = iter([0.5, 0.75])

  def fake_execute(cmd, log_path):
    workdir = cmd[-1].split("=", 1)[1]
    if workdir.endswith("wnli"):
      return 1
    os.makedirs(workdir)
    with open(os.path.join(workdir, "eval_results.json"), "w") as f:
      json.dump({"step": 6, "eval_accuracy": next(accuracy), "loss": 1.0}, f)
    return 0

  monkeypatch.setattr(runner, "_execute", fake_execute)
  path = str(tmp_path / "r.jsonl")
  with pytest.raises(SystemExit, match="^1 of 2 runs failed: wnli$"):
    runner.main(["finetune_minilm", "wnli", "swag", f"--results={path}"])
  rows = sweeps.read_results(path)
  assert [row["run"] for row in rows] == ["swag"]
  assert rows[0]["command"] == ("python -m bert_jax.train --config=configs/swag.py "
                                "--config.optim.learning_rate=1e-4 "
                                "--workdir=runs/finetune_minilm/swag")
  assert rows[0]["metrics"] == {"step": 6, "eval_accuracy": 0.5}  # METRICS keys only
  assert rows[0]["git_revision"] == runner.git_revision()
  runner.main(["finetune_minilm", "swag", f"--results={path}"])  # has a row: skipped
  assert sweeps.read_results(path)[0]["metrics"]["eval_accuracy"] == 0.5
  runner.main(["finetune_minilm", "--force", "swag", f"--results={path}"])  # replaced
  assert [row["metrics"]["eval_accuracy"] for row in sweeps.read_results(path)] == [0.75]


def test_a_run_with_stages_writes_one_row_with_every_stage(tmp_path, monkeypatch):
  """The train commands are replaced: each writes its eval_results.json and run report."""
  os.makedirs(tmp_path / "runs/corpus")
  (tmp_path / "runs/corpus/pretrain.txt").write_text("")
  (tmp_path / "runs/corpus/vocab-8k.txt").write_text("a\nb\n")
  monkeypatch.chdir(tmp_path)

  def fake_execute(cmd, log_path):
    workdir = cmd[-1].split("=", 1)[1]
    os.makedirs(workdir)
    stage = workdir.rsplit(".", 1)[1] if "." in os.path.basename(workdir) else None
    with open(os.path.join(workdir, "eval_results.json"), "w") as f:
      json.dump({"step": 3, "eval_mlm_accuracy": 0.25} if stage is None else
                {"eval_accuracy": 0.5, "eval_f1": 0.625}, f)
    with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
      f.write(json.dumps({"step": 2, "eval_mlm_accuracy": 0.125}) + "\n")
    with open(os.path.join(workdir, "run_report.json"), "w") as f:
      json.dump({"invocations": [{"steps": 3, "tokens": 30, "wall_seconds": 2.0,
                                  "train_seconds": 1.0, "model_flops": 1e9,
                                  "energy": {"kwh": 1e-6, "co2e_kg": 5e-7}}]}, f)
    return 0

  monkeypatch.setattr(runner, "_execute", fake_execute)
  path = str(tmp_path / "r.jsonl")
  runner.main(["bert_objectives", "mlm_nsp_s0", f"--results={path}"])
  [row] = sweeps.read_results(path)
  assert row["metrics"]["eval_mlm_accuracy"] == 0.25
  assert row["metrics"]["eval_by_step"] == {"2": {"eval_mlm_accuracy": 0.125}}
  assert row["metrics"]["sst2"] == {"eval_accuracy": 0.5}
  assert row["metrics"]["conll_features"] == {"eval_f1": 0.625}
  assert set(row["stage_commands"]) == {"sst2", "mrpc", "conll", "conll_features"}
  assert row["report"]["invocations"] == 5 and row["report"]["tokens"] == 150


def _counting_execute(executed: list, eval_results):
  """A stand-in for runner._execute: records each workdir in `executed` and writes
  eval_results(number of commands so far) there, with an empty metrics.jsonl."""
  def fake_execute(cmd, log_path):
    workdir = cmd[-1].split("=", 1)[1]
    executed.append(workdir)
    os.makedirs(workdir)
    with open(os.path.join(workdir, "eval_results.json"), "w") as f:
      json.dump(eval_results(len(executed)), f)
    open(os.path.join(workdir, "metrics.jsonl"), "w").close()
    return 0
  return fake_execute


def test_a_run_another_sweep_already_ran_reuses_its_row(tmp_path, monkeypatch, capsys):
  """BERT Table 8's 80/10/10 run is bert_objectives' MLM+NSP run (one resolved config);
  the train commands are replaced and counted."""
  os.makedirs(tmp_path / "runs/corpus")
  (tmp_path / "runs/corpus/pretrain.txt").write_text("")
  (tmp_path / "runs/corpus/vocab-8k.txt").write_text("a\nb\n")
  os.makedirs(tmp_path / "results")
  monkeypatch.chdir(tmp_path)
  executed = []
  monkeypatch.setattr(runner, "_execute", _counting_execute(
      executed, lambda n: {"step": 3, "eval_mlm_accuracy": n / 100}))
  runner.main(["bert_objectives", "mlm_nsp_s0", "--results=results/bert_objectives.jsonl"])
  assert len(executed) == 5  # pretraining + 4 stages
  [first] = sweeps.read_results("results/bert_objectives.jsonl")
  split = "results/bert_masking_split.jsonl"
  runner.main(["bert_masking_split", "mask_80_10_10_s0", "mask_100_0_0_s0",
               f"--results={split}"])
  assert len(executed) == 10  # only 100/0/0 ran
  assert all("mask_100_0_0_s0" in workdir for workdir in executed[5:])
  shared, other = sweeps.read_results(split)
  assert shared["run"] == "mask_80_10_10_s0" and shared["sweep"] == "bert_masking_split"
  assert shared["same_as"] == "bert_objectives/mlm_nsp_s0"
  assert shared["metrics"] == first["metrics"] and shared["command"] == first["command"]
  assert other["fingerprint"] != first["fingerprint"] and "same_as" not in other
  assert ("mask_80_10_10_s0: the same run as bert_objectives/mlm_nsp_s0"
          in capsys.readouterr().out)
  # A row recorded before a config field was added (its stored fingerprint stale) is still
  # the same run: matched by its run's fingerprint as its sweep specifies it today.
  rows = sweeps.read_results("results/bert_objectives.jsonl")
  with open("results/bert_objectives.jsonl", "w") as f:
    f.writelines(json.dumps({**row, "fingerprint": "stale"}) + "\n" for row in rows)
  os.remove(split)
  runner.main(["bert_masking_split", "mask_80_10_10_s0", f"--results={split}"])
  assert len(executed) == 10
  assert sweeps.read_results(split)[0]["same_as"] == "bert_objectives/mlm_nsp_s0"
  # A different seed is a different run; --force runs a shared one anyway.
  runner.main(["bert_masking_split", "mask_80_10_10_s1", f"--results={split}"])
  assert len(executed) == 15
  runner.main(["bert_masking_split", "mask_80_10_10_s0", "--force", f"--results={split}"])
  assert len(executed) == 20 and "same_as" not in sweeps.read_results(split)[0]


def test_a_student_whose_teacher_workdir_is_gone_trains_the_teacher_first(tmp_path,
                                                                         monkeypatch, capsys):
  """distillation's students read runs/distillation/teacher_sSEED: with the teacher's row
  present but its workdir gone (another machine), the runner trains the teacher again
  before the student; with the workdir here, it does not."""
  os.makedirs(tmp_path / "runs/corpus")
  (tmp_path / "runs/corpus/pretrain.txt").write_text("")
  (tmp_path / "runs/corpus/vocab-8k.txt").write_text("a\nb\n")
  monkeypatch.chdir(tmp_path)
  executed = []
  monkeypatch.setattr(runner, "_execute", _counting_execute(
      executed, lambda n: {"step": 3, "eval_mlm_accuracy": 0.5, "eval_accuracy": 0.5,
                           "eval_f1": 0.5}))
  assert runner.reads("distillation", sweeps.load("distillation").get_sweep())[
      "distilled_s0"] == ["teacher_s0"]
  path = str(tmp_path / "d.jsonl")
  runner.main(["distillation", "teacher_s0", f"--results={path}"])
  shutil.rmtree("runs/distillation")  # a fresh machine: the row stays, the workdir is gone
  del executed[:]
  runner.main(["distillation", "distilled_s0", f"--results={path}"])
  assert [w for w in executed if "." not in os.path.basename(w)] == [
      "runs/distillation/teacher_s0", "runs/distillation/distilled_s0"]
  assert "teacher_s0 runs first: distilled_s0 reads runs/distillation/teacher_s0" in (
      capsys.readouterr().err)
  del executed[:]
  runner.main(["distillation", "teacher_init_s0", f"--results={path}"])  # teacher here now
  assert [w for w in executed if "." not in os.path.basename(w)] == [
      "runs/distillation/teacher_init_s0"]
  assert [r["run"] for r in sweeps.read_results(path)] == [
      "teacher_s0", "distilled_s0", "teacher_init_s0"]
