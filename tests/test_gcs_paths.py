"""Every path of a run in a bucket, against a real GCS JSON API server on 127.0.0.1
(tests/helpers/gcs.py): the corpus glob, the vocabulary, the pipeline cache and the workdir
of a pretraining run; fine-tuning from an HF folder in the bucket, on task files there,
exported to a bucket folder; and the programs (prepare, learn_vocab, convert, embed,
fill_mask) given gs:// arguments, none of which may leave a local path named after the
URL. The bucket is read back over the JSON API with urllib, not through bert_jax's code.
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from bert_jax.run import trainer
from bert_jax.text import corpus as corpus_lib
from configs import classify, tiny
from tests.helpers.runs import REPO, set_fields
from tests.helpers.gcs import BUCKET, url_named_paths

BUCKET_URL = f"gs://{BUCKET}"
_TINY = {"model.hidden_size": 32, "model.intermediate_size": 64,
         "model.max_position_embeddings": 64, "data.max_seq_length": 32,
         "data.max_predictions_per_seq": 5, "num_train_steps": 4, "log_every_steps": 1,
         "checkpoint_every_steps": 4, "eval_every_steps": 0}


def _upload_corpus(gcs, corpus: str) -> None:
  """The prepared corpus as two objects, wiki/part-0.txt and wiki/part-1.txt, cut at a
  document boundary."""
  with open(corpus, "rb") as f:
    documents = f.read().split(b"\n\n")
  half = len(documents) // 2
  gcs.upload("wiki/part-0.txt", b"\n\n".join(documents[:half]) + b"\n\n")
  gcs.upload("wiki/part-1.txt", b"\n\n".join(documents[half:]))


def _program(args, cwd, timeout=600) -> subprocess.CompletedProcess:
  done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True,
                        text=True, env={**os.environ, "PYTHONPATH": REPO}, timeout=timeout)
  assert done.returncode == 0, done.stderr[-3000:]
  return done


def _local_copy(gcs, prefix: str, folder) -> str:
  """The objects under prefix written into a local folder over the JSON API."""
  for name in gcs.names(prefix):
    target = os.path.join(folder, name[len(prefix):])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as f:
      f.write(gcs.read(name))
  return str(folder)


@pytest.fixture(scope="module")
def pretrained(gcs, corpus, vocab_path, tmp_path_factory):
  """configs/tiny.py with corpus=gs://runs/wiki/*.txt, vocab=gs://runs/vocab/vocab.txt,
  config.data.cache_dir=gs://runs/cache and the workdir gs://runs/pre, 4 steps."""
  _upload_corpus(gcs, corpus)
  with open(vocab_path, "rb") as f:
    gcs.upload("vocab/vocab.txt", f.read())
  config = set_fields(tiny.get_config(f"corpus={BUCKET_URL}/wiki/*.txt,vocab={BUCKET_URL}/"
                                      "vocab/vocab.txt,runlocal=True"),
                      {**_TINY, "data.cache_dir": f"{BUCKET_URL}/cache"})
  cwd = tmp_path_factory.mktemp("cwd")
  os.chdir(cwd)  # nothing the run writes lands in the working directory either
  try:
    results = trainer.train_and_evaluate(config, f"{BUCKET_URL}/pre")
  finally:
    os.chdir(REPO)
  return results, str(cwd)


def test_a_corpus_glob_in_a_bucket_reads_as_the_same_files_on_disk(gcs, corpus, tokenizer,
                                                                   tmp_path):
  """expand_file_patterns lists the bucket; the stream read through bert_jax.files.storage gives
  the corpus TextLineDataset gives for the same bytes on disk (CRLF line ends, a file
  without a final newline, one invalid UTF-8 line named by URL and line)."""
  gcs.upload("lines/a.txt", b"First sentence here.\r\nSecond one.\n\nA new document.\n")
  gcs.upload("lines/b.txt", b"Another file.\nIts last line")
  files = corpus_lib.expand_file_patterns([f"{BUCKET_URL}/lines/*.txt"], None)
  assert files == [f"{BUCKET_URL}/lines/a.txt", f"{BUCKET_URL}/lines/b.txt"]
  local = _local_copy(gcs, "lines/", tmp_path)
  remote = corpus_lib.read_files(files, tokenizer)
  on_disk = corpus_lib.read_files([os.path.join(local, n) for n in ("a.txt", "b.txt")],
                                  tokenizer)
  for field in ("token_ids", "sentence_starts", "document_starts", "document_ids"):
    assert np.array_equal(getattr(remote, field), getattr(on_disk, field)), field
  assert remote.num_documents == 3 and remote.sources == tuple(files)
  gcs.upload("lines/c.txt", b"Fine.\nbad \xff byte\n")
  with pytest.raises(corpus_lib.CorpusError, match=f"^{BUCKET_URL}/lines/c.txt:2: invalid"):
    corpus_lib.read_files([f"{BUCKET_URL}/lines/c.txt"], tokenizer)
  with pytest.raises(corpus_lib.CorpusError, match="matches no file"):
    corpus_lib.expand_file_patterns([f"{BUCKET_URL}/lines/*.none"], None)


