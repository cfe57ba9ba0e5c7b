"""Extractive QA on the user's own SQuAD-format files (configs/qa.py, finetune/qa.py): articles
of the data root's SQuAD v1.1 file written as train / dev / test files, trained a few steps
from a random L2/H32 encoder; the dev scores are the official EM / F1 of the written answers,
the test file's answers keyed by its question ids; bad questions name file and id.
"""
import json
import os

import pytest

from bert_jax.finetune import metrics, qa, squad_reader
from bert_jax.finetune.sources import DataFormatError
from bert_jax.run import trainer
from bert_jax.text.tokenizers import make_tokenizer
from configs import qa as qa_config


def _articles(data_dir, paragraphs=2):
  with open(os.path.join(data_dir, "squad", "du2017_split", "test-v1.1.json"),
            encoding="utf-8") as f:
    articles = json.load(f)["data"]
  return [{**a, "paragraphs": a["paragraphs"][:paragraphs]} for a in articles[:3]]


def _write(path, articles):
  path.write_text(json.dumps({"version": "1.1", "data": articles}), encoding="utf-8")
  return str(path)


def _one_question(tmp_path, qa, name="q.json"):
  context = "The capital of France is Paris."
  return _write(tmp_path / name, [{"title": "T", "paragraphs": [{"context": context,
                                                                 "qas": [qa]}]}])


def test_bad_questions_name_file_and_id_or_are_skipped_and_counted(tmp_path, capsys):
  path = _one_question(tmp_path, {"id": "q7", "question": "What?"})
  with pytest.raises(DataFormatError, match=r"q.json: data\[0\]\.paragraphs\[0\]\.qas\[0\] "
                                            r"\(id q7\): missing or malformed field: no 'answers'"):
    squad_reader.read_json(path)
  assert [e.qid for e in squad_reader.read_json(path, labelled=False)] == ["q7"]  # a test file
  off = {"id": "q8", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 3}]}
  path = _one_question(tmp_path, off, "off.json")
  with pytest.raises(DataFormatError, match=r"off.json: .*\(id q8\): answer 'Paris' does not "
                                            r"match the context at offset 3"):
    squad_reader.read_json(path)
  good = {"id": "ok", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 25}]}
  path = _write(tmp_path / "mixed.json", [{"title": "T", "paragraphs": [
      {"context": "The capital of France is Paris.",
       "qas": [good, off, {"id": "q9", "question": "?"}]}]}])
  assert [e.qid for e in squad_reader.read_json(path, skip_bad_answers=True)] == ["ok"]
  assert capsys.readouterr().out.splitlines() == [
      f"{path}: skipped 2 bad questions of 3 (skip_bad_rows); the first: {path}: "
      "data[0].paragraphs[0].qas[1] (id q8): answer 'Paris' does not match the context at "
      "offset 3 (found ' capi')."]
  with pytest.raises(ValueError, match=r"dev= is required"):
    qa_config.get_config("train=t.json")


def test_own_files_train_score_officially_and_predict_a_test_file(tmp_path, data_dir,
                                                                 small_bert):  # noqa: F811
  articles = _articles(data_dir)
  # One training question lost its answers: skipped (skip_bad_rows), counted in the report.
  broken = json.loads(json.dumps(articles[:1]))
  del broken[0]["paragraphs"][0]["qas"][0]["answers"]
  train, dev = _write(tmp_path / "train.json", broken), _write(tmp_path / "dev.json",
                                                              articles[1:2])
  test_articles = [{**articles[2], "paragraphs": [
      {"context": p["context"], "qas": [{"id": q["id"], "question": q["question"]}
                                        for q in p["qas"]]} for p in articles[2]["paragraphs"]]}]
  test = _write(tmp_path / "test.json", test_articles)
  config = qa_config.get_config(f"train={train},dev={dev},skip_bad_rows=true,runlocal=True")
  config.init_from = small_bert
  config.data.max_seq_length, config.data.doc_stride = 64, 32
  config.predict = True
  workdir = tmp_path / "run"
  trainer.train_and_evaluate(config, str(workdir))
  with open(workdir / "eval_results.json") as f:
    results = json.load(f)
  with open(workdir / "run_report.json") as f:
    notes = json.load(f)["invocations"][0]["data_notes"]
  questions = sum(len(p["qas"]) for p in articles[0]["paragraphs"])
  qid = articles[0]["paragraphs"][0]["qas"][0]["id"]
  assert notes == [f"{train}: skipped 1 bad questions of {questions} (skip_bad_rows); the "
                   f"first: {train}: data[0].paragraphs[0].qas[0] (id {qid}): missing or "
                   "malformed field: no 'answers'."]
  with open(workdir / "predictions_dev.json") as f:
    answers = json.load(f)
  gold = {q["id"]: [a["text"] for a in q["answers"]]
          for p in articles[1]["paragraphs"] for q in p["qas"]}
  assert set(answers) == set(gold)
  official = metrics.squad_v1_scores(gold, answers)
  assert results["eval_exact_match"] == pytest.approx(official["exact_match"])
  assert results["eval_f1"] == pytest.approx(official["f1"])
  # The finished run predicts a test file without answers: its question ids, context text.
  config = qa_config.get_config(f"train={train},dev={dev},test={test},skip_bad_rows=true,"
                                "runlocal=True")
  config.init_from = small_bert
  config.data.max_seq_length, config.data.doc_stride = 64, 32
  config.predict = True
  trainer.train_and_evaluate(config, str(workdir))
  with open(workdir / "predictions_test.json") as f:
    predicted = json.load(f)
  contexts = {q["id"]: p["context"] for p in test_articles[0]["paragraphs"] for q in p["qas"]}
  assert list(predicted) == list(contexts)
  assert all(text in contexts[qid] for qid, text in predicted.items())


def test_version_2_is_the_training_files_and_a_v1_run_refuses_unanswerable(tmp_path,
                                                                           small_bert):  # noqa: F811
  answered = {"id": "a1", "question": "Where?",
              "answers": [{"text": "Paris", "answer_start": 25}]}
  unanswerable = {"id": "n1", "question": "Who?", "answers": [], "is_impossible": True}
  v1 = _one_question(tmp_path, answered, "v1.json")
  v2 = _write(tmp_path / "v2.json", [{"title": "T", "paragraphs": [
      {"context": "The capital of France is Paris.", "qas": [answered, unanswerable]}]}])

  def task(arg):
    config = qa_config.get_config(arg + ",runlocal=True")
    config.init_from = small_bert
    return qa.QaTask(config, trainer.resolve_model_config(config)), config

  tokenizer = make_tokenizer(task(f"train={v1},dev={v1}")[1].data, model_dir=small_bert)
  assert task(f"train={v2},dev={v1}")[0].version_2
  v1_task = task(f"train={v1},dev={v2}")[0]
  assert not v1_task.version_2
  with pytest.raises(DataFormatError, match=r"v2.json: data\[0\]\.paragraphs\[0\]\.qas\[1\] "
                                            r"\(id n1\): an unanswerable question .* set version=2"):
    v1_task.load_split("dev", tokenizer)
  features, metadata = task(f"train={v1},dev={v2},version=2")[0].load_split("dev", tokenizer)
  assert metadata.version_2 and features["start_positions"].tolist()[-1] == 0
  with pytest.raises(ValueError, match=r"config.data.version='3': expected 1 or 2"):
    task(f"train={v1},dev={v1},version=3")
