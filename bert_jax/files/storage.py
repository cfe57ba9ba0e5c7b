"""Where a workdir's files live: a local folder, or object storage (gs://bucket/run).

Every file of a training workdir goes through here: the lock, config.json, metrics.jsonl,
the TensorBoard events, eval_results.json, the run report, model_config.json, the
tokenizer's files, predictions; orbax writes the checkpoints themselves (tensorstore for
the arrays, etils.epath for its folders and metadata). So do the other paths a run or a
program reads or writes: corpus globs (`glob`; the lines streamed, text/corpus.py), the
pipeline cache, vocabularies, word vectors, task files, `prepare`'s sources and output,
`convert`'s and `embed`'s. A reader that opens local files only (safetensors, TensorFlow's
checkpoint reader, the tokenizers' and the vocabulary learners' libraries) reads a URL's
copy (`local_copy`: a temporary folder, removed at exit), a writer of that kind writes a
temporary folder that is then copied (`write_folder`). A URL is never turned into a local
path name: `absolute` leaves it as it is, and a step that cannot use one refuses it up
front (`local_only`).

The layer is etils.epath, orbax's own, on its fsspec backend (gcsfs for gs://). With
TensorFlow installed epath would pick tf.io.gfile for gs://, whose GCS client (TensorFlow
2.21's libtensorflow_framework) has its endpoints compiled in (www.googleapis.com): it
cannot be pointed at any other server, so the code that runs on a TPU VM could never be
tested on a local one. gcsfs honours STORAGE_EMULATOR_HOST, as Google's own Python clients
do, and can create an object only if none exists (a generation-match precondition), which
the workdir lock needs. Importing this module therefore sets EPATH_USE_TF=false unless it
is already set (before epath first chooses a backend); local paths use epath's os backend
either way. On a TPU VM gcsfs and tensorstore use the VM's default credentials.

To use a local GCS server (tests, docs/guides/cloud-paths.md):
  STORAGE_EMULATOR_HOST=http://127.0.0.1:PORT       gcsfs (this module, orbax's folders)
  TENSORSTORE_GCS_HTTP_URL=http://127.0.0.1:PORT    tensorstore (orbax's arrays)
"""
import atexit
import functools
import glob as glob_lib
import io
import os
import re
import shutil
import tempfile

os.environ.setdefault("EPATH_USE_TF", "false")

from etils import epath  # noqa: E402

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path) -> bool:
  """True for a path with a scheme: gs://bucket/run, s3://..., https://..."""
  return bool(_SCHEME.match(os.fspath(path)))


def bucket_of(url: str) -> str:
  """gs://bucket/a/b -> gs://bucket."""
  scheme, _, rest = os.fspath(url).partition("://")
  return f"{scheme}://{rest.split('/', 1)[0]}"


def _store_error(urls: list[str], error: Exception) -> OSError:
  """The object store client's error as one line naming the URL: gcsfs names the HTTP
  request (`b/missing/o`) and puts the server's message on a second line. A missing object
  whose bucket is missing says so."""
  first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
  if isinstance(error, FileNotFoundError):
    for url in urls:
      bucket = bucket_of(url)
      try:
        missing = not epath.Path(bucket).exists()
      except Exception:  # pylint: disable=broad-except  # the store itself out of reach
        missing = False
      if missing:
        return FileNotFoundError(f"{url}: the bucket {bucket} does not exist (or these "
                                 "credentials cannot see it)")
    return FileNotFoundError(f"{urls[0]}: no such object ({first})")
  return OSError(f"{urls[0]}: {first}")


def _names_the_url(function):
  """Runs `function(path, ...)`; an error of the store's client about a URL argument
  (not found, forbidden, another HTTP error) becomes `_store_error`'s one line. Errors
  that already name the URL, and errors about local paths, pass as they are."""
  @functools.wraps(function)
  def wrapped(*args, **kwargs):
    try:
      return function(*args, **kwargs)
    except Exception as error:  # pylint: disable=broad-except  # re-raised unless the store's
      urls = [os.fspath(a) for a in args if isinstance(a, (str, os.PathLike)) and is_url(a)]
      if not urls or str(error).startswith(tuple(urls)) or not _from_the_store(error):
        raise
      raise _store_error(urls, error) from None
  return wrapped


