"""Input MB/s of corpus preparation on one worker and on all cores, from one run.

A real source of the data root (default WikiText-2 valid, the format a Wikipedia dump
comes in) is repeated into one file of about --megabytes under a temporary folder; then
`prepare.prepare` converts it with workers=1 and with workers=K (default os.cpu_count()),
each end to end: reading, decoding, cleaning, writing, and for K the start of the spawned
workers (about a second each: they import the package). The two outputs must be the same
bytes. Printed: MB/s of input (10^6 bytes) for each and their ratio; the CPU seconds of
this process (reading, decoding, writing: the serial part, which bounds what any K can
reach) and of the workers; and K's start-up cost alone (a run on a one-document file).
On a machine shared with other jobs the ratio says little; the CPU seconds say more.

  python bench/prepare_speed.py [--source wikitext-2/valid.txt] [--megabytes 24] [--workers K]
"""
import argparse
import os
import resource
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bert_jax.text import paths  # pylint: disable=g-import-not-at-top,wrong-import-position
from bert_jax.text import prepare  # pylint: disable=g-import-not-at-top,wrong-import-position


def repeated_source(source: str, megabytes: float, folder: str) -> str:
  """`source` (resolved, a text file) copied end to end until about `megabytes` MB;
  the copy keeps the source's name, so its format is guessed the same."""
  with open(source, "rb") as f:
    data = f.read()
  copies = max(1, round(megabytes * 1e6 / len(data)))
  path = os.path.join(folder, os.path.basename(os.path.dirname(source)) + "-"
                      + os.path.basename(source))
  with open(path, "wb") as f:
    for _ in range(copies):
      f.write(data)
  return path


def timed(source: str, output: str, workers: int) -> tuple[float, float, float]:
  """(wall seconds, this process's CPU seconds, its workers' CPU seconds) of one run."""
  start, own, children = (time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF),
                          resource.getrusage(resource.RUSAGE_CHILDREN))
  prepare.prepare([source], output, workers=workers)
  cpu = lambda before, after: (after.ru_utime + after.ru_stime
                               - before.ru_utime - before.ru_stime)
  return (time.perf_counter() - start,
          cpu(own, resource.getrusage(resource.RUSAGE_SELF)),
          max(0.0, cpu(children, resource.getrusage(resource.RUSAGE_CHILDREN))))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--source", default="wikitext-2/valid.txt",
                      help="a text file of the data root (zips are not repeated)")
  parser.add_argument("--megabytes", type=float, default=24.0)
  parser.add_argument("--workers", type=int, default=os.cpu_count())
  args = parser.parse_args()
  source, _ = prepare.parse_source(args.source, paths.default_data_dir())
  with tempfile.TemporaryDirectory() as folder:
    big = repeated_source(source, args.megabytes, folder)
    size = os.path.getsize(big)
    tiny = os.path.join(folder, "tiny.txt")
    with open(tiny, "w", encoding="utf-8") as f:
      f.write("One sentence. Two.\n")
    startup, _, _ = timed(tiny, os.path.join(folder, "tiny-out.txt"), args.workers)
    runs = {1: timed(big, os.path.join(folder, "k1.txt"), 1),
            args.workers: timed(big, os.path.join(folder, "kn.txt"), args.workers)}
    with open(os.path.join(folder, "k1.txt"), "rb") as a, \
         open(os.path.join(folder, "kn.txt"), "rb") as b:
      same = a.read() == b.read()
  megabytes = size / 1e6
  print(f"input: {args.source} repeated to {megabytes:.1f} MB; {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the end")
  print(f"{'workers':>8} {'seconds':>8} {'MB/s':>7} {'CPU s: main':>12} {'workers':>8}")
  for workers, (wall, own, children) in runs.items():
    print(f"{workers:>8} {wall:>8.2f} {megabytes / wall:>7.2f} {own:>12.2f} {children:>8.2f}")
  (one, _, _), (many, main_cpu, _) = runs[1], runs[args.workers]
  print(f"ratio {one / many:.2f}x; start-up of {args.workers} workers alone {startup:.2f} s; "
        f"the main process's own work bounds K workers at {megabytes / main_cpu:.0f} MB/s; "
        f"outputs {'identical' if same else 'DIFFER'}")
  if not same:
    sys.exit(1)


if __name__ == "__main__":
  main()