@pytest.mark.slow
def test_pretraining_with_corpus_vocabulary_cache_and_workdir_in_the_bucket(gcs, pretrained):
  """The run of `pretrained` trained its 4 steps; the workdir, the tokenized corpus cache
  and nothing else were written, all in the bucket; no local path is named after a URL."""
  results, cwd = pretrained
  assert np.isfinite(results["loss"]) and "eval_loss" in results
  names = gcs.names("pre/")
  for name in ("config.json", "model_config.json", "vocab.txt", "eval_results.json",
               "metrics.jsonl", "checkpoints/4/commit_success.txt"):
    assert f"pre/{name}" in names, name
  rows = [json.loads(line) for line in gcs.read("pre/metrics.jsonl").decode().splitlines()]
  assert [r["step"] for r in rows if "loss" in r] == [1, 2, 3, 4]
  assert gcs.read("pre/vocab.txt") == gcs.read("vocab/vocab.txt")
  cached = gcs.names("cache/")
  assert any(n.endswith(".npz") for n in cached), cached
  assert os.listdir(cwd) == []
  assert url_named_paths(cwd, REPO) == []


@pytest.mark.slow
def test_fine_tuning_from_a_bucket_folder_exported_to_a_bucket_folder(gcs, pretrained, data_dir,
                                                                      tmp_path):
  """convert the bucket workdir to an HF folder in the bucket; fine-tune configs/classify.py
  from it (init_from=gs://...) on task files in the bucket, the workdir in the bucket; export
  that to an HF folder in the bucket: it holds the fine-tuned weights, and loads."""
  from bert_jax import weights
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  _program(["bert_jax.commands.convert", f"--input={BUCKET_URL}/pre", f"--output={BUCKET_URL}/hf",
            "--to=hf"], cwd)
  assert {"hf/config.json", "hf/model.safetensors", "hf/vocab.txt"} <= set(gcs.names("hf/"))
  with open(os.path.join(data_dir, "glue", "SST-2", "train.tsv"), encoding="utf-8") as f:
    rows = list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))[1:41]
  for split, part in (("train", rows[:32]), ("dev", rows[32:])):
    gcs.upload(f"sst/{split}.tsv", ("sentence\tlabel\n" + "".join(
        f"{text}\t{label}\n" for text, label in part)).encode())
  config = classify.get_config(f"train={BUCKET_URL}/sst/train.tsv,dev={BUCKET_URL}/sst/"
                               "dev.tsv,text=sentence,label=label,runlocal=True")
  config.init_from = f"{BUCKET_URL}/hf"
  results = trainer.train_and_evaluate(config, f"{BUCKET_URL}/cls")
  assert "eval_accuracy" in results
  assert json.loads(gcs.read("cls/model_config.json"))["labels"] == ["0", "1"]
  _program(["bert_jax.commands.convert", f"--input={BUCKET_URL}/cls", f"--output={BUCKET_URL}/export",
            "--to=hf"], cwd)
  exported = weights.load_params(_local_copy(gcs, "export/", tmp_path / "export"))[1]
  trained = weights.load_params(f"{BUCKET_URL}/cls")[1]
  assert json.loads(gcs.read("export/config.json"))["id2label"] == {"0": "0", "1": "1"}
  flat = lambda tree: {k: np.asarray(v) for k, v in _leaves(tree)}  # noqa: E731
  assert flat(exported).keys() == flat(trained).keys()
  for key, value in flat(trained).items():
    np.testing.assert_allclose(flat(exported)[key], value, rtol=1e-6, err_msg=key)
  assert os.listdir(cwd) == [] and url_named_paths(cwd, tmp_path, REPO) == []


def _leaves(tree, prefix=""):
  for key, value in tree.items():
    if isinstance(value, dict):
      yield from _leaves(value, f"{prefix}{key}/")
    else:
      yield prefix + key, value


@pytest.mark.slow
def test_the_programs_read_and_write_the_bucket(gcs, pretrained, tmp_path):
  """prepare (sources and --num_shards output in the bucket), learn_vocab (input and output),
  embed (model, input and output) and fill_mask (a bucket workdir) with gs:// arguments:
  each writes where it is asked, and no local path anywhere is named after a URL."""
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  gcs.upload("raw/wiki.txt", b" = Title = \n\n The first sentence . The second one .\n\n"
             b" = Other = \n\n More text here . And more .\n")
  _program(["bert_jax.text.prepare", f"--source={BUCKET_URL}/raw/wiki.txt:wikitext",
            f"--output={BUCKET_URL}/prepared/wiki.txt", "--num_shards=2", "--shard_index=1"],
           cwd)
  assert gcs.names("prepared/") == ["prepared/wiki-00001-of-00002.txt"]
  assert gcs.read("prepared/wiki-00001-of-00002.txt").decode().startswith("More text here")
  _program(["bert_jax.text.learn_vocab", f"--input={BUCKET_URL}/wiki/part-0.txt",
            f"--output={BUCKET_URL}/learned/vocab.txt", "--vocab_size=200"], cwd)
  learned = gcs.read("learned/vocab.txt").decode().split("\n")
  assert learned[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(learned) > 100
  gcs.upload("embed/input.txt", b"a first sentence\nand a second\n")
  done = _program(["bert_jax.commands.embed", f"--model={BUCKET_URL}/pre",
                   f"--input={BUCKET_URL}/embed/input.txt",
                   f"--output={BUCKET_URL}/embed/out.npy", "--max_length=32"], cwd)
  local = tmp_path / "out.npy"
  local.write_bytes(gcs.read("embed/out.npy"))
  assert np.load(local).shape == (2, 32), done.stdout
  done = _program(["bert_jax.commands.fill_mask", f"--model={BUCKET_URL}/pre", "--top_k=2",
                   "--max_length=32", "the [MASK] is here"], cwd)
  assert done.stdout.startswith("the [MASK] is here\n  [MASK] 1: "), done.stdout
  assert os.listdir(cwd) == []
  assert url_named_paths(cwd, tmp_path, REPO) == []
  assert [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(("gs:", "s3:"))] == []
