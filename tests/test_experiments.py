"""experiments.run / experiments.tables: commands, skip-on-rerun, results pages, tables.

No training: --print runs nothing (tests/test_experiment_runs.py covers carrying runs out).
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

from experiments import report
from experiments import run as runner
from experiments import sweeps
from experiments import tables

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _write(path, rows):
  with open(path, "w") as f:
    f.writelines(json.dumps(row) + "\n" for row in rows)
  return str(path)


def _row(run, metrics, sweep="finetune_minilm", wall_seconds=378.0):
  return {"sweep": sweep, "run": run, "command": f"python -m bert_jax.train --x={run}",
          "git_revision": "abc", "wall_seconds": wall_seconds, "finished_at": None,
          "metrics": metrics}


@pytest.fixture
def plateau_vocab(tmp_path, monkeypatch):
  """A cwd with the plateau sweep's prepared files: a 123-line vocab."""
  monkeypatch.chdir(tmp_path)
  os.makedirs("runs/corpus")
  open("runs/corpus/pretrain.txt", "w").close()
  with open("runs/corpus/vocab-8k.txt", "w") as f:
    f.writelines(f"piece{i}\n" for i in range(123))
  return tmp_path / "runs/corpus/vocab-8k.txt"


def test_finetune_table_rows(tmp_path, capsys):
  path = _write(tmp_path / "r.jsonl", [
      _row("cola", {"step": 801, "train_examples_per_sec": 73.3,
                    "eval_matthews_corrcoef": 0.2396}),
      _row("squad11", {"step": 374, "eval_f1": 60.69, "eval_exact_match": 41.76,
                       "eval_total": 1111}, wall_seconds=6894.0),
      _row("conll", {"step": 876, "train_examples_per_sec": 20.5, "eval_f1": 0.8994,
                     "eval_precision": 0.8889, "eval_recall": 0.9101})])
  tables.main(["finetune_minilm", f"--results={path}"])
  lines = capsys.readouterr().out.splitlines()
  assert lines[0] == "| run | eval scores (%) | steps | wall time | train examples/s |"
  assert lines[2] == ("| cola (dev; 3 epochs, seq 64, lr 5e-5) | matthews_corrcoef 23.96 | 801 "
                      "| 6.3 min | 73.3 |")
  # SQuAD (eval_total present) is already on the 0-100 scale: not multiplied by 100.
  assert lines[3].startswith("| squad11 (1,111 questions") and lines[3].endswith(
      "| f1 60.69, exact_match 41.76 | 374 | 114.9 min | nan |")
  assert "| f1 89.94 (precision 88.89, recall 91.01) | 876 |" in lines[4]
  # The commands, too long for a cell, follow the table as a list keyed by run.
  assert lines[5:10] == ["", "Commands:", "", "- cola: `python -m bert_jax.train --x=cola`",
                         "- squad11: `python -m bert_jax.train --x=squad11`"]


def test_plateau_table_row(tmp_path, capsys):
  evals = {"eval_mlm_accuracy": 0.1514, "eval_mlm_accuracy_corrupted": 0.1256,
           "eval_nsp_accuracy": 0.5391}
  path = _write(tmp_path / "r.jsonl", [_row(
      "guided_layer0", {"eval_by_step": {"400": {}, "800": evals}}, sweep="plateau")])
  tables.main(["plateau", f"--results={path}"])
  assert capsys.readouterr().out.splitlines()[2] == (
      "| attention guidance, layer 0 | 0.151 | 0.126 | 0.54 |")


def test_print_finetune_commands(tmp_path, capsys):
  runner.main(["finetune_minilm", "--print", f"--results={tmp_path / 'none.jsonl'}"])
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 12
  assert lines[9] == ("python -m bert_jax.train --config=configs/swag.py "
                      "--config.optim.learning_rate=1e-4 --workdir=runs/finetune_minilm/swag")
  for line, name in zip(lines, sweeps.load("finetune_minilm").get_sweep()):
    assert line.endswith(f" --workdir=runs/finetune_minilm/{name}")


