"""bench/masking_speed.py --blocks: the masking alone on the stream's 512-row blocks of a
real corpus, each scheme that reads no span annotations, against token masking."""
import importlib.util
import os
import re
import sys
import types

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "bench"))
_spec = importlib.util.spec_from_file_location(
    "masking_speed", os.path.join(REPO, "bench", "masking_speed.py"))
masking_speed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(masking_speed)


def test_blocks_time_every_scheme_without_span_files_against_token(corpus, tmp_path,
                                                                  monkeypatch, capsys):
  monkeypatch.chdir(tmp_path)  # its token cache goes to runs/cache
  args = types.SimpleNamespace(corpus=corpus, max_seq_length=32, max_predictions_per_seq=5,
                               rounds=1)
  results = masking_speed.masking_blocks(args)
  assert set(results) == {"token", "whole_word", "ngram", "span"}
  assert all(rate > 0 for rate in results.values())
  lines = capsys.readouterr().out.splitlines()
  assert re.match(r"T = 32, 5 predictions, ([1-9]|1[0-6]) blocks of 512 rows, median of 1 ",
                  lines[0])
  assert "| token |" in lines[3] and lines[3].endswith("| 1.00x |")
