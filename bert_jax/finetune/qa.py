"""Extractive QA on the user's own SQuAD-format JSON files (configs/qa.py).

SQuAD's task (squad.py: doc-stride windows, start / end logits, the official EM / F1 and the
n-best answer search of squad_reader and squad_postprocess) on the files of config.data.sources.

config.data fields (besides finetune/base.py's and SQuAD's doc_stride, max_query_length,
n_best_size, max_answer_length, null_score_threshold):
  sources {train, dev, test}: SQuAD v1.1 / v2.0 JSON files (data -> paragraphs -> qas), paths
    as given: relative to the current directory (absolute allowed), not the data root; test
    "" = none. A test file's answers are not read (it may have none).
  version: "1" (every question answerable), "2" (unanswerable ones too: is_impossible, the
    null answer and its threshold), or "" (2 where the training file has an unanswerable
    question, else 1).
  skip_bad_rows: False: a bad question (a missing field such as `answers`, an answer that
    does not match the context at its answer_start) is the error "<file>: data[i].
    paragraphs[j].qas[k] (id <id>): <what is wrong>"; True: it is skipped, and the file's
    count (with the first) is printed once.

Scores (the dev file): v1 exact_match and f1 (evaluate-v1.1.py's), v2 exact / f1 with
HasAns_ / NoAns_ and best_exact / best_f1 (evaluate-v2.0.py's). Predictions
(config.predict): WORKDIR/predictions_<test file's name>.json {question id: answer text}
(the dev file's without test=), and for v2 null_odds_<name>.json.
"""
import functools
import os

from bert_jax.finetune import squad_reader
from bert_jax.finetune.squad import SquadTask
from bert_jax.finetune.sources import DataFormatError, user_file

VERSIONS = {"1": False, "1.1": False, "2": True, "2.0": True}


class QaTask(SquadTask):
  """SQuAD's extractive QA on the files of config.data.sources (the module docstring)."""
  name = "qa"
  reader = None  # load_split reads the files

  def __init__(self, config, model_config):
    version = str(config.data.get("version") or "")
    if version and version not in VERSIONS:
      raise ValueError(f"config.data.version={version!r}: expected 1 or 2 (or \"\": 2 where the "
                       "training file has an unanswerable question)")
    super().__init__(config, model_config)

  @functools.cached_property
  def _train(self) -> list[squad_reader.SquadExample]:
    """The training file's questions, read once (they decide an unset version)."""
    data = self.config.data
    return self.read(data.sources[data.train_split], labelled=True)

  @functools.cached_property
  def version_2(self) -> bool:
    """Whether unanswerable questions are allowed (config.data.version, else the training
    file's)."""
    version = str(self.config.data.get("version") or "")
    return VERSIONS[version] if version else any(e.is_impossible for e in self._train)

  def read(self, path: str, labelled: bool) -> list[squad_reader.SquadExample]:
    return squad_reader.read_json(user_file(path), labelled=labelled,
                                  skips=self.skips(path, "questions"))

  def load_split(self, split, tokenizer):
    data = self.config.data
    path = (data.get("sources") or {}).get(split)
    if not path:
      raise ValueError(f"config.data.sources.{split} is empty: name its file")
    if split == data.train_split:
      examples = self._train
    else:
      examples = self.read(path, labelled=split != data.get("predict_split"))
    if not self.version_2:
      unanswerable = next((e for e in examples if e.is_impossible), None)
      if unanswerable is not None:
        raise DataFormatError(f"{unanswerable.provenance}: an unanswerable question (is_impossible) "
                              "in a version 1 run; set version=2 (configs/qa.py)")
    return squad_reader.featurize(examples, tokenizer, data.max_seq_length,
                                  doc_stride=data.doc_stride,
                                  max_query_length=data.max_query_length,
                                  version_2=self.version_2)

  def write_predictions(self, evaluation, inputs, workdir):
    """The test file's answers (the dev file's without one): WORKDIR/predictions_<its
    name>.json {question id: text} (+ null_odds_<its name>.json for v2)."""
    data, outputs = self.config.data, evaluation.outputs
    if inputs.predict is not None:
      split, metadata = self.predict_split(), inputs.predict_metadata
      outputs = {k: outputs[f"predict_{k}"] for k in self.sequence_outputs}
    else:
      split, metadata = data.eval_split, inputs.eval_metadata
    stem = os.path.splitext(os.path.basename(data.sources[split]))[0]
    return self.write_answers(outputs, metadata, os.path.join(workdir, f"predictions_{stem}.json"),
                              os.path.join(workdir, f"null_odds_{stem}.json"))