def _from_the_store(error: Exception) -> bool:
  """An error of the store's client: gcsfs's own (HttpError), its HTTP library's (aiohttp:
  a host out of reach) or an OSError raised in gcsfs (FileNotFoundError for a 404)."""
  module = getattr(type(error), "__module__", "")
  if module.startswith(("gcsfs", "fsspec", "aiohttp")):
    return True
  traceback = error.__traceback__
  while traceback is not None and traceback.tb_next is not None:
    traceback = traceback.tb_next
  where = traceback.tb_frame.f_code.co_filename if traceback is not None else ""
  return isinstance(error, OSError) and f"{os.sep}gcsfs{os.sep}" in where


def local_only(path, step: str) -> None:
  """A ValueError naming the URL and the step, for a step that reads or writes local files
  only (nothing is resolved against the data root or made into a local folder)."""
  if path and is_url(path):
    raise ValueError(f"{path}: {step} reads and writes local paths only; a URL is not "
                     "supported there (copy the files to a local folder first)")


def absolute(path: str) -> str:
  """os.path.abspath for a local path; a URL as it is."""
  return os.fspath(path) if is_url(path) else os.path.abspath(path)


def join(path: str, *names: str) -> str:
  return os.path.join(os.fspath(path), *names)


@_names_the_url
def glob(pattern: str) -> list[str]:
  """The sorted paths a glob matches (`*`, `?`, `[...]`); a URL's through its fsspec file
  system (gcsfs lists the bucket), each match a URL of the same scheme."""
  if not is_url(pattern):
    return sorted(glob_lib.glob(pattern))
  import fsspec
  scheme = pattern.split("://", 1)[0]
  fs, key = fsspec.core.url_to_fs(pattern)
  fs.invalidate_cache()  # another process may have written there since the last listing
  return sorted(f"{scheme}://{match}" for match in fs.glob(key))


def parent(path: str) -> str:
  """The folder a file is in (a URL's: the URL up to its last "/")."""
  return os.path.dirname(os.fspath(path).rstrip("/"))


@_names_the_url
def exists(path: str) -> bool:
  return epath.Path(path).exists()


@_names_the_url
def version(path: str) -> list:
  """[size, when it was last written] of a file: what a cache keyed on it compares (on
  object storage the size and the object's generation)."""
  if not is_url(path):
    return [os.path.getsize(path), os.path.getmtime(path)]
  import fsspec
  fs, key = fsspec.core.url_to_fs(path)
  info = fs.info(key)
  return [info["size"], info.get("generation") or info.get("updated") or info.get("mtime")]


@_names_the_url
def isdir(path: str) -> bool:
  return epath.Path(path).is_dir()


@_names_the_url
def listdir(path: str) -> list[str]:
  return sorted(child.name for child in epath.Path(path).iterdir())


def makedirs(path: str) -> None:
  """A local folder (and its parents); on object storage folders need not be made."""
  if not is_url(path):
    os.makedirs(path, exist_ok=True)


@_names_the_url
def remove(path: str) -> None:
  epath.Path(path).unlink()


@_names_the_url
def remove_tree(path: str) -> None:
  """A folder and everything in it (on object storage: every object under it)."""
  if is_url(path):
    epath.Path(path).rmtree(missing_ok=True)
  else:
    shutil.rmtree(path)


@_names_the_url
def copy(source: str, target: str) -> None:
  """One file, local or URL, to a new name (replacing what is there)."""
  if not is_url(source) and not is_url(target):
    shutil.copyfile(source, target)
  else:
    epath.Path(source).copy(epath.Path(target), overwrite=True)


def remove_empty_folder(path: str) -> None:
  """rmdir of an empty local folder; an object store's folder goes with its last file."""
  if not is_url(path) and os.path.isdir(path) and not os.listdir(path):
    os.rmdir(path)


@_names_the_url
def move(source: str, target: str) -> None:
  """A file or folder to a new name (on object storage: copied, then deleted)."""
  if not is_url(source) and not is_url(target):
    shutil.move(source, target)
    return
  source_path = epath.Path(source)
  if source_path.is_dir():
    for child in source_path.iterdir():
      move(os.fspath(child), join(target, child.name))
    source_path.rmtree(missing_ok=True)
  else:
    source_path.copy(epath.Path(target), overwrite=True)
    source_path.unlink()


@_names_the_url
def open_file(path: str, mode: str = "r"):
  """A file object, like open(); on object storage "w" writes the object on close."""
  if not is_url(path):
    return open(path, mode, **({} if "b" in mode else {"encoding": "utf-8"}))
  if "b" in mode:
    return epath.Path(path).open(mode)
  return io.TextIOWrapper(epath.Path(path).open(mode + "b"), encoding="utf-8")