def test_print_plateau_commands_read_the_vocab_size(plateau_vocab, tmp_path, capsys):
  runner.main(["plateau", "--print", f"--results={tmp_path / 'none.jsonl'}"])
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 7
  for line, name in zip(lines, sweeps.load("plateau").get_sweep()):
    assert line.startswith("python -m bert_jax.train --config=configs/tiny.py "
                           f"--config.data.vocab_path={plateau_vocab} "
                           "--config.model.vocab_size=123 --config.num_train_steps=800 ")
    assert line.endswith(f" --workdir=runs/plateau/{name}")
  assert lines[-1].endswith(" --config.attention_guidance.layers= "
                            "--workdir=runs/plateau/guided_all_layers")


def test_print_plateau_without_vocab_names_the_prepare_commands(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  with pytest.raises(SystemExit, match="runs/corpus/vocab-8k.txt first: .*learn_vocab"):
    runner.main(["plateau", "--print"])


def test_rerun_skips_runs_with_a_row(tmp_path, capsys):
  path = _write(tmp_path / "r.jsonl", [_row("swag", {"step": 6})])
  runner.main(["finetune_minilm", "swag", "wnli", "--print", f"--results={path}"])
  out, err = capsys.readouterr()
  assert len(out.splitlines()) == 1
  assert out.endswith(" --workdir=runs/finetune_minilm/wnli\n")
  assert err.splitlines() == [f"skip swag: it has a row in {path} (--force re-runs it)"]
  runner.main(["finetune_minilm", "swag", "wnli", "--print", "--force", f"--results={path}"])
  assert len(capsys.readouterr().out.splitlines()) == 2


def test_unknown_sweep_and_run_names():
  known = ", ".join(sweeps.names())
  with pytest.raises(SystemExit, match=f"unknown sweep 'nope'; known sweeps: {known}$"):
    runner.main(["nope", "--print"])
  with pytest.raises(SystemExit, match=r"unknown run\(s\) sst3 in sweep finetune_minilm \("
                     r"\d+ runs; `--print` shows each one's command\); did you mean sst2"):
    runner.main(["finetune_minilm", "sst2", "sst3", "--print"])
  out = subprocess.run([sys.executable, "-m", "experiments.tables", "nope"], cwd=REPO,
                       capture_output=True, text=True)
  assert out.returncode == 1
  assert out.stderr == f"unknown sweep 'nope'; known sweeps: {known}\n"


@pytest.mark.parametrize("sweep", [name for name in sweeps.names()
                                   if os.path.exists(sweeps.results_path(name))])
def test_committed_results_print_one_row_per_run(sweep, capsys):
  rows = sweeps.read_results(sweeps.results_path(sweep))
  assert rows and len({row["run"] for row in rows}) == len(rows)
  for row in rows:
    assert {"sweep", "run", "command", "git_revision", "wall_seconds", "finished_at",
            "metrics"} <= set(row) and row["sweep"] == sweep
  tables.main([sweep])
  out = capsys.readouterr().out.splitlines()
  assert len([line for line in out if line.startswith("|")]) == 2 + len(rows)


@pytest.mark.parametrize("sweep", ["plateau", "finetune_minilm", "family_sst2",
                                   "family_pretraining", "feature_based_ner"])
def test_results_pages_tables_are_the_printed_ones(sweep):
  """The results pages' tables (docs/results/) are what `python -m experiments.tables
  SWEEP` prints."""
  module = sweeps.load(sweep)
  table = tables.markdown(module.COLUMNS, sweeps.read_results(sweeps.results_path(sweep)))
  pages = []
  for name in sorted(os.listdir(os.path.join(REPO, "docs", "results"))):
    with open(os.path.join(REPO, "docs", "results", name)) as f:
      pages.append(f.read())
  assert table in "\n".join(pages)


def _ablation_row(run, sst2, mlm=0.2, steps=(250, 1000)):
  return {**_row(run, {"step": 1000, "eval_mlm_accuracy": mlm,
                       "eval_by_step": {str(s): {"eval_mlm_accuracy": mlm * s / 1000}
                                        for s in steps},
                       "sst2": {"eval_accuracy": sst2}, "mrpc": {"eval_f1": 0.8}},
                  sweep="bert_objectives"),
          "report": {"tokens": 100, "model_flops": 1e12, "wall_seconds": 360, "kwh": 0.01,
                     "co2e_kg": 0.005}}


def test_ablation_results_page_from_a_small_results_file(tmp_path):
  module = sweeps.load("bert_objectives")
  rows = [_ablation_row("mlm_nsp_s0", 0.80), _ablation_row("mlm_nsp_s1", 0.82),
          _ablation_row("mlm_only_s0", 0.75), _ablation_row("mlm_only_s1", 0.78)]
  text = report.render("bert_objectives", module, rows, str(tmp_path))
  lines = text.splitlines()
  assert ("| variant | seeds | held-out MLM acc | SST-2 dev acc | MRPC held-out F1 | "
          "CoNLL dev F1 (fine-tuned) | CoNLL dev F1 (features) | paper: SST-2 dev accuracy | "
          "paper: MRPC dev accuracy |") in lines
  assert ("| MLM + NSP (BERT) | 2 | 20.00 [20.00, 20.00] | 81.00 [80.00, 82.00] | "
          "80.00 [80.00, 80.00] |  |  | 92.7 | 86.7 |") in lines
  # The paper's better variant (MLM + NSP) is above on every seed here.
  assert "**Direction here: held (mlm_nsp above mlm_only on sst2 eval_accuracy, every seed).**" \
      in lines
  assert ("Sweep total (4 of 4 runs with a run report): 400 tokens, 4e+12 model FLOPs, "
          "0.40 h, 0.04 kWh, 0.02 kg CO2e (4 runs with an energy figure)") in lines
  for name in ("bert_objectives.png", "bert_objectives_curves.png"):
    assert os.path.getsize(tmp_path / name) > 1000
  overlapping = rows[:2] + [_ablation_row("mlm_only_s0", 0.81), rows[3]]
  assert report.verdict(module, overlapping).startswith("not decided")
  reversed_rows = rows[:2] + [_ablation_row("mlm_only_s0", 0.9),
                              _ablation_row("mlm_only_s1", 0.85)]
  assert report.verdict(module, reversed_rows).startswith("reversed")
  assert report.verdict(module, rows[:3]).startswith("not decided (fewer than two seeds")
  assert "Not run yet" in report.render("bert_objectives", module, [], str(tmp_path))
  assert "Stalled" not in text
  flat = _ablation_row("mlm_only_s1", 0.5)
  flat["metrics"]["eval_by_step"] = {"250": {"eval_mlm_accuracy": 0.048},
                                     "1000": {"eval_mlm_accuracy": 0.052}}
  assert report.stalled_runs(rows[:3] + [flat]) == ["mlm_only_s1"]
  assert ("Stalled (1 of 4 runs): mlm_only_s1." in
          report.render("bert_objectives", module, rows[:3] + [flat], str(tmp_path)))


def test_a_perplexity_column_is_the_mean_of_each_seeds_exp_loss(tmp_path):
  """bert_model_size shows BERT Table 6's LM column: exp(held-out MLM loss) per seed, then
  the mean and range of those (not exp of the mean loss)."""
  module = sweeps.load("bert_model_size")
  rows = []
  for run, loss in (("l2_h128_s0", 5.0), ("l2_h128_s1", 6.0)):
    row = _ablation_row(run, 0.7)
    row["metrics"]["eval_mlm_loss"] = loss
    rows.append({**row, "sweep": "bert_model_size"})
  lines = report.render("bert_model_size", module, rows, str(tmp_path)).splitlines()
  header = next(line for line in lines if line.startswith("| variant |"))
  assert header.startswith("| variant | seeds | held-out MLM acc | held-out MLM perplexity | "
                           "SST-2 dev acc |")
  mean = (math.exp(5.0) + math.exp(6.0)) / 2
  row = next(line for line in lines if line.startswith("| L2/H128 (BERT-Tiny) |"))
  assert row.startswith(f"| L2/H128 (BERT-Tiny) | 2 | 20.00 [20.00, 20.00] | {mean:.2f} "
                        f"[{math.exp(5.0):.2f}, {math.exp(6.0):.2f}] | 70.00 [70.00, 70.00] |")
  assert dict(module.COLUMNS)["held-out MLM perplexity"](rows[0]) == f"{math.exp(5.0):.2f}"


@pytest.mark.slow
def test_committed_results_page_is_up_to_date():
  report.main(["--check"])


def test_ablation_runs_print_their_fine_tuning_stages(plateau_vocab, tmp_path, capsys):
  runner.main(["bert_objectives", "mlm_only_s1", "--print",
               f"--results={tmp_path / 'none.jsonl'}"])
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 5  # pretraining, then sst2, mrpc, conll, conll_features
  assert lines[0].startswith("python -m bert_jax.train --config=configs/tiny.py ")
  assert "--config.objectives=mlm " in lines[0] and "--config.model.vocab_size=123 " in lines[0]
  assert lines[1] == ("python -m bert_jax.train "
                      "--config=configs/glue.py:dataset=sst2,train_examples=4000 "
                      "--config.optim.learning_rate=5e-4 --config.data.max_seq_length=64 "
                      "--config.data.pack_each_batch=false "
                      "--config.init_from=runs/bert_objectives/mlm_only_s1 "
                      "--workdir=runs/bert_objectives/mlm_only_s1.sst2")
  assert lines[4].endswith("--workdir=runs/bert_objectives/mlm_only_s1.conll_features")


def test_pretraining_payoff_learning_curve_section(tmp_path):
  module = sweeps.load("pretraining_payoff")
  rows = [_row(f"tiny_sst2_n500_{init}_s{seed}", {"step": 47, "eval_accuracy": acc},
               sweep="pretraining_payoff")
          for init, accs in (("pretrained", (0.60, 0.62, 0.61)), ("random", (0.50, 0.55, 0.52)))
          for seed, acc in enumerate(accs)]
  rows += [_row(f"tiny_cola_nall_{init}_s{seed}",
                {"step": 801, "eval_matthews_corrcoef": 0.1 + d},
                sweep="pretraining_payoff")
           for init, d in (("pretrained", 0.0), ("random", 0.05)) for seed in range(2)]
  lines = module.render(rows, str(tmp_path)).splitlines()
  rows += [_row(f"modernbert_sst2_n500_{init}_s{seed}", {"step": 47, "eval_accuracy": acc},
                sweep="pretraining_payoff")
           for init, accs in (("pretrained", (0.57, 0.6, 0.7)), ("random", (0.5, 0.55, 0.6)))
           for seed, acc in enumerate(accs)]
  lines = module.render(rows, str(tmp_path)).splitlines()
  assert lines[2] == ("| ModernBERT-Tiny | sst2 (accuracy) | 500 | 62.33 [57.00, 70.00] | "
                      "55.00 [50.00, 60.00] | +7.33 | ranges overlap |")
  assert lines[3] == ("| BERT-Tiny | sst2 (accuracy) | 500 | 61.00 [60.00, 62.00] | "
                      "52.33 [50.00, 55.00] | +8.67 | pretrained better on every seed |")
  assert lines[4].startswith("| BERT-Tiny | cola (matthews_corrcoef) | all | 10.00 [10.00, "
                             "10.00] | 15.00 [15.00, 15.00] | -5.00 | fewer than 3 seeds |")
  assert os.path.getsize(tmp_path / "pretraining_payoff.png") > 1000
  runs = runner.sweeps.load("pretraining_payoff").get_sweep()
  assert len(runs) == 384 and runs["modernbert_sst2_n8000_random_s2"]["overrides"] == {
      "init_from": "runs/modernbert", "random_init": True, "data.max_seq_length": 64,
      "optim.learning_rate": "5e-4", "seed": 2, "data.seed": 2, "data.pack_each_batch": False}
  assert runs["modernbert_sst2_n1000-ep10_pretrained_s0"]["overrides"] == {
      "init_from": "runs/modernbert", "random_init": False, "data.max_seq_length": 64,
      "optim.learning_rate": "5e-4", "seed": 0, "data.seed": 0, "data.pack_each_batch": False,
      "num_train_epochs": 10}
  # The corpus-vectors model: random weights and the vectors; its random runs are
  # modernbert's (the same commands, so the runner reuses their rows).
  assert runs["vectors_sst2_n500_pretrained_s1"]["overrides"] == {
      **runs["modernbert_sst2_n500_random_s1"]["overrides"],
      "init_word_vectors": module.VECTORS}
  assert runs["vectors_cola_nall_random_s0"] == runs["modernbert_cola_nall_random_s0"]
  # vectors + MLM: its own pretraining; its random runs are modernbert's too.
  assert runs["vecmlm_sst2_n500_pretrained_s1"]["overrides"] == {
      **runs["modernbert_sst2_n500_pretrained_s1"]["overrides"],
      "init_from": "runs/modernbert_vecmlm"}
  assert runs["vecmlm_mrpc_nall_random_s2"] == runs["modernbert_mrpc_nall_random_s2"]
  # The std-0.1 pair: the vectors rescaled, and MLM from them (its own pretraining).
  assert runs["vec10_sst2_n8000_pretrained_s0"]["overrides"] == {
      **runs["vectors_sst2_n8000_pretrained_s0"]["overrides"], "init_word_vectors_std": 0.1}
  assert (runs["vecmlm10_cola_nall_pretrained_s0"]["overrides"]["init_from"]
          == "runs/modernbert_vectors")
  assert runs["vec10_sst2_n500_random_s1"] == runs["modernbert_sst2_n500_random_s1"]
  # Prompt-based fine-tuning: each task's template and words, both inits alike.
  assert runs["vecmlm10pr_mrpc_nall_random_s1"]["overrides"] == {
      **runs["modernbert_mrpc_nall_random_s1"]["overrides"],
      "data.prompt_template": "{mask} , {b}", "data.prompt_verbalizer": "no,yes"}
  assert runs["vecmlm10pr_sst2_n8000_pretrained_s0"]["overrides"] == {
      **runs["vecmlm10_sst2_n8000_pretrained_s0"]["overrides"],
      "data.prompt_template": "it was {mask} .", "data.prompt_verbalizer": "terrible,great"}
  # A diagnosis (one recipe change at one point) gets its own row after the curve's.
  rows += [_row(f"modernbert_sst2_n1000-ep10_{init}_s{seed}", {"step": 313, "eval_accuracy": a},
                sweep="pretraining_payoff")
           for init, a in (("pretrained", 0.66), ("random", 0.64)) for seed in range(3)]
  lines = module.render(rows, str(tmp_path)).splitlines()
  assert lines[5] == ("| ModernBERT-Tiny | sst2 (accuracy) | 1000, 10 epochs | 66.00 [66.00, "
                      "66.00] | 64.00 [64.00, 64.00] | +2.00 | pretrained better on every seed |")


def test_pretraining_payoff_retrains_for_the_epochs_its_sel_run_picked():
  module = sweeps.load("pretraining_payoff")
  # 10 epochs of 225 steps; the held-back score was best after step 675: epoch 3.
  rows = [_row("vecmlm10_sst2_n8000-sel_random_s2",
               {"step": 2250, "selected_step": 675, "eval_accuracy": 0.7},
               sweep="pretraining_payoff"), _row("other", {"step": 5}, sweep="pretraining_payoff")]
  assert module.picked_epochs(rows) == {"vecmlm10_sst2_n8000-sel_random_s2": 3}
  runs = module.get_sweep()  # from the committed rows
  committed = module.picked_epochs(module._committed_rows())
  for name, spec in runs.items():
    if "-retrain_" in name:
      sel = runs[name.replace("-retrain_", "-sel_")]["overrides"]
      want = {k: v for k, v in sel.items() if k != "data.select_fraction"}
      assert spec == {**runs[name.replace("-retrain_", "-sel_")], "overrides": {
          **want, "num_train_epochs": committed[name.replace("-retrain_", "-sel_")]}}
  assert sum("-retrain_" in name for name in runs) == 24
  assert 1 <= runs["vecmlm10_sst2_n8000-retrain_random_s2"]["overrides"][
      "num_train_epochs"] <= module.SEL_EPOCHS


def test_payoff_causes_compares_each_candidate_with_its_own_random_init():
  module = sweeps.load("payoff_causes")
  runs = module.get_sweep()
  shared = sum(model in module.SAME_RANDOM for model, _ in module.PAIRS)
  assert len(runs) == (len(module.PAIRS) * 2 - shared) * 3  # e.g. wp8k3k uses wp8k's random
  assert "wp8k3k_random_s0" not in runs and "wp8k3k_pretrained_s0" in runs
  assert runs["mask30-mean_pretrained_s1"]["overrides"]["classifier_pooling"] == "mean"
  assert runs["wp8k-mean_random_s1"]["overrides"]["classifier_pooling"] == "mean"
  assert runs["wp8k-lr1e-4_pretrained_s0"]["overrides"]["optim.learning_rate"] == "1e-4"
  assert runs["wp8k_random_s2"]["overrides"]["init_from"] == "runs/payoff/wp8k"
  assert runs["wp8k_random_s2"]["overrides"]["random_init"] is True
  rows = [_row(f"wp8k_{init}_s{seed}", {"eval_accuracy": acc}, sweep="payoff_causes")
          for init, accs in (("pretrained", (0.80, 0.79, 0.81)), ("random", (0.75, 0.80, 0.76)))
          for seed, acc in enumerate(accs)]
  assert module.render(rows, "").splitlines()[2] == (
      "| wp8k | 80.00 [79.00, 81.00] | 77.00 [75.00, 80.00] | +3.00 | ranges overlap |")


@pytest.mark.slow
def test_family_sst2_runs_fine_tune_every_family_from_its_random_folder(tmp_path, monkeypatch,
                                                                        capsys, data_dir):
  from bert_jax.weights import load_pretrained
  from experiments import random_family_folders
  folders = random_family_folders.write(str(tmp_path / "folders"), data_dir)
  for folder in folders:  # each family's HF folder loads as that family
    model, _ = load_pretrained(folder)
    assert model.config.family == os.path.basename(folder)
  monkeypatch.chdir(tmp_path)
  os.makedirs("runs/family_random/modernbert")
  open("runs/family_random/modernbert/config.json", "w").close()
  runner.main(["family_sst2", "--print", f"--results={tmp_path / 'none.jsonl'}"])
  lines = capsys.readouterr().out.splitlines()
  assert [line.split("--config.init_from=runs/family_random/")[1].split()[0]
          for line in lines] == list(random_family_folders.TINY)


def test_payoff_diagnosis_probe_and_cls_attention_statistics():
  from experiments import payoff_diagnosis as diagnosis
  rng = np.random.default_rng(0)
  x = rng.normal(size=(400, 5))
  y = (x[:, 0] + 0.1 * rng.normal(size=400) > 0).astype(np.int32)  # feature 0 decides
  assert diagnosis.logistic_probe(x[:300], y[:300], x[300:], y[300:]) > 0.9
  assert diagnosis.logistic_probe(x[:300, 1:], y[:300], x[300:, 1:], y[300:]) < 0.7
  ids = np.array([[2, 7, 8, 3, 0]])                      # [CLS] w w [SEP] [PAD]
  mask = np.array([[1, 1, 1, 1, 0]], np.float32)
  rows = np.array([[[0.5, 0.25, 0.25, 0.0, 0.0], [0.25, 0.25, 0.25, 0.25, 0.0]]])  # [S, N, T]
  stats = diagnosis.cls_attention_stats(rows, ids, mask, cls_id=2, sep_id=3)
  assert stats["on_cls"] == pytest.approx(0.375) and stats["on_sep"] == pytest.approx(0.125)
  assert stats["on_words"] == pytest.approx(0.5)
  assert stats["entropy_vs_uniform"] == pytest.approx(
      (1.5 * np.log(2) / np.log(4) + 1.0) / 2)


def test_family_pretraining_pretrains_each_family_then_fine_tunes_it_on_sst2(tmp_path,
                                                                            monkeypatch, capsys):
  module = sweeps.load("family_pretraining")
  monkeypatch.chdir(tmp_path)
  for output, _ in module.PREPARE:  # present: --print asks for nothing
    os.makedirs(os.path.dirname(output), exist_ok=True)
    open(output, "w").close()
  runner.main(["family_pretraining", "--print", f"--results={tmp_path / 'none.jsonl'}"])
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 2 * len(module.FAMILIES)
  for family, pretrain, stage in zip(module.FAMILIES, lines[::2], lines[1::2]):
    steps = module.STEPS_OF.get(family, module.STEPS)
    assert f"--config.num_train_steps={steps} " in pretrain
    assert pretrain.endswith(f"--workdir=runs/family_pretraining/{family}")
    assert "dataset=sst2,train_examples=4000" in stage
    assert f"--config.init_from=runs/family_pretraining/{family} " in stage
  # DistilBERT's teacher is the sweep's BERT run, which goes before it.
  assert list(module.FAMILIES).index("bert") < list(module.FAMILIES).index("distilbert")
  assert "teacher=runs/family_pretraining/bert" in lines[2 * list(module.FAMILIES).index(
      "distilbert")]
  row = _row("electra", {"step": 300, "eval_rtd_accuracy": 0.8, "eval_rtd_baseline_accuracy":
                         0.75, "eval_mlm_accuracy": 0.05, "sst2": {"eval_accuracy": 0.6}},
             sweep="family_pretraining")
  assert tables.markdown(module.COLUMNS, [row]).splitlines()[-1] == (
      "| electra | 300 |  | rtd_accuracy 80.00 (all-original 75.00) | 5.00 | 60.00 | yes |")
  # ALBERT runs at 4 layers (CHANGES_OF), and its row says so from its command.
  albert = lines[2 * list(module.FAMILIES).index("albert")]
  assert "--config.model.num_hidden_layers=4 " in albert
  row = {**_row("albert", {"step": 1000, "eval_sop_accuracy": 0.7}, sweep="family_pretraining"),
         "command": albert}
  assert tables.markdown(module.COLUMNS, [row]).splitlines()[-1].startswith(
      "| albert | 1000 | num_hidden_layers=4 | sop_accuracy 70.00 |")


@pytest.mark.slow
def test_sop_rows_carry_the_order_their_labels_claim_and_the_probe_reads_it(tmp_path,
                                                                           vocab_path):
  """On experiments/ordered_corpus.py's text (sentence i opens with the number word i):
  every SOP row's label is 1 exactly when A's number words come after B's (through
  truncation and masking: the rows the SOP head learns from are right), and
  experiments/sop_probe.py's edges probe reads that order from held-out pairs (> 0.85),
  and nothing once the training labels are shuffled (< 0.7)."""
  from bert_jax.pretrain import pipeline
  from bert_jax.text.wordpiece import WordPieceTokenizer
  from experiments import ordered_corpus, sop_probe
  from tests.helpers.runs import tiny_pretraining_config
  path = str(tmp_path / "ordered.txt")
  ordered_corpus.main([f"--output={path}", "--documents=100"])
  config = tiny_pretraining_config(path, **{
      "data.example_builder": "sop", "data.packing": False, "data.max_seq_length": 48,
      "data.max_predictions_per_seq": 8, "data.batch_size": 32, "data.eval_held_out_docs": 48})
  tokenizer = WordPieceTokenizer(vocab_path)
  rank = {tokenizer.vocab.index(word): i for i, word in enumerate(ordered_corpus.NUMBERS)}
  train_input, eval_input = pipeline.make_inputs(config.data, tokenizer)
  batches = [{k: np.asarray(v) for k, v in next(train_input).items()} for _ in range(12)]
  checked = 0
  for batch in batches:
    a, b, labels = sop_probe.segments(batch)
    for segment_a, segment_b, swapped in zip(a, b, labels):
      in_a = [rank[t] for t in segment_a if t in rank]
      in_b = [rank[t] for t in segment_b if t in rank]
      if in_a and in_b:
        assert (min(in_a) > max(in_b)) if swapped else (max(in_a) < min(in_b))
        checked += 1
  assert checked > 250
  train = sop_probe.collect(iter(batches), None)
  held_out = sop_probe.collect(eval_input.epoch_batches(0), None)
  assert len(train[2]) == 384 and len(held_out[2]) > 100
  scores = sop_probe.probe(train, held_out, tokenizer.vocab_size, c=1.0)
  assert scores["edges"][1] > 0.85, scores
  shuffled = (train[0], train[1], np.random.default_rng(0).permutation(train[2]))
  assert sop_probe.probe(shuffled, held_out, tokenizer.vocab_size, c=1.0)["edges"][1] < 0.7


def test_a_prepared_model_no_run_to_do_reads_is_not_asked_for(tmp_path, monkeypatch, capsys):
  """pretraining_payoff's vectors runs read runs/modernbert, not runs/tiny: --print asks
  for the corpus, the vocabulary, the vectors and runs/modernbert only."""
  monkeypatch.chdir(tmp_path)
  with pytest.raises(SystemExit) as exit_info:
    runner.main(["pretraining_payoff", "vectors_sst2_n500_pretrained_s0", "--print",
                 f"--results={tmp_path / 'none.jsonl'}"])
  assert "bpe-8k-vectors.npz" in str(exit_info.value)  # files first
  for output, _ in sweeps.load("pretraining_payoff").PREPARE:
    if not output.endswith("eval_results.json"):
      os.makedirs(os.path.dirname(output), exist_ok=True)
      open(output, "w").close()
  with pytest.raises(SystemExit) as exit_info:
    runner.main(["pretraining_payoff", "vectors_sst2_n500_pretrained_s0", "--print",
                 f"--results={tmp_path / 'none.jsonl'}"])
  message = str(exit_info.value)
  assert "runs/modernbert/eval_results.json first" in message and "runs/tiny" not in message
