"""A training workdir's guards: one run at a time, and a rerun that fits what is there.

  with WorkdirLock(workdir):           # a second run in the same workdir is refused
    check_same_model(workdir, ...)     # before anything in the workdir is written

The lock is WORKDIR/.lock (JSON: pid, host, start time), created exclusively by process 0:
O_EXCL on disk, a generation-match precondition on GCS (`storage.create_exclusive`), so
two runs on one bucket workdir are refused as on one disk.
A lock whose process is gone (same host, pid not running) is stale: it is replaced, with
one line saying so. A lock held by a live process, or by another host (whose processes
cannot be checked from here), refuses the run in one line that says how to clear it. In a
multi-process run every process learns process 0's outcome, so all start or none does.
"""
import json
import os
import socket
import time

import jax
import numpy as np
from jax.experimental import multihost_utils

from bert_jax.files import storage
from bert_jax.models import specs

LOCK = ".lock"
MODEL_CONFIG = "model_config.json"


class WorkdirLocked(BlockingIOError):
  """Another run holds the workdir (an OSError: the CLIs print it in one line)."""


def _alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except PermissionError:  # exists, owned by someone else
    return True
  return True


class WorkdirLock:
  """Context manager: holds WORKDIR/.lock for the run (see the module docstring).

  created_workdir: True when this run made the workdir (a refused run removes it again,
  so a refusal leaves no trace).
  """

  def __init__(self, workdir: str):
    self.workdir = storage.absolute(workdir)
    self.path = storage.join(self.workdir, LOCK)
    self.created_workdir = False
    self._held = False

  def __enter__(self) -> "WorkdirLock":
    error = ""
    if jax.process_index() == 0:
      error = self._acquire()
    if jax.process_count() > 1:  # everyone starts, or no one does
      failed = multihost_utils.process_allgather(np.array([len(error)], np.int32)).max()
      if failed and not error:
        error = f"{self.workdir}: process 0 could not lock the workdir (see its message)"
    if error:
      raise WorkdirLocked(error)
    return self

  def _acquire(self) -> str:
    self.created_workdir = not storage.isdir(self.workdir)
    storage.makedirs(self.workdir)
    mine = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                       "started": time.strftime("%Y-%m-%d %H:%M:%S")})
    for _ in range(2):
      try:
        created = storage.create_exclusive(self.path, mine)
      except NotImplementedError as error:
        print(f"{error}: the workdir lock is not atomic there (two runs starting at once "
              "could both proceed)", flush=True)
        created = not storage.exists(self.path)
        if created:
          storage.write_text(self.path, mine)
      if created:
        self._held = True
        return ""
      holder = self._holder()
      if holder is None:
        continue  # released meanwhile
      if holder.get("host") == socket.gethostname() and not _alive(int(holder.get("pid", -1))):
        print(f"{self.workdir}: removed a stale lock of process {holder.get('pid')} (no "
              "longer running)", flush=True)
        storage.remove(self.path)
        continue
      return (f"{self.workdir} is in use by process {holder.get('pid')} on "
              f"{holder.get('host')} (since {holder.get('started')}); wait for it to end, "
              f"or delete {self.path} if no run is using this workdir")
    return f"{self.path}: could not be created"

  def _holder(self) -> dict | None:
    try:
      return json.loads(storage.read_text(self.path))
    except FileNotFoundError:
      return None
    except (OSError, ValueError):
      return {"pid": "?", "host": "?", "started": "?"}

  def __exit__(self, *exc) -> None:
    if self._held:
      self._held = False
      try:
        storage.remove(self.path)
      except OSError:
        if exc[0] is None:
          raise
        return  # the run's own error is the one to report; a rerun here finds it stale
      if self.created_workdir:
        storage.remove_empty_folder(self.workdir)  # a refused run leaves no trace


def check_same_model(workdir: str, model_fields: dict, model_spec: dict,
                     labels=None) -> None:
  """A rerun must train the model the workdir holds: same architecture, same head, same
  classes.

  model_fields: the run's BertConfig fields (to_json_dict); model_spec: its headed model;
  labels: its classes in order (Task.label_names), compared where the workdir recorded
  them (a user's training file whose labels changed would remap the trained head).
  Implementation fields (dtype, scan_layers, remat_policy, attention_impl, and
  projection_init, which only starts a run) may change between runs.
  """
  path = storage.join(workdir, MODEL_CONFIG)
  if not storage.exists(path):
    return
  saved = json.loads(storage.read_text(path))
  # Compared as the JSON they are saved as (a tuple field reads back as a list).
  model_fields, model_spec = json.loads(json.dumps([model_fields, model_spec]))
  free = {"dtype", "scan_layers", "remat_policy", "attention_impl", "hidden_dropout_prob",
          "attention_probs_dropout_prob", "projection_init"}
  changed = [f"{key} {saved[key]!r} -> {value!r}" for key, value in model_fields.items()
             if key in saved and key not in free and saved[key] != value]
  saved_spec = specs.recorded_spec(saved.get("model"))
  if saved_spec not in (None, model_spec):
    changed.append(f"model {saved_spec} -> {model_spec}")
  if "labels" in saved and saved["labels"] != (list(labels) if labels else None):
    changed.append(f"labels {saved['labels']} -> {list(labels) if labels else None}")
  if changed:
    raise ValueError(f"{workdir} holds a different model than this run's config "
                     f"({'; '.join(changed)}): use a new --workdir, or the workdir's config")
