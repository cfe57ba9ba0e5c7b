"""A mirror of raw.githubusercontent.com on 127.0.0.1 for tests: a threaded http.server that
serves the data root's files under the manifest's URL layout (OWNER/REPO/COMMIT/PATH), so
bert_jax.commands.download fetches them with `--mirror` / BERT_JAX_DATA_MIRROR set to its `url`.
`extra` adds files of other URL paths (a repository's files at a branch, for a notebook
that reads them from GitHub)."""
import http.server
import os
import threading
import urllib.parse


class Mirror:
  """raw.githubusercontent.com's URL layout over the data root's files; `corrupt` maps a
  URL path to the bytes served instead, `requests` records every path asked for."""

  def __init__(self, root: str, manifest: dict, extra: dict[str, str] | None = None):
    self.files = {urllib.parse.urlparse(entry["url"]).path: os.path.join(root, entry["path"])
                  for entries in manifest.values() for entry in entries}
    self.files.update(extra or {})
    self.by_target = {entry["path"]: urllib.parse.urlparse(entry["url"]).path
                      for entries in manifest.values() for entry in entries}
    self.corrupt, self.requests = {}, []
    mirror = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def do_GET(self):  # noqa: N802 (http.server's name)
        mirror.requests.append(self.path)
        local = mirror.files.get(self.path)
        if local is None:
          self.send_error(404)
          return
        body = mirror.corrupt.get(self.path)
        if body is None:
          with open(local, "rb") as f:
            body = f.read()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

      def log_message(self, *args):
        del args

    self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
    self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
    self.thread.start()

  def stop(self):
    self.server.shutdown()
    self.server.server_close()
    self.thread.join()
