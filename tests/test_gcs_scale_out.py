"""A checkpoint in a bucket written by two processes and read by one (tests/helpers/gcs.py's
server; the processes started as tests/test_scale_out.py starts them: 4 simulated CPU
devices each, the distributed flags on 127.0.0.1)."""
import json
import os

import pytest

import scale_out_worker as worker
from tests.helpers.gcs import BUCKET
from tests.helpers.processes import free_port, Job, max_relative_difference, RTOL, train_command

_PAIR_MESH = "2,2,2"  # every axis spans the devices of both processes


def _losses(gcs, prefix: str) -> dict:
  rows = [json.loads(line) for line in gcs.read(f"{prefix}metrics.jsonl").decode().splitlines()]
  return {row["step"]: row["loss"] for row in rows if "loss" in row}


@pytest.mark.slow
def test_two_processes_write_one_checkpoint_to_the_bucket_and_one_process_resumes(
    gcs, corpus, tmp_path):
  """2 processes x 4 devices train 4 steps on the (2,2,2) mesh with the corpus and the
  workdir in the bucket: step 4's checkpoint holds both processes' shards; then 1 process
  of 8 devices, same mesh, resumes from it to step 6, and its steps 5-6 continue the run
  (the losses of an uninterrupted 6-step run on one process's 8 devices, to RTOL)."""
  with open(corpus, "rb") as f:
    gcs.upload("pair/corpus.txt", f.read())
  url = f"gs://{BUCKET}/pair/*.txt"
  workdir, prefix = f"gs://{BUCKET}/pair_run", "pair_run/"
  # A warmup shorter than either run: the schedule of a 4-step run is a 6-step run's.
  changes = {**worker.mesh_changes(_PAIR_MESH), "data.cache_dir": "",
             "optim.warmup_steps": 2, "checkpoint_every_steps": 4}
  port = free_port()
  args = train_command(url, workdir, **{**changes, "num_train_steps": 4})
  args += [f"--coordinator_address=127.0.0.1:{port}", "--num_processes=2",
           "--heartbeat_timeout=10"]
  bind = {"JAX_COORDINATOR_BIND_ADDRESS": f"127.0.0.1:{port}"}
  pair = [Job(args + [f"--process_id={i}"], tmp_path / f"pair{i}.log", devices=4, env=bind)
          for i in range(2)]
  reference = Job(train_command(url, tmp_path / "reference", **{**changes,
                                                                 "num_train_steps": 6}),
                  tmp_path / "reference.log", devices=8)
  try:
    for job in pair:
      job.finish()
  finally:
    for job in pair:
      job.stop()
  state = [n for n in gcs.names(f"{prefix}checkpoints/4/state/")]
  assert f"{prefix}checkpoints/4/commit_success.txt" in gcs.names(f"{prefix}checkpoints/4/")
  for process in (0, 1):  # each process wrote its own shards (orbax's ocdbt.process_N)
    assert any(f"/ocdbt.process_{process}/" in name for name in state), state
  first = _losses(gcs, prefix)
  assert sorted(first) == [1, 2, 3, 4]

  alone = Job(train_command(url, workdir, **{**changes, "num_train_steps": 6}),
              tmp_path / "alone.log", devices=8)
  try:
    alone.finish()
    reference.finish()
  finally:
    alone.stop()
    reference.stop()
  assert f"Resumed from {workdir}/checkpoints at step 4" in alone.output(), alone.output()
  resumed = _losses(gcs, prefix)
  assert sorted(resumed) == [1, 2, 3, 4, 5, 6] and resumed[4] == first[4]
  with open(os.path.join(tmp_path, "reference", "metrics.jsonl")) as f:
    want = {r["step"]: r["loss"] for r in map(json.loads, f) if "loss" in r}
  assert max_relative_difference(resumed, want) <= RTOL
