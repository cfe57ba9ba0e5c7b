r"""Fetches the data root's files from their public sources, checked byte for byte.

  python -m bert_jax.commands.download sst2 wikitext2          # = bert-jax-download sst2 wikitext2
  python -m bert_jax.commands.download all --data_dir=/data/bert_jax
  python -m bert_jax.commands.download glue --mirror=http://127.0.0.1:8000

Every file of the data root is a copy of a file in a public GitHub repository at a fixed
commit. `data_manifest.json` (beside this module; written by scripts/data_manifest.py) lists
them by data set: the path under the data root, the raw.githubusercontent.com URL, the size
and the sha256. A file that is missing, or whose size or sha256 differs, is fetched into
`<path>.partial`, checked, then renamed into place; a file whose bytes do not match is
refused in one line naming the URL and both digests, and leaves no file behind. One line is
printed per file (fetched / present), then a summary.

The data root is the one rule of bert_jax.text.paths (`--data_dir`, else BERT_JAX_DATA_DIR,
else ../shared/data when it exists, else ~/.cache/bert_jax/data), so every reader finds what
this fetched. `--mirror` (or BERT_JAX_DATA_MIRROR) replaces the
https://raw.githubusercontent.com prefix of every URL. Only the standard library's urllib
is used. A data root in a bucket (gs://bucket/data) is filled too: each file is fetched and
checked in a local temporary folder, then written as one object (bert_jax.files.storage),
so an object is there whole or not at all. Imports nothing of bert_jax but the data-root
helper, `storage` and `cli` (its error lines).
"""
import functools
import hashlib
import http.client
import json
import os
import tempfile
import urllib.error
import urllib.request

from absl import flags

from bert_jax.files import storage
from bert_jax.startup import cli
from bert_jax.text import paths

RAW = "https://raw.githubusercontent.com"
MIRROR_ENV = "BERT_JAX_DATA_MIRROR"
MANIFEST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_manifest.json")
TIMEOUT_S = 60
_BLOCK = 1 << 20

# Names that stand for several data sets; `all` is every set of the manifest.
GROUPS = {
    "glue": ("sst2", "cola", "mrpc", "stsb", "rte", "wnli", "mnli", "qqp"),
    # bert_jax.text.prepare's default sources (PRETRAINING_SOURCES; a test keeps them equal).
    "pretraining_text": ("gutenberg", "brown", "movie_reviews", "state_union", "inaugural",
                         "wikitext2"),
}


class DownloadError(ValueError):
  """A file that cannot be fetched or does not match the manifest (one line, via cli)."""


def load_manifest(path: str = MANIFEST) -> dict[str, list[dict]]:
  """{set name: [{"path", "url", "size", "sha256"}, ...]}."""
  with open(path) as f:
    return json.load(f)


def known_names(manifest: dict) -> list[str]:
  return [*manifest, *GROUPS, "all"]


def expand(names: list[str], manifest: dict) -> list[str]:
  """Set and group names -> the data sets they stand for, in order, each once."""
  if not names:
    raise DownloadError("name the data sets to fetch (or all); known: "
                        + " ".join(known_names(manifest)))
  sets = []
  for name in names:
    members = list(manifest) if name == "all" else GROUPS.get(name, (name,))
    for member in members:
      if member not in manifest:
        raise DownloadError(f"unknown data set '{name}'; known: "
                            + " ".join(known_names(manifest)))
      if member not in sets:
        sets.append(member)
  return sets


def files_of(sets: list[str], manifest: dict) -> list[dict]:
  """The manifest entries of `sets`, each path once."""
  entries = {}
  for name in sets:
    for entry in manifest[name]:
      entries.setdefault(entry["path"], entry)
  return list(entries.values())


def sha256_of(path: str) -> str:
  digest = hashlib.sha256()
  with storage.open_file(path, "rb") as f:
    for block in iter(lambda: f.read(_BLOCK), b""):
      digest.update(block)
  return digest.hexdigest()


def is_present(entry: dict, root: str) -> bool:
  """True when the data root (a folder or a bucket's) holds the entry's file with its size
  and sha256."""
  target = storage.join(root, entry["path"])
  return (storage.exists(target) and not storage.isdir(target)
          and storage.version(target)[0] == entry["size"]
          and sha256_of(target) == entry["sha256"])


def source_url(entry: dict, mirror: str | None) -> str:
  """The entry's URL, its raw.githubusercontent.com prefix replaced by `mirror` if given."""
  url = entry["url"]
  if mirror and url.startswith(RAW):
    return mirror.rstrip("/") + url[len(RAW):]
  return url


def _network_error(url: str, reason: str, target: str) -> DownloadError:
  return DownloadError(
      f"cannot fetch {url}: {reason}; check the network and run the command again, or pass "
      f"--mirror (or {MIRROR_ENV}) naming a mirror of {RAW}, or copy the file to {target}")


