"""Entity span files from an NER tagger (bert_jax/commands/tag_spans.py): IOB2 tags to spans, the
batched tagging equal to tagging line by line, the CLI's span file valid for its text."""
import os
import subprocess
import sys

import pytest

from bert_jax.commands import tag_spans
from bert_jax.text import spans
from bert_jax.text.tokenizers import model_tokenizer
from bert_jax.weights import load_pretrained
from tests.helpers.checkpoints import random_tagger

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_iob_spans_follow_conlleval_chunks():
  tags = ["B-PER", "I-PER", "O", "I-LOC", "I-LOC", "B-LOC", "B-ORG", "I-MISC", "O", "B-PER"]
  assert tag_spans.iob_spans(tags) == [(0, 2, "entity"), (3, 5, "entity"), (5, 6, "entity"),
                                       (6, 7, "entity"), (7, 8, "entity"), (9, 10, "entity")]
  assert tag_spans.iob_spans(["O", "O"]) == [] and tag_spans.iob_spans([]) == []


@pytest.fixture(scope="module")
def ner_folder(tmp_path_factory, vocab_path):
  return random_tagger(str(tmp_path_factory.mktemp("ner")), vocab_path, "ner", 0)


@pytest.fixture(scope="module")
def chunk_folder(tmp_path_factory, vocab_path):
  return random_tagger(str(tmp_path_factory.mktemp("chunk")), vocab_path, "chunk", 1)


def test_batched_tagging_equals_line_by_line(ner_folder):
  model, variables = load_pretrained(ner_folder)
  tokenizer = model_tokenizer(ner_folder)
  lines = ["harry potter went to new york city .", "", "the united nations met in paris",
           "a b c d e f g h i j k l m n o p q r s t u v w x y z " * 3]
  batched = tag_spans.tag_lines(model, variables, tokenizer, lines, max_length=32,
                                batch_size=3)
  alone = [tag_spans.tag_lines(model, variables, tokenizer, [line], max_length=32,
                               batch_size=1)[0] for line in lines]
  one_batch = tag_spans.tag_lines(model, variables, tokenizer, lines, max_length=32,
                                  batch_size=4)  # every line at the long line's width
  assert batched == alone == one_batch and batched[1] == []
  assert [tag_spans.batch_width(n, 128) for n in (1, 16, 17, 33, 100, 129)] == [
      16, 16, 32, 64, 128, 128]
  assert sum(map(len, batched)) > 0  # the random tagger finds some entities
  assert all(end <= len(line.split()) for line, found in zip(lines, batched)
             for _, end, _ in found)  # words past max_length pieces get none
  encoder, encoder_variables = load_pretrained(ner_folder, heads="none")
  with pytest.raises(ValueError, match="--model: a token classifier with the 9 CoNLL-2003 ner"):
    tag_spans.tag_lines(encoder, encoder_variables, tokenizer, lines)
  with pytest.raises(ValueError, match="--phrase_model: .* 23 CoNLL-2003 chunk tags .* with 9"):
    tag_spans.tag_lines(model, variables, tokenizer, lines, column="chunk")


def test_a_chunker_gives_phrases_and_merges_with_the_entities(ner_folder, chunk_folder):
  lines = ["the old man went to new york city .", "", "a b c d e f"]
  found = tag_spans.tag_file_lines(lines, {"ner": ner_folder, "chunk": chunk_folder},
                                   max_length=32)
  model, variables = load_pretrained(chunk_folder)
  phrases = tag_spans.tag_lines(model, variables, model_tokenizer(chunk_folder), lines,
                                max_length=32, column="chunk")
  assert sum(map(len, phrases)) > 0 and {k for line in phrases for *_, k in line} == {"phrase"}
  for line, merged, phrase_spans in zip(lines, found, phrases):
    assert merged == sorted(merged) and [s for s in merged if s[2] == "phrase"] == phrase_spans
    spans.parse_line(spans.format_line(merged), len(line.split()), "merged")  # a valid line


@pytest.mark.slow
def test_cli_writes_a_span_file_beside_the_corpus(ner_folder, chunk_folder, tmp_path):
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("harry potter went to new york .\nhe liked it .\n\nparis is big .\n")
  out = subprocess.run([sys.executable, "-m", "bert_jax.commands.tag_spans", f"--model={ner_folder}",
                        f"--phrase_model={chunk_folder}", f"--input={corpus}",
                        "--max_length=32", "--batch_size=2"],
                       capture_output=True, text=True, cwd=REPO)
  assert out.returncode == 0, out.stderr[-2000:]
  found = spans.read_span_file(str(corpus))  # one valid line per text line
  counts = {kind: sum(k == kind for line in found for *_, k in line)
            for kind in ("entity", "phrase")}
  assert f"Wrote {counts['entity']} entity spans and {counts['phrase']} phrase spans on 4 " \
      "lines" in out.stdout
  assert len(found) == 4 and found[2] == [] and min(counts.values()) > 0
