"""Every path of a run in a bucket, against a real GCS JSON API server on 127.0.0.1
(tests/helpers/gcs.py): the corpus glob, the vocabulary, the pipeline cache and the workdir
of a pretraining run; fine-tuning from an HF folder in the bucket, on task files there,
exported to a bucket folder; a TF checkpoint in the bucket as init_from; the data root in
the bucket (filled by download, read by the task readers and the programs); ERNIE's span
files there; and every program given gs:// arguments, none of which may leave a local path
named after the URL. The bucket is read back over the JSON API with urllib, not through
bert_jax's code.
"""
import csv
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from bert_jax.commands import download
from bert_jax.run import trainer
from bert_jax.text import corpus as corpus_lib
from configs import classify, tiny
from tests.helpers.runs import REPO, set_fields
from tests.helpers.data_mirror import Mirror
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


def _program(args, cwd, timeout=600, env=None, returncode=0) -> subprocess.CompletedProcess:
  done = subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True,
                        text=True, env={**os.environ, "PYTHONPATH": REPO, **(env or {})},
                        timeout=timeout)
  assert done.returncode == returncode, done.stderr[-3000:]
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


# ------------------------------------------------------------------------------------
# The data root in the bucket, ERNIE's span files there, and the other programs.
# ------------------------------------------------------------------------------------
DATA_ROOT = f"{BUCKET_URL}/data"
_DATA_SETS = ("wnli", "dependency_treebank", "bert_vocab")  # 4 files, about 0.7 MB


@pytest.fixture(scope="module")
def data_root(gcs, data_dir):
  """gs://runs/data filled by bert_jax.commands.download from a mirror on 127.0.0.1 of the
  local data root's files (_DATA_SETS), then the command run again on it: (what the first
  call fetched, the command's output, the paths the mirror was asked for)."""
  with pytest.MonkeyPatch.context() as patch:
    for name in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
      patch.delenv(name, raising=False)
    mirror = Mirror(data_dir, download.load_manifest())
    try:
      first = download.download(list(_DATA_SETS), DATA_ROOT, mirror.url, echo=lambda _: None)
      again = _program(["bert_jax.commands.download", *_DATA_SETS, f"--data_dir={DATA_ROOT}",
                        f"--mirror={mirror.url}"], REPO, timeout=300).stdout
      return first, again, list(mirror.requests)
    finally:
      mirror.stop()


def test_a_data_root_in_a_bucket_is_filled_by_download_and_read_by_the_readers(
    gcs, data_root, data_dir):
  """download fills gs://runs/data with the manifest's bytes (each file fetched once, then
  found present by the command); the GLUE reader and the treebank reader read the same records from it as
  from the local data root; a reader of local files only refuses the URL root in one line."""
  from bert_jax.finetune import glue_reader
  from bert_jax.text import dependency_treebank, paths
  first, again, requests = data_root
  entries = download.files_of(list(_DATA_SETS), download.load_manifest())
  assert sorted(first["fetched"]) == sorted(e["path"] for e in entries)
  assert again.splitlines() == [*(f"present  {e['path']}" for e in entries), (
      f"data root {DATA_ROOT}: 0 fetched, {len(entries)} present ({' '.join(_DATA_SETS)})")]
  assert len(requests) == len(entries)
  for entry in entries:
    with open(os.path.join(data_dir, entry["path"]), "rb") as f:
      assert gcs.read(f"data/{entry['path']}") == f.read(), entry["path"]
  texts = lambda examples: [(e.text_a, e.text_b, e.label) for e in examples]  # noqa: E731
  assert texts(glue_reader.read_examples("wnli", "dev", data_dir=DATA_ROOT)) == texts(
      glue_reader.read_examples("wnli", "dev", data_dir=data_dir))
  trees = lambda sentences: [(s.words, s.tags, s.heads) for s in sentences]  # noqa: E731
  assert trees(dependency_treebank.read_treebank(data_dir=DATA_ROOT)) == trees(
      dependency_treebank.read_treebank(data_dir=data_dir))
  with pytest.raises(ValueError, match=f"^{DATA_ROOT}: the reader of glue/x.tsv reads and "
                     "writes local paths only"):
    paths.resolve(DATA_ROOT, "glue/x.tsv")


def test_a_download_into_the_bucket_that_does_not_match_writes_no_object(gcs, data_dir):
  """A file whose bytes differ from the manifest's is refused in one line naming the URL
  and the object it was going to, and the bucket gets no object."""
  manifest = download.load_manifest()
  entry = manifest["wnli"][0]
  mirror = Mirror(data_dir, manifest)
  try:
    mirror.corrupt[mirror.by_target[entry["path"]]] = b"not the file"
    with pytest.raises(download.DownloadError, match=f"nothing written to {BUCKET_URL}/bad/"
                       f"{entry['path']}$"):
      download.download(["wnli"], f"{BUCKET_URL}/bad", mirror.url, echo=lambda _: None)
  finally:
    mirror.stop()
  assert gcs.names("bad/") == []


