"""bert_jax.commands.download against a local mirror: a threaded http.server on 127.0.0.1 serves the
data root's files under raw.githubusercontent.com's layout (OWNER/REPO/COMMIT/PATH, from
the manifest's URLs); the command fetches into a fresh root, checks sizes and sha256s,
refuses a corrupted file and reports a server that is down, each in one line. The manifest
itself is checked against the data root (scripts/data_manifest.py recomputes it)."""
import hashlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys

import pytest

from bert_jax.commands import download
from bert_jax.text import paths
from bert_jax.text import prepare
from tests.helpers.data_mirror import Mirror

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SMALL = ["wnli", "bert_vocab", "mnli"]  # 23 files, about 0.75 MB
PROXIES = ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY")


def _manifest_script():
  spec = importlib.util.spec_from_file_location(
      "data_manifest", os.path.join(REPO, "scripts", "data_manifest.py"))
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


@pytest.fixture(scope="module")
def manifest():
  return download.load_manifest()


@pytest.fixture
def mirror(data_dir, manifest):
  server = Mirror(data_dir, manifest)
  yield server
  server.stop()


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch):
  for name in PROXIES:
    monkeypatch.delenv(name, raising=False)


def _env(**extra):
  env = {k: v for k, v in os.environ.items()
         if k not in PROXIES and k not in (paths.ENV_VAR, download.MIRROR_ENV)}
  return {**env, **extra}


def _command(*args, env=None):
  return subprocess.run([sys.executable, "-m", "bert_jax.commands.download", *args], cwd=REPO,
                        capture_output=True, text=True, env=env or _env(), timeout=300)


def _sha256(path):
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()


def _one_error_line(result) -> str:
  assert result.returncode == 1, (result.stdout, result.stderr)
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("bert_jax.commands.download: error: "), result.stderr
  return lines[0]


def _files_under(root):
  return sorted(os.path.relpath(os.path.join(d, f), root)
                for d, _, names in os.walk(root) for f in names)


def test_the_manifest_is_the_data_roots_files(data_dir, manifest):
  script = _manifest_script()
  assert script.manifest(data_dir) == manifest  # sizes and sha256s recomputed
  assert script.render(manifest) == open(download.MANIFEST).read()
  listed = [entry["path"] for entries in manifest.values() for entry in entries]
  assert sorted(listed) == [f for f in _files_under(data_dir) if f != "README.md"]
  with open(os.path.join(data_dir, "README.md")) as f:  # its SHA-256 block
    readme = dict(reversed(line.split("  ", 1))
                  for line in f.read().splitlines() if re.fullmatch(r"[0-9a-f]{64}  .+", line))
  assert {e["path"]: e["sha256"] for v in manifest.values() for e in v} == readme
  assert all(e["url"].startswith(download.RAW + "/") for v in manifest.values() for e in v)


def test_pretraining_text_is_prepares_default_sources(manifest):
  files = download.files_of(download.expand(["pretraining_text"], manifest), manifest)
  assert sorted(e["path"] for e in files) == sorted(prepare.PRETRAINING_SOURCES)
  assert len(download.files_of(download.expand(["all"], manifest), manifest)) == 53


def test_fetches_the_named_sets_then_finds_them_present(mirror, manifest, tmp_path):
  root = tmp_path / "new" / "root"  # does not exist yet
  result = _command(*SMALL, f"--data_dir={root}", f"--mirror={mirror.url}")
  assert result.returncode == 0, result.stderr
  entries = download.files_of(SMALL, manifest)
  assert _files_under(root) == sorted(e["path"] for e in entries)  # no .partial left
  for entry in entries:
    assert _sha256(root / entry["path"]) == entry["sha256"]
  lines = result.stdout.splitlines()
  assert [line.split()[:2] for line in lines[:-1]] == [["fetched", e["path"]] for e in entries]
  assert lines[-1] == f"data root {root}: {len(entries)} fetched, 0 present (wnli bert_vocab mnli)"
  assert len(mirror.requests) == len(entries)

  # Again, through the environment variables: nothing fetched, every file present.
  again = _command(*SMALL, env=_env(BERT_JAX_DATA_DIR=str(root),
                                    BERT_JAX_DATA_MIRROR=mirror.url))
  assert again.returncode == 0, again.stderr
  assert again.stdout.splitlines()[:-1] == [f"present  {e['path']}" for e in entries]
  assert len(mirror.requests) == len(entries)
  quiet = _command("--quiet", *SMALL, f"--data_dir={root}", f"--mirror={mirror.url}")
  assert quiet.returncode == 0 and quiet.stdout == "" and quiet.stderr == "", quiet


def test_a_corrupted_file_is_refused_and_leaves_no_file(mirror, manifest, tmp_path):
  [entry] = manifest["wnli"]
  url_path = mirror.by_target[entry["path"]]
  with open(mirror.files[url_path], "rb") as f:
    body = bytearray(f.read())
  body[100] ^= 1  # same size, one bit off
  mirror.corrupt[url_path] = bytes(body)
  result = _command("wnli", f"--data_dir={tmp_path}", f"--mirror={mirror.url}")
  line = _one_error_line(result)
  assert f"{mirror.url}{url_path}: expected sha256 {entry['sha256']}" in line
  assert f"got sha256 {hashlib.sha256(body).hexdigest()}" in line
  assert "nothing written" in line
  assert _files_under(tmp_path) == []


def test_a_local_file_that_differs_is_fetched_again(mirror, manifest, tmp_path):
  [entry] = manifest["wnli"]
  target = tmp_path / entry["path"]
  target.parent.mkdir(parents=True)
  target.write_bytes(b"truncated")
  lines = []
  done = download.download(["wnli"], str(tmp_path), mirror.url, echo=lines.append)
  assert done == {"fetched": [entry["path"]], "present": []}
  assert _sha256(target) == entry["sha256"]


