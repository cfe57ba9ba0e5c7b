"""A Hub-shaped HTTP server on 127.0.0.1 for tests: the endpoints huggingface_hub's
snapshot_download calls against HF_ENDPOINT, serving repos made from local folders.

  GET  /api/models/{repo}/revision/{rev}          repo info: id, sha, siblings
  GET  /api/models/{repo}/tree/{rev}?recursive=.. the file listing: type, path, size, oid
  HEAD /{repo}/resolve/{rev}/{path}               X-Repo-Commit, ETag, Content-Length
  GET  /{repo}/resolve/{rev}/{path}               the file

An unknown repo is 404 with X-Error-Code RepoNotFound (huggingface_hub's
RepositoryNotFoundError), an unknown revision RevisionNotFound; a gated repo lists its
files but answers 403 GatedRepo for each of them, as the Hub does without an accepted
token. `rev` is "main", the repo's commit or one of its tags.
"""
import hashlib
import http.server
import json
import os
import threading
import urllib.parse


class Repo:
  def __init__(self, folder: str, gated: bool = False, tags=()):
    self.files = {}
    for root, _, names in os.walk(folder):
      for name in names:
        path = os.path.join(root, name)
        with open(path, "rb") as f:
          self.files[os.path.relpath(path, folder).replace(os.sep, "/")] = f.read()
    digest = hashlib.sha1()
    for name in sorted(self.files):
      digest.update(name.encode() + hashlib.sha1(self.files[name]).digest())
    self.sha = digest.hexdigest()  # 40 hex digits, as a git commit
    self.gated = gated
    self.revisions = {"main", self.sha, *tags}


class HubServer:
  """Started on a free port of 127.0.0.1 (`url`); `requests` counts what it answered."""

  def __init__(self):
    self.repos: dict[str, Repo] = {}
    self.requests: list[str] = []
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def do_GET(self):
        server.answer(self, body=True)

      def do_HEAD(self):
        server.answer(self, body=False)

      def log_message(self, *args):
        pass

    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
    self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
    self.thread.start()

  def add(self, repo_id: str, folder: str, **kwargs) -> Repo:
    self.repos[repo_id] = Repo(folder, **kwargs)
    return self.repos[repo_id]

  def stop(self):
    self.httpd.shutdown()
    self.httpd.server_close()
    self.thread.join()

  # --- routing ------------------------------------------------------------------------
  def answer(self, handler, body: bool):
    url = urllib.parse.urlsplit(handler.path)
    path = urllib.parse.unquote(url.path)
    self.requests.append(f"{handler.command} {path}")
    if path.startswith("/api/models/"):
      rest = path[len("/api/models/"):]
      for marker, reply in (("/revision/", self._info), ("/tree/", self._tree)):
        if marker in rest:
          repo_id, _, rev = rest.partition(marker)
          return self._with_repo(handler, repo_id, rev.split("/")[0], reply, body)
    if "/resolve/" in path:
      repo_id, _, rest = path.lstrip("/").partition("/resolve/")
      rev, _, name = rest.partition("/")
      return self._with_repo(handler, repo_id, rev, lambda h, r, b: self._file(h, r, name, b),
                             body)
    self._send(handler, 404, b"", {"X-Error-Code": "EntryNotFound"}, body)

  def _with_repo(self, handler, repo_id, rev, reply, body):
    repo = self.repos.get(repo_id)
    if repo is None:
      return self._send(handler, 404, b'{"error": "Repository not found"}',
                        {"X-Error-Code": "RepoNotFound",
                         "X-Error-Message": "Repository not found"}, body)
    if rev not in repo.revisions:
      return self._send(handler, 404, b'{"error": "Invalid rev id"}',
                        {"X-Error-Code": "RevisionNotFound"}, body)
    reply(handler, repo_id, body)

  def _info(self, handler, repo_id, body):
    repo = self.repos[repo_id]
    data = {"id": repo_id, "sha": repo.sha, "private": False,
            "gated": "manual" if repo.gated else False,
            "siblings": [{"rfilename": name} for name in sorted(repo.files)]}
    self._send(handler, 200, json.dumps(data).encode(),
               {"Content-Type": "application/json"}, body)

  def _tree(self, handler, repo_id, body):
    repo = self.repos[repo_id]
    data = [{"type": "file", "path": name, "size": len(content),
             "oid": hashlib.sha1(content).hexdigest()}
            for name, content in sorted(repo.files.items())]
    self._send(handler, 200, json.dumps(data).encode(),
               {"Content-Type": "application/json"}, body)

  def _file(self, handler, repo_id, name, body):
    repo = self.repos[repo_id]
    if repo.gated:
      return self._send(handler, 403, b'{"error": "gated"}',
                        {"X-Error-Code": "GatedRepo",
                         "X-Error-Message": "Access to model is restricted"}, body)
    if name not in repo.files:
      return self._send(handler, 404, b"", {"X-Error-Code": "EntryNotFound"}, body)
    content = repo.files[name]
    self._send(handler, 200, content,
               {"X-Repo-Commit": repo.sha, "ETag": f'"{hashlib.sha1(content).hexdigest()}"',
                "Content-Type": "application/octet-stream"}, body)

  @staticmethod
  def _send(handler, status, content: bytes, headers: dict, body: bool):
    handler.send_response(status)
    for key, value in headers.items():
      handler.send_header(key, value)
    handler.send_header("Content-Length", str(len(content)))
    handler.end_headers()
    if body:
      handler.wfile.write(content)