def test_a_tf_checkpoint_in_a_bucket_starts_a_run_as_init_from(gcs, tmp_path):
  """A Google-format TF checkpoint (tests/helpers/checkpoints.py) uploaded to the bucket,
  given by its folder and by its prefix: the init chain copies in the same tensors as from
  the files on disk, and its tokenizer is read from beside it."""
  pytest.importorskip("tensorflow")
  from bert_jax import weights
  from bert_jax.text.tokenizers import model_tokenizer
  from tests.helpers.checkpoints import CONFIG, random_state, write_tf
  local = tmp_path / "tf"
  local.mkdir()
  write_tf(str(local), random_state())
  (local / "vocab.txt").write_text("".join(
      f"{t}\n" for t in ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                         *(f"tok{i}" for i in range(CONFIG.vocab_size - 5))]))
  _upload_folder(gcs, str(local), "tf/")
  on_disk = weights.load_params(str(local))[1]
  fresh = _tree_map(np.zeros_like, on_disk)
  for url in (f"{BUCKET_URL}/tf", f"{BUCKET_URL}/tf/bert_model.ckpt"):
    source = weights.resolve(url)
    assert source.format == "tf" and source.config == CONFIG
    started, _ = weights.init_params(fresh, source, CONFIG)
    assert dict(_leaves(started)).keys() == dict(_leaves(on_disk)).keys()
    for key, value in _leaves(on_disk):
      np.testing.assert_array_equal(dict(_leaves(started))[key], value, err_msg=key)
    assert model_tokenizer(url).encode(["tok3 tok7"]) == [[8, 12]]
  assert url_named_paths(tmp_path) == [] and _url_named_temporary_entries() == []


def _url_named_temporary_entries() -> list[str]:
  return [n for n in os.listdir(tempfile.gettempdir()) if n.startswith(("gs:", "s3:"))]


def _upload_folder(gcs, folder: str, prefix: str) -> None:
  """The files of a local folder as objects under prefix."""
  for name in os.listdir(folder):
    with open(os.path.join(folder, name), "rb") as f:
      gcs.upload(prefix + name, f.read())


def _tree_map(function, tree):
  return {k: _tree_map(function, v) if isinstance(v, dict) else function(v)
          for k, v in tree.items()}


def _knowledge_corpus(corpus: str, documents: int = 40) -> bytes:
  """The first `documents` documents of the prepared corpus, in the plain format."""
  with open(corpus, "rb") as f:
    return b"\n\n".join(f.read().split(b"\n\n")[:documents]) + b"\n\n"