def test_a_server_that_is_down_is_one_line(manifest, tmp_path):
  server = Mirror(str(tmp_path), manifest)
  url = server.url
  server.stop()  # the port is closed now
  line = _one_error_line(_command("wnli", f"--data_dir={tmp_path / 'root'}", f"--mirror={url}"))
  assert f"cannot fetch {url}/amrnag/Specialized-Transformers/" in line
  assert "--mirror" in line and "BERT_JAX_DATA_MIRROR" in line
  assert not os.path.exists(tmp_path / "root" / "glue" / "WNLI" / "dev.tsv")


def test_a_missing_file_on_the_mirror_names_the_http_status(mirror, manifest, tmp_path):
  entry = {**manifest["wnli"][0], "url": download.RAW + "/no/such/commit/file.tsv"}
  with pytest.raises(download.DownloadError, match=r"/no/such/commit/file.tsv: HTTP 404"):
    download.fetch(entry, str(tmp_path), mirror.url)
  assert _files_under(tmp_path) == []


def test_an_unknown_name_lists_the_known_ones():
  line = _one_error_line(_command("sst3", "--data_dir=/nonexistent"))
  assert "unknown data set 'sst3'; known: sst2 cola " in line and line.endswith(" all")


def test_without_shared_data_the_root_is_the_cache(monkeypatch, tmp_path):
  monkeypatch.delenv(paths.ENV_VAR, raising=False)
  monkeypatch.setenv("HOME", str(tmp_path))
  monkeypatch.chdir(tmp_path)
  monkeypatch.setattr(paths, "_REPO_ROOT", tmp_path / "checkout")
  assert paths.default_data_dir() == str(tmp_path / ".cache" / "bert_jax" / "data")
  assert paths.resolve(None, "glue/SST-2/dev.tsv") == str(
      tmp_path / ".cache" / "bert_jax" / "data" / "glue" / "SST-2" / "dev.tsv")


def test_a_source_missing_from_the_data_root_names_the_command(tmp_path):
  with pytest.raises(prepare.PrepareError, match=r"not found at .*python -m bert_jax.commands.download"):
    prepare.parse_source("wikitext-2/valid.txt", str(tmp_path))


# A sitecustomize for every Python process of the job: it records each file opened under
# the folders of BERT_JAX_TEST_WATCHED (`:`-separated) into BERT_JAX_TEST_OPENED.
_WATCH = """
import os, sys
_watched = os.environ["BERT_JAX_TEST_WATCHED"].split(":")
def _hook(event, args):
  if event == "open" and isinstance(args[0], (str, bytes)):
    path = os.path.realpath(os.fsdecode(args[0]))
    if any(path.startswith(folder + os.sep) for folder in _watched):
      with open(os.environ["BERT_JAX_TEST_OPENED"], "a") as f:
        f.write(path + "\\n")
sys.addaudithook(_hook)
"""


@pytest.mark.slow
def test_the_quick_main_job_from_a_root_it_fetches(mirror, data_dir, tmp_path):
  """QUICK=1 scripts/main_job.sh, all of it but its install step (scripts/setup.sh), in a
  copy of the repository, with BERT_JAX_DATA_DIR at a root that does not exist yet and the
  mirror serving the data root: it fetches its files in one line, runs every step, and
  no process of it opens a file under the served data root. About 4.5 minutes on 2 cores."""
  with open(os.path.join(REPO, "scripts", "main_job.sh")) as f:
    job = f.read()
  assert job.count("\nbash scripts/setup.sh\n") == 1
  copy = tmp_path / "repo"
  for folder in ("bert_jax", "configs", "scripts"):
    shutil.copytree(os.path.join(REPO, folder), copy / folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
  (tmp_path / "hook").mkdir()
  (tmp_path / "hook" / "sitecustomize.py").write_text(_WATCH)
  root, opened = tmp_path / "root", tmp_path / "opened.txt"
  shared, new = os.path.realpath(data_dir), os.path.realpath(root)
  env = _env(QUICK="1", BERT_JAX_DATA_DIR=str(root), BERT_JAX_DATA_MIRROR=mirror.url,
             JAX_COMPILATION_CACHE_DIR=str(tmp_path / "xla_cache"),
             PYTHONPATH=str(tmp_path / "hook"), BERT_JAX_TEST_OPENED=str(opened),
             BERT_JAX_TEST_WATCHED=f"{shared}:{new}")
  result = subprocess.run(  # $0 is the copy's script: the job cds to the copy
      ["bash", "-c", job.replace("\nbash scripts/setup.sh\n", "\n"),
       str(copy / "scripts" / "main_job.sh")], capture_output=True, text=True, env=env,
      timeout=1200)
  assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
  lines = result.stdout.splitlines()
  assert lines[0].startswith(f"data root {root} lacks 4 file(s) of wikitext2 sst2: fetching")
  assert lines[1] == f"{root}/wikitext-2/valid.txt: 60 documents, 7735 sentences, skipped 0 " \
                     "documentation members and 0 empty documents", lines[:3]
  assert lines[-1].startswith("  paired by seed (pretrained - random init"), lines[-5:]
  assert os.path.isfile(copy / "runs" / "quick" / "modernbert_vectors_sst2_random_s0" /
                        "eval_results.json")
  files = set(opened.read_text().splitlines())
  assert {os.path.join(new, "wikitext-2", "valid.txt"),
          os.path.join(new, "glue", "SST-2", "train.tsv")} <= files  # the hook sees reads
  assert [path for path in files if path.startswith(shared + os.sep)] == []