def _network(url: str, target: str, call):
  """`call()`, its network errors (not the local file's) as one DownloadError line."""
  try:
    return call()
  except urllib.error.HTTPError as error:
    raise _network_error(url, f"HTTP {error.code} {error.reason}", target) from None
  except urllib.error.URLError as error:
    raise _network_error(url, str(error.reason), target) from None
  except (OSError, http.client.HTTPException) as error:
    raise _network_error(url, str(error) or type(error).__name__, target) from None


def _stream(url: str, partial: str, limit: int, target: str) -> tuple[int, str]:
  """Writes at most `limit` bytes of `url` to `partial`: (bytes written, their sha256)."""
  digest, size = hashlib.sha256(), 0
  with open(partial, "wb") as f:
    with _network(url, target, lambda: urllib.request.urlopen(url, timeout=TIMEOUT_S)) as response:
      while size < limit:
        block = _network(url, target, functools.partial(response.read,
                                                        min(_BLOCK, limit - size)))
        if not block:
          break
        digest.update(block)
        f.write(block)
        size += len(block)
  return size, digest.hexdigest()


def fetch(entry: dict, root: str, mirror: str | None) -> str:
  """Fetches one file into the data root (atomically, checked); returns its URL. A root
  in a bucket: fetched into a local temporary folder, then copied as one object."""
  url, target = source_url(entry, mirror), storage.join(root, entry["path"])
  if not storage.is_url(target):
    os.makedirs(os.path.dirname(target), exist_ok=True)
    _fetch_checked(url, entry, target, target)
    return url
  with tempfile.TemporaryDirectory(prefix="bert_jax-download-") as folder:
    local = os.path.join(folder, os.path.basename(entry["path"]))
    _fetch_checked(url, entry, local, target)
    storage.copy(local, target)
  return url


def _fetch_checked(url: str, entry: dict, local: str, target: str) -> None:
  """`url` into the local file `local` through `<local>.partial`, renamed only when its
  size and sha256 are the manifest's (errors name `target`, where it is going)."""
  partial = local + ".partial"
  try:
    size, digest = _stream(url, partial, entry["size"] + 1, target)
    if (size, digest) != (entry["size"], entry["sha256"]):
      got = (f"more than {entry['size']:,} B" if size > entry["size"]
             else f"sha256 {digest} ({size:,} B)")
      raise DownloadError(f"{url}: expected sha256 {entry['sha256']} ({entry['size']:,} B), "
                          f"got {got}; refused, nothing written to {target}")
    os.replace(partial, local)
  finally:
    if os.path.exists(partial):
      os.remove(partial)


def download(names: list[str], data_dir: str | None = None, mirror: str | None = None,
             quiet: bool = False, manifest: dict | None = None, echo=print) -> dict:
  """Fetches the files of `names` missing from the data root (or differing from the
  manifest). Prints a line per file and a summary; `quiet`: nothing when every file is
  present, else one line before fetching. Returns {"fetched": [...], "present": [...]}."""
  manifest = manifest or load_manifest()
  sets = expand(names, manifest)
  root = data_dir or paths.default_data_dir()
  mirror = mirror or os.environ.get(MIRROR_ENV) or None
  entries = files_of(sets, manifest)
  done = {"fetched": [], "present": []}
  missing = []
  for entry in entries:
    if is_present(entry, root):
      done["present"].append(entry["path"])
      if not quiet:
        echo(f"present  {entry['path']}")
    else:
      missing.append(entry)
  if quiet and missing:
    echo(f"data root {root} lacks {len(missing)} file(s) of {' '.join(sets)}: fetching "
         f"{sum(e['size'] for e in missing):,} B from {mirror or RAW} (bert_jax.commands.download)")
  for entry in missing:
    url = fetch(entry, root, mirror)
    done["fetched"].append(entry["path"])
    if not quiet:
      echo(f"fetched  {entry['path']}  ({entry['size']:,} B, {url})")
  if not quiet:
    echo(f"data root {root}: {len(done['fetched'])} fetched, {len(done['present'])} present "
         f"({' '.join(sets)})")
  return done


if __name__ == "__main__":  # flags exist only when run as a program
  _DATA_DIR = flags.DEFINE_string(
      "data_dir", None, "Data root to fill (default: bert_jax.text.paths.default_data_dir()).")
  _MIRROR = flags.DEFINE_string(
      "mirror", None, f"Replaces the {RAW} prefix of every URL (default: ${MIRROR_ENV}).")
  _QUIET = flags.DEFINE_bool(
      "quiet", False, "Print nothing when every file is present; else one line, then fetch.")


def main(argv):
  download(argv[1:], _DATA_DIR.value, _MIRROR.value, _QUIET.value)


if __name__ == "__main__":
  cli.run(main, urls=("mirror", "data_dir"))