@pytest.mark.slow
def test_the_other_programs_read_and_write_the_bucket(gcs, pretrained, data_root, corpus,
                                                      vocab_path, tmp_path):
  """With the data root in the bucket (BERT_JAX_DATA_DIR=gs://runs/data): tag_spans tags a
  corpus there with a tagger there, writing the span file beside it; prepare --with_spans
  (--data_dir=gs://..., a relative source) carries it through; inspect reads that corpus
  and span file with configs/ernie.py (and the vocabulary from the data root); word_vectors
  (its cache a --config override naming the bucket) and shards write their files there;
  probe.syntax_heads reads the treebank from the data root and a workdir there;
  finetune_shards writes WNLI's dev shard (read from the data root, the tokenizer from a
  workdir there) into the bucket. No local path is named after a URL."""
  from tests.helpers.checkpoints import random_tagger
  cwd = tmp_path / "cwd"
  cwd.mkdir()
  env = {"BERT_JAX_DATA_DIR": DATA_ROOT}
  _upload_folder(gcs, random_tagger(str(tmp_path / "ner"), vocab_path, "ner", 0), "ner/")
  text = _knowledge_corpus(corpus)
  gcs.upload("data/knowledge/k.txt", text)
  done = _program(["bert_jax.commands.tag_spans", f"--model={BUCKET_URL}/ner",
                   f"--input={DATA_ROOT}/knowledge/k.txt", "--max_length=32"], cwd, env=env)
  span_lines = gcs.read("data/knowledge/k.spans.jsonl").decode().splitlines()
  assert len(span_lines) == text.decode().count("\n"), done.stdout
  assert f"on {len(span_lines)} lines to {DATA_ROOT}/knowledge/k.spans.jsonl" in done.stdout
  _program(["bert_jax.text.prepare", "--with_spans", f"--data_dir={DATA_ROOT}",
            "--source=knowledge/k.txt", f"--output={DATA_ROOT}/knowledge/k2.txt"], cwd)
  carried = gcs.read("data/knowledge/k2.spans.jsonl").decode().splitlines()
  assert len(carried) == gcs.read("data/knowledge/k2.txt").decode().count("\n")
  assert sum(line != "{}" for line in carried) == sum(line != "{}" for line in span_lines) > 0
  done = _program(["bert_jax.pretrain.inspect", f"--config={REPO}/configs/ernie.py:corpus="
                   f"{DATA_ROOT}/knowledge/k2.txt,runlocal=True", "--config.data.cache_dir=",
                   "--batches=2", "--json"], cwd, env=env)
  stats = json.loads(done.stdout)
  assert 0 <= stats["entity_whole_fraction"] <= 1, stats
  config = f"--config={REPO}/configs/tiny.py:corpus={BUCKET_URL}/wiki/*.txt,runlocal=True"
  _program(["bert_jax.pretrain.word_vectors", config, f"--config.data.cache_dir={BUCKET_URL}"
            "/wv_cache", f"--output={BUCKET_URL}/vectors/v.npz", "--dim=8"], cwd, env=env)
  assert any(name.endswith(".npz") for name in gcs.names("wv_cache/"))  # a URL override
  local = tmp_path / "v.npz"
  local.write_bytes(gcs.read("vectors/v.npz"))
  assert np.load(local)["vectors"].shape == (30522, 8)
  _program(["bert_jax.pretrain.shards", config, "--config.data.cache_dir=",
            f"--output={BUCKET_URL}/shards/tiny"], cwd, env=env)
  assert gcs.names("shards/") == ["shards/tiny-eval.npz", "shards/tiny-train-e000-s000.npz"]
  _program(["bert_jax.probe.syntax_heads", f"--model={BUCKET_URL}/pre", "--sentences=4",
            "--max_length=64", f"--output={BUCKET_URL}/probe/heads.json"], cwd, env=env)
  probed = json.loads(gcs.read("probe/heads.json"))
  assert probed["sentences"] > 0 and probed["sentences"] + probed["left_out"] == 4, probed
  _program(["bert_jax.commands.finetune_shards", f"--config={REPO}/configs/glue.py:"
            "dataset=wnli,runlocal=True", f"--config.init_from={BUCKET_URL}/pre",
            "--config.data.train_split=", f"--output={BUCKET_URL}/ft_shards/wnli"], cwd,
           env=env)  # the data root holds WNLI's dev split only
  assert gcs.names("ft_shards/") == ["ft_shards/wnli-dev.npz"]
  assert os.listdir(cwd) == []
  assert url_named_paths(cwd, tmp_path, REPO) == [] and _url_named_temporary_entries() == []


def test_every_program_is_run_here_with_bucket_arguments():
  """Each program of the package (a module that ends in cli.run(main)) is run by a test of
  this file (or by the pretraining fixture, the trainer's own entry), so a new one comes
  with its bucket test."""
  programs = set()
  for path in glob.glob(os.path.join(REPO, "bert_jax", "**", "*.py"), recursive=True):
    with open(path, encoding="utf-8") as f:
      if "\n  cli.run(main" in f.read():
        programs.add(os.path.relpath(path, REPO)[:-3].replace(os.sep, "."))
  with open(__file__, encoding="utf-8") as f:
    source = f.read()
  assert len(programs) >= 12, programs
  assert sorted(p for p in programs if f'"{p}"' not in source) == []


def test_a_missing_bucket_is_one_line_naming_the_url(gcs, corpus, tmp_path):
  """bert_jax.train with its workdir in a bucket that does not exist ends in one line (and
  nothing before it) naming the URL and the bucket; so does a corpus glob there, and a
  write to it through the path layer. No local path is named after the URL."""
  from bert_jax.files import storage
  says = "the bucket gs://missing does not exist (or these credentials cannot see it)"
  done = _program(["bert_jax.train", f"--config={REPO}/configs/tiny.py:corpus={corpus},"
                   "runlocal=True", "--workdir=gs://missing/run", "--config.data.cache_dir="],
                  tmp_path, timeout=300, returncode=1)
  assert done.stderr.strip().splitlines() == [
      f"bert_jax.train: error: gs://missing/run/.lock: {says}"], done.stderr
  with pytest.raises(FileNotFoundError, match=re.escape(f"gs://missing/wiki/*.txt: {says}")):
    corpus_lib.expand_file_patterns(["gs://missing/wiki/*.txt"], None)
  with pytest.raises(FileNotFoundError, match=re.escape(f"gs://missing/a.txt: {says}")):
    storage.write_text("gs://missing/a.txt", "text")
  assert os.listdir(tmp_path) == [] and url_named_paths(tmp_path) == []
