r"""The multi-process stop decision: a `process_allgather` after every step against JAX's
preemption sync point (bert_jax/run/stop_signals.py), in one run.

  python bench/stop_decision.py                      # 2 processes x 4 CPU devices
  python bench/stop_decision.py --width=256 --steps=400

Starts two processes of 4 simulated CPU devices each on 127.0.0.1 (jax.distributed). Each
trains the same data-parallel step (a two-layer MLP's SGD step, params replicated, the batch
split over all 8 devices, so every step ends in a cross-process all-reduce) and asks
StopSignals.agreed(step) after every step, as the trainer does; the decisions alternate
round by round. On CPU both are bounded to the trainer's CPU_STEPS_IN_FLIGHT steps queued
ahead (bert_jax/run/loop.py; gloo hangs with some 50). Prints steps/s per decision and their ratio, as process 0 measured them.
"""
import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def worker(args) -> None:
  import jax
  import jax.numpy as jnp
  import numpy as np
  from jax.sharding import NamedSharding, PartitionSpec as P

  from bert_jax.run.loop import bound_steps_in_flight
  from bert_jax.run.stop_signals import StopSignals

  jax.distributed.initialize(f"127.0.0.1:{args.port}", 2, args.process_id)
  mesh = jax.make_mesh((jax.device_count(),), ("data",))
  replicated, split = NamedSharding(mesh, P()), NamedSharding(mesh, P("data"))
  rng = np.random.default_rng(0)
  host = {"x": rng.normal(size=(args.batch, args.width)).astype(np.float32),
          "y": rng.normal(size=(args.batch, 1)).astype(np.float32)}
  batch = {k: jax.make_array_from_callback(v.shape, split, lambda i, v=v: v[i])
           for k, v in host.items()}
  params = jax.device_put({"w1": np.full((args.width, args.width), 0.01, np.float32),
                           "w2": np.full((args.width, 1), 0.01, np.float32)}, replicated)

  def loss(p, b):
    return jnp.mean((jnp.tanh(b["x"] @ p["w1"]) @ p["w2"] - b["y"]) ** 2)

  @jax.jit
  def step(p, b):
    return jax.tree.map(lambda w, g: w - 1e-3 * g, p, jax.grad(loss)(p, b))

  params = jax.block_until_ready(step(params, batch))  # compiled
  counter, rates = 0, {d: [] for d in args.decisions.split(",")}
  for _ in range(args.rounds):
    for decision in args.decisions.split(","):
      with StopSignals(decision) as stop:
        started, in_flight = time.perf_counter(), collections.deque()
        for _ in range(args.steps):
          params = step(params, batch)
          bound_steps_in_flight(in_flight, params)  # as the trainer's steps are, on CPU
          counter += 1
          assert not stop.agreed(counter)
        jax.block_until_ready(params)
        rates[decision].append(args.steps / (time.perf_counter() - started))
  if args.process_id == 0:
    print("JSON: " + json.dumps(rates), flush=True)
  jax.distributed.shutdown()


def main(args) -> None:
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  env = {**os.environ, "XLA_FLAGS": "--xla_force_host_platform_device_count=4",
         "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "2"}
  common = [sys.executable, __file__, "--worker", f"--port={port}", f"--steps={args.steps}",
            f"--rounds={args.rounds}", f"--decisions={args.decisions}", f"--width={args.width}", f"--batch={args.batch}"]
  procs = [subprocess.Popen(common + [f"--process_id={i}"], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=None if args.verbose else subprocess.DEVNULL)
           for i in range(2)]
  out = [p.communicate(timeout=1800)[0] for p in procs]
  if any(p.returncode for p in procs):
    sys.exit(f"a worker failed: exit codes {[p.returncode for p in procs]}\n{out[0][-2000:]}")
  rates = json.loads(next(l for l in out[0].splitlines() if l.startswith("JSON: "))[6:])
  best = {d: max(r) for d, r in rates.items()}
  print(f"2 processes x 4 CPU devices, MLP width {args.width}, global batch {args.batch}, "
        f"{args.steps} steps x {args.rounds} rounds per decision (steps/s, best round):")
  for decision, values in rates.items():
    print(f"  {decision:<10} {best[decision]:8.1f}   rounds: "
          + ", ".join(f"{v:.1f}" for v in values))
  print(f"  sync_point / allgather: {best['sync_point'] / best['allgather']:.2f}x")


if __name__ == "__main__":
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--verbose", action="store_true", help="the workers' logs")
  parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--process_id", type=int, help=argparse.SUPPRESS)
  parser.add_argument("--steps", type=int, default=200, help="steps per round and decision")
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--decisions", default="sync_point,allgather", help=argparse.SUPPRESS)
  parser.add_argument("--width", type=int, default=128, help="the MLP's width")
  parser.add_argument("--batch", type=int, default=64, help="the global batch")
  parsed = parser.parse_args()
  worker(parsed) if parsed.worker else main(parsed)