def read_text(path: str) -> str:
  with open_file(path) as f:
    return f.read()


def read_bytes(path: str) -> bytes:
  with open_file(path, "rb") as f:
    return f.read()


def write_text(path: str, text: str) -> None:
  """The whole file; atomic where the file system can rename (local: a .tmp, renamed)."""
  write_bytes(path, text.encode("utf-8"))


@_names_the_url
def write_bytes(path: str, data: bytes) -> None:
  """The whole file, as write_text."""
  if is_url(path):  # an object appears whole, or not at all
    epath.Path(path).write_bytes(data)
    return
  with open(path + ".tmp", "wb") as f:
    f.write(data)
  os.replace(path + ".tmp", path)


@_names_the_url
def append_bytes(path: str, data: bytes) -> None:
  """Adds data at the end of the file. Objects cannot be appended to: the object is read
  and written again whole (what tf.io.gfile does for GCS too), so readers see either the
  old or the new contents."""
  if not is_url(path):
    with open(path, "ab") as f:
      f.write(data)
    return
  target = epath.Path(path)
  before = target.read_bytes() if target.exists() else b""
  target.write_bytes(before + data)


@_names_the_url
def create_exclusive(path: str, text: str) -> bool:
  """Writes a new file only if none is there (False: one is); atomic on disk (O_EXCL)
  and on GCS (the upload is refused unless the object has no generation yet,
  ifGenerationMatch=0). Another store raises NotImplementedError."""
  if not is_url(path):
    try:
      fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
      return False
    with os.fdopen(fd, "w") as f:
      f.write(text)
    return True
  scheme = path.split("://", 1)[0]
  if scheme not in ("gs", "gcs"):
    raise NotImplementedError(f"{path}: no atomic create-if-absent on {scheme}://")
  import fsspec  # the same gcsfs file system epath uses
  fs, key = fsspec.core.url_to_fs(path)
  try:
    fs.pipe_file(key, text.encode(), mode="create")  # ifGenerationMatch=0
  except FileExistsError:
    return False
  return True


def write_folder(target: str, fill):
  """fill(folder) writes files into a local folder: `target` itself when local; else a
  temporary folder whose files are then copied to `target` (for writers that only know
  open(), such as the tokenizers' save). Returns what fill returns; a path it returns
  inside the temporary folder is given as the same path under `target`."""
  if not is_url(target):
    return fill(target)
  with tempfile.TemporaryDirectory() as local:
    result = fill(local)
    for root, _, files in os.walk(local):
      for name in files:
        source = os.path.join(root, name)
        relative = os.path.relpath(source, local)
        epath.Path(source).copy(epath.Path(join(target, relative)), overwrite=True)
    if isinstance(result, str) and result.startswith(local + os.sep):
      result = join(target, os.path.relpath(result, local))
    return result


_STAGED: dict[str, str] = {}  # URL -> its local copy, once per process
_STAGING: list[str] = []  # the process's staging folder, removed at exit


def local_copy(path: str) -> str:
  """A local path that open() reads, for readers that know no other (tokenizers,
  safetensors, TensorFlow's checkpoint reader, numpy): a local path as it is; a URL's
  object, or a URL folder's objects (not its subfolders'), copied once per process into a
  temporary folder removed at exit, as `<tmp>/bert_jax-staged-*/<scheme>/<bucket>/<path>`
  (no local name starts with the scheme's "gs:"). A URL that names nothing is a
  FileNotFoundError naming it."""
  if not is_url(path):
    return path
  url = os.fspath(path).rstrip("/")
  if url not in _STAGED:
    source = epath.Path(url)
    if not _STAGING:
      _STAGING.append(tempfile.mkdtemp(prefix="bert_jax-staged-"))
      atexit.register(shutil.rmtree, _STAGING[0], True)
    local = os.path.join(_STAGING[0], *url.replace("://", "/", 1).split("/"))
    if source.is_dir():
      os.makedirs(local, exist_ok=True)
      for child in source.iterdir():
        if not child.is_dir():
          child.copy(epath.Path(os.path.join(local, child.name)), overwrite=True)
    elif source.exists():
      os.makedirs(os.path.dirname(local), exist_ok=True)
      source.copy(epath.Path(local), overwrite=True)
    else:
      raise FileNotFoundError(f"{url}: no such object or folder")
    _STAGED[url] = local
  return _STAGED[url]
