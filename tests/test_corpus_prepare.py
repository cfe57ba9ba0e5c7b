"""prepare.py (raw sources -> plain format) and corpus.py (plain / tfds -> TokenizedCorpus)."""
import collections
import os
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import tensorflow as tf

from bert_jax.pretrain import pipeline
from bert_jax.text import corpus
from bert_jax.text import prepare
from bert_jax.text import sentences as sentence_rule
from bert_jax.text.wordpiece import WordPieceTokenizer


@pytest.fixture(scope="module")
def tokenizer(vocab_path):
  return WordPieceTokenizer(vocab_path)


def write(path, text, mode="w"):
  with open(path, mode) as f:
    f.write(text)
  return str(path)


# ------------------------------------------------------------------ sentence rule
@pytest.mark.parametrize("paragraph, sentences", [
    ("One here. Two there! Three?", ["One here.", "Two there!", "Three?"]),
    ("Mr. Smith met Dr. Who. Then W. N. Francis left.",
     ["Mr. Smith met Dr. Who.", "Then W. N. Francis left."]),
    ("e.g. this stays. lower case after a period stays.",
     ["e.g. this stays. lower case after a period stays."]),
    ('He said "Go!" Then wrapped\nlines   join.', ['He said "Go!"', "Then wrapped lines join."]),
    ("(An aside.) 1999 was next.", ["(An aside.)", "1999 was next."]),
    ("   ", []),
])
def test_split_sentences(paragraph, sentences):
  assert sentence_rule.split_sentences(paragraph) == sentences


def test_in_graph_split_matches_python_rule():
  text = ("Mr. Smith met Dr. Who. Then W. N. Francis left! lower stays. \"Quoted.\" Next one?"
          "\nA second paragraph.  With   spaces. (Bracket.) Done")
  expected = [s for line in text.split("\n") for s in sentence_rule.split_sentences(line)]
  got = [s.decode() for s in corpus.tfds_text_to_sentences(tf.constant(text)).numpy()]
  assert got == expected


# ------------------------------------------------------------------ prepare
def make_zip(path, members: dict[str, bytes]):
  with zipfile.ZipFile(path, "w") as archive:
    for name, data in members.items():
      archive.writestr(name, data)
  return str(path)


def read_documents(path):
  with open(path, encoding="utf-8") as f:
    return [block.split("\n") for block in f.read().strip("\n").split("\n\n")]


def read_lines(path):
  return [line for document in read_documents(path) for line in document]


def test_prepare_zip_of_documents(tmp_path):
  source = make_zip(tmp_path / "books.zip", {
      "books/README": b"About these books.",
      "books/a.txt": (b"Title line\n\nFirst sentence of a\nwrapped paragraph. Second one."
                      b"\n\n\nNew par."),
      "books/b.txt": b"Only. Two.",
      "books/empty.txt": b"\n \n",
  })
  output = str(tmp_path / "out" / "corpus.txt")
  counts, = prepare.prepare([source], output)
  assert read_documents(output) == [
      ["Title line", "First sentence of a wrapped paragraph.", "Second one.", "New par."],
      ["Only.", "Two."]]
  assert (counts.documents, counts.sentences) == (2, 6)
  assert (counts.skipped_members, counts.skipped_empty_documents) == (1, 1)


def test_prepare_brown_strips_tags_and_movie_reviews_keep_lines(tmp_path):
  brown = make_zip(tmp_path / "brown.zip", {
      "brown/ca01": b"\n\n\tThe/at jury/nn said/vbd ``/`` yes/rb ''/'' ./.\nIt/pps left/vbd ./.\n",
      "brown/cats.txt": b"ca01 news\n"})
  reviews = make_zip(tmp_path / "movie_reviews.zip", {
      "movie_reviews/pos/cv1.txt": b"a lowercased sentence . \nanother one . \n"})
  output = str(tmp_path / "corpus.txt")
  prepare.prepare([brown, reviews], output)
  assert read_documents(output) == [
      ['The jury said " yes " .', "It left ."],
      ["a lowercased sentence .", "another one ."]]


def test_prepare_wikitext_articles(tmp_path):
  source = write(tmp_path / "wiki.txt", (
      " \n = Lobster = \n \n Homarus is big . It weighs 1 @,@ 000 g or 0 @.@ 5 kg . \n"
      " \n = = Description = = \n \n A <unk> claw @-@ like part . \n"
      " = Second Article = \n Text here . \n"))
  output = str(tmp_path / "corpus.txt")
  counts, = prepare.prepare([source + ":wikitext"], output)
  assert read_documents(output) == [
      ["Homarus is big .", "It weighs 1,000 g or 0.5 kg .", "A claw-like part ."],
      ["Text here ."]]
  assert counts.documents == 2


# 4 invalid bytes on 2 lines, between lines of valid non-ASCII UTF-8.
MIXED_UTF8 = ("Dash \u2013 here. Caf\u00e9 too.\n".encode() + b"Bad \xff byte and \xfe more.\n"
              + "\u65e5\u672c is fine.\n\n".encode() + b"Next \x80 doc \xe8 end.\n"
              + "Last \u00e9 line.\n".encode())
VALID_LINES = ["Dash \u2013 here. Caf\u00e9 too.", "\u65e5\u672c is fine.", "Last \u00e9 line."]


@pytest.fixture(params=["plain", "zip member"])
def mixed_utf8_source(request, tmp_path):
  """(source spec, the name invalid lines are counted under) for MIXED_UTF8.

  Both formats keep lines as sentences (zip_lines: one document per member).
  """
  if request.param == "plain":
    path = write(tmp_path / "mixed.txt", MIXED_UTF8, "wb")
    return path, path
  path = make_zip(tmp_path / "movie_reviews_mixed.zip", {"r/mixed.txt": MIXED_UTF8})
  return path, f"{path}!r/mixed.txt"


def test_prepare_replaces_invalid_utf8_per_line(tmp_path, mixed_utf8_source):
  source, where = mixed_utf8_source
  output = str(tmp_path / "corpus.txt")
  counts, = prepare.prepare([source], output)  # default: replace
  first, second, third, fourth, fifth = read_lines(output)
  assert [first, third, fifth] == VALID_LINES  # decoded exactly as UTF-8
  assert (second, fourth) == ("Bad \ufffd byte and \ufffd more.", "Next \ufffd doc \ufffd end.")
  assert counts.invalid_utf8_lines == {where: 2}
  shown = "r/mixed.txt" if source != where else source  # a zip member under its zip's line
  assert counts.summary().endswith(f"; 2 lines with invalid UTF-8 (bytes replaced) in {shown} (2)")


def test_prepare_skips_or_stops_at_invalid_utf8_lines(tmp_path, mixed_utf8_source):
  source, where = mixed_utf8_source
  output = str(tmp_path / "corpus.txt")
  counts, = prepare.prepare([source], output, invalid_utf8="skip")
  assert read_lines(output) == VALID_LINES
  assert "2 lines with invalid UTF-8 (lines skipped)" in counts.summary()
  with pytest.raises(prepare.PrepareError, match=f"{where}:2: invalid UTF-8 at byte 4"):
    prepare.prepare([source], output, invalid_utf8="error")


def test_prepare_directory_source_is_a_clear_error(tmp_path):
  (tmp_path / "texts").mkdir()
  write(tmp_path / "texts" / "b.txt", "B.\n")
  write(tmp_path / "texts" / "a.txt", "A.\n")
  with pytest.raises(prepare.PrepareError,
                     match=r"source 'texts' is a directory .*one --source each "
                           r"\(e.g. --source=texts/a.txt\)"):
    prepare.prepare(["texts"], str(tmp_path / "out.txt"), data_dir=str(tmp_path))


def test_prepare_errors_name_the_source(tmp_path):
  with pytest.raises(prepare.PrepareError, match="missing.zip"):
    prepare.prepare([str(tmp_path / "missing.zip")], str(tmp_path / "out.txt"))
  empty = make_zip(tmp_path / "empty.zip", {"e/README": b"nothing"})
  with pytest.raises(prepare.PrepareError, match="no text found.*empty.zip"):
    prepare.prepare([empty], str(tmp_path / "out.txt"))
  assert not os.path.exists(tmp_path / "out.txt")


def test_prepare_cli(tmp_path):
  source = write(tmp_path / "plain.txt", "A one. A two.\n\nB one.\nB two.\n")
  output = tmp_path / "corpus.txt"
  result = subprocess.run(
      [sys.executable, "-m", "bert_jax.text.prepare", f"--source={source}",
       f"--output={output}"], capture_output=True, text=True, check=True)
  assert "wrote 2 documents, 3 sentences" in result.stdout
  assert read_documents(output) == [["A one. A two."], ["B one.", "B two."]]


def test_prepare_cli_shard_with_workers(tmp_path):
  source = write(tmp_path / "plain.txt", "A one.\n\nB one.\nB two.\n\nC one.\n")
  output = tmp_path / "corpus.txt"
  result = subprocess.run(
      [sys.executable, "-m", "bert_jax.text.prepare", f"--source={source}",
       f"--output={output}", "--num_shards=2", "--shard_index=1", "--workers=2"],
      capture_output=True, text=True, check=True)
  shard = tmp_path / "corpus-00001-of-00002.txt"
  assert f"wrote 1 documents, 2 sentences to {shard}" in result.stdout
  assert read_documents(shard) == [["B one.", "B two."]]
  assert not output.exists()


# ------------------------------------------------------------------ pod scale
def document_counts(path):
  with open(path, encoding="utf-8") as f:
    return collections.Counter(f.read().strip("\n").split("\n\n"))


def test_shards_together_hold_the_documents_of_one_run(data_dir, tmp_path):
  """Raw document n goes to shard n % N: the union of the shards is the 1-shard output."""
  empty_block = write(tmp_path / "blocks.txt", "A.\n\n \t\n\nB.\nB2.\n\nC.\n\nD.\n")
  sources = ["nltk_corpora/inaugural.zip", "wikitext-2/valid.txt", empty_block]
  whole = prepare.prepare(sources, str(tmp_path / "one.txt"), data_dir)
  shards = [prepare.prepare(sources, str(tmp_path / "s.txt"), data_dir, num_shards=3,
                            shard_index=i) for i in range(3)]
  files = corpus.expand_file_patterns(["s-*-of-00003.txt"], str(tmp_path))
  assert [os.path.basename(f) for f in files] == [f"s-0000{i}-of-00003.txt" for i in range(3)]
  union = sum((document_counts(f) for f in files), collections.Counter())
  assert union == document_counts(tmp_path / "one.txt")
  assert sum(union.values()) == 59 + 60 + 4 and set(union.values()) == {1}  # each once
  for field in ("documents", "sentences", "skipped_members", "skipped_empty_documents"):
    assert [sum(getattr(shard[s], field) for shard in shards) for s in range(3)] == [
        getattr(counts, field) for counts in whole], field
  assert [sum(sum(shard[0].invalid_utf8_lines.values()) for shard in shards)] == [
      sum(whole[0].invalid_utf8_lines.values())]
  # Within a shard, documents keep the 1-shard order.
  with open(tmp_path / "one.txt", encoding="utf-8") as f:
    ordered = f.read().strip("\n").split("\n\n")
  with open(files[1], encoding="utf-8") as f:
    assert f.read().strip("\n").split("\n\n") == [
        d for d in ordered if d in document_counts(files[1])]


def test_workers_write_the_same_bytes(data_dir, tmp_path, monkeypatch):
  monkeypatch.setattr(prepare, "_CHUNK_CHARS", 1 << 16)  # many tasks in flight
  sources = ["wikitext-2/valid.txt", "nltk_corpora/state_union.zip"]
  one = prepare.prepare(sources, str(tmp_path / "k1.txt"), data_dir, workers=1)
  two = prepare.prepare(sources, str(tmp_path / "k2.txt"), data_dir, workers=2)
  assert (tmp_path / "k1.txt").read_bytes() == (tmp_path / "k2.txt").read_bytes()
  assert [c.summary() for c in one] == [c.summary() for c in two]
  assert one[0].documents == 60 and one[1].documents == 65


def test_workers_import_neither_jax_nor_tensorflow():
  """A spawned worker imports bert_jax.text.prepare; that takes a fraction of a second."""
  code = ("import sys, bert_jax.text.prepare\n"
          "print(sorted(m for m in ('jax', 'flax', 'tensorflow') if m in sys.modules))")
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
  assert result.stdout.strip() == "[]"


WIKIPEDIA = ["Mr. Smith went home. He slept.\nNext paragraph here.", "Alone.",
             "Third doc. Its second sentence.", "\n \n", "Fifth. Last one!"]


@pytest.fixture
def mock_wikipedia():
  """tfds's `wikipedia` builder with WIKIPEDIA as its examples (no download, no files)."""
  import tensorflow_datasets as tfds

  def as_dataset_fn(self, split, shuffle_files=False, **kwargs):
    del self, split, shuffle_files, kwargs
    return tf.data.Dataset.from_tensor_slices(
        {"text": WIKIPEDIA, "title": [f"t{i}" for i in range(len(WIKIPEDIA))]})
  with tfds.testing.mock_data(as_dataset_fn=as_dataset_fn):
    yield


def test_prepare_reads_a_tfds_wikipedia(tmp_path, mock_wikipedia):
  source = "tfds:wikipedia/20230601.en"
  output = str(tmp_path / "wiki.txt")
  counts, = prepare.prepare([source], output, workers=2)
  assert read_documents(output) == [
      ["Mr. Smith went home.", "He slept.", "Next paragraph here."], ["Alone."],
      ["Third doc.", "Its second sentence."], ["Fifth.", "Last one!"]]
  assert counts.summary() == ("tfds:wikipedia/20230601.en:train: 4 documents, 8 sentences, "
                              "skipped 0 documentation members and 1 empty documents")
  # The in-graph reader of corpus.py cuts the same sentences.
  in_graph = [[s.decode() for s in corpus.tfds_text_to_sentences(tf.constant(text)).numpy()]
              for text in WIKIPEDIA]
  assert [d for d in in_graph if d] == read_documents(output)
  shards = [prepare.prepare([source], output, num_shards=2, shard_index=i)[0].documents
            for i in range(2)]
  assert shards == [3, 1]  # examples 0, 2, 4 and 1, 3 (the empty one)
  assert read_documents(str(tmp_path / "wiki-00001-of-00002.txt")) == [["Alone."]]


def test_tfds_source_errors_are_one_line(tmp_path):
  with pytest.raises(prepare.PrepareError, match=r"^source 'tfds:' names no tfds dataset"):
    prepare.prepare(["tfds:"], str(tmp_path / "out.txt"))
  with pytest.raises(prepare.PrepareError,
                     match=r"^tfds:no_such_dataset_here:train: tfds cannot read it \(\w+"):
    prepare.prepare(["tfds:no_such_dataset_here"], str(tmp_path / "out.txt"))


@pytest.mark.parametrize("options, message", [
    (dict(num_shards=0), "num_shards must be at least 1, not 0"),
    (dict(num_shards=4, shard_index=4), "shard_index must be in 0..3 for num_shards=4, not 4"),
    (dict(shard_index=-1), "shard_index must be in 0..0 for num_shards=1, not -1"),
    (dict(workers=0), "workers must be at least 1, not 0"),
])
def test_shard_and_worker_options_are_checked(tmp_path, options, message):
  source = write(tmp_path / "plain.txt", "A.\n")
  with pytest.raises(prepare.PrepareError, match=f"^{message}$"):
    prepare.prepare([source], str(tmp_path / "out.txt"), **options)


def test_a_shard_without_documents_is_an_error(tmp_path):
  source = write(tmp_path / "plain.txt", "A.\n\nB.\n")
  with pytest.raises(prepare.PrepareError, match=r"no text found in .*plain.txt'\] for "
                                                  r"shard 2 of 3"):
    prepare.prepare([source], str(tmp_path / "out.txt"), num_shards=3, shard_index=2)
  assert os.listdir(tmp_path) == ["plain.txt"]


# ------------------------------------------------------------------ corpus
def test_read_files_layout(tmp_path, tokenizer):
  first = write(tmp_path / "a.txt", "Hello world.\nSecond line here.\n\n\n\nNext doc.\nMore.\n")
  second = write(tmp_path / "b.txt", "Other file.\n  \t\nLast doc.\n\u200b\nEnd [SEP] here.")
  result = corpus.read_files(
      corpus.expand_file_patterns(["*.txt"], str(tmp_path)), tokenizer)
  assert result.num_documents == 4 and result.num_sentences == 7
  assert result.skipped_lines == 1  # the zero-width-space line has no WordPiece
  texts = [[tokenizer.decode(s.tolist()) for s in result.document_sentences(d)]
           for d in range(result.num_documents)]
  assert texts == [["hello world .", "second line here ."], ["next doc .", "more ."],
                   ["other file ."], ["last doc .", "end here ."]]  # literal [SEP] dropped
  assert result.sources == (first, second)
  subset = result.select_documents([3, 0])
  assert [len(subset.document_sentences(d)) for d in range(2)] == [2, 2]
  np.testing.assert_array_equal(subset.document_sentences(0)[0], result.document_sentences(3)[0])


def test_corpus_save_load_roundtrip(tmp_path, tokenizer):
  path = write(tmp_path / "a.txt", "One.\nTwo.\n\nThree.\n")
  original = corpus.read_files([path], tokenizer)
  original.save(str(tmp_path / "c.npz"))
  loaded = corpus.TokenizedCorpus.load(str(tmp_path / "c.npz"))
  for field in ("token_ids", "sentence_starts", "document_starts"):
    np.testing.assert_array_equal(getattr(loaded, field), getattr(original, field))
  assert loaded.sources == original.sources


def test_read_tfds_through_the_same_path(tokenizer):
  import tensorflow_datasets as tfds
  texts = ["Mr. Smith went home. He slept.\nNext paragraph here.", "Second doc. Also two."]

  def as_dataset_fn(self, split, shuffle_files=False, **kwargs):
    del self, split, shuffle_files, kwargs
    return tf.data.Dataset.from_tensor_slices({"text": texts, "title": ["a", "b"]})
  with tfds.testing.mock_data(as_dataset_fn=as_dataset_fn):
    result = corpus.read_tfds("wikipedia/20230601.en", "train", "text", tokenizer)
  assert result.num_documents == 2 and result.num_sentences == 5
  assert tokenizer.decode(result.document_sentences(0)[0].tolist()) == "mr . smith went home ."
  assert result.sources == ("tfds wikipedia/20230601.en/train",)


def test_invalid_utf8_names_file_and_line(tmp_path, tokenizer):
  path = write(tmp_path / "bad.txt", b"Fine line.\nAlso fine.\n\nBroken \xe8 here.\n", "wb")
  with pytest.raises(corpus.CorpusError, match=r"bad\.txt:4: invalid UTF-8"):
    corpus.read_files([path], tokenizer)


@pytest.mark.parametrize("text, message", [
    ("", "empty corpus: no line in .*empty.txt"),
    ("\n\n  \n", "empty corpus: no sentence in .*empty.txt"),
    ("One.\nTwo.\nThree.\n", "single document"),
    ("One.\n\nTwo.\n\nThree.\n", "has a single sentence"),
])
def test_unusable_corpora_are_clear_errors(tmp_path, tokenizer, text, message):
  path = write(tmp_path / "empty.txt", text)
  with pytest.raises(corpus.CorpusError, match=message):
    corpus.read_files([path], tokenizer).check_usable_for_nsp()


def test_directory_in_train_files_names_the_field(tmp_path, vocab_path, tokenizer):
  (tmp_path / "texts").mkdir()
  good = write(tmp_path / "texts" / "a.txt", "One here.\nTwo here.\n\nThree.\nFour.\n")
  config = pipeline.default_data_config()
  config.update(dict(train_files=(str(tmp_path / "texts"),), vocab_path=vocab_path))
  directory = str(tmp_path / "texts")
  with pytest.raises(corpus.CorpusError) as error:
    pipeline.load_corpora(config, tokenizer)
  assert str(error.value) == (f"config.data.train_files: {directory} is a directory; give "
                              f"files or a glob such as {directory}/*.txt")
  config.update(dict(train_files=(good,), eval_files=(str(tmp_path / "*"),)))
  with pytest.raises(corpus.CorpusError, match=f"config.data.eval_files: {directory} is a dir"):
    pipeline.load_corpora(config, tokenizer)


def test_pattern_without_files_is_an_error(tmp_path):
  with pytest.raises(corpus.CorpusError, match=r"'nothing/\*.txt'.*matches no file"):
    corpus.expand_file_patterns(["nothing/*.txt"], str(tmp_path))


def test_prepare_real_wikitext(data_dir, tmp_path, tokenizer):
  """Bounded real-corpus check: WikiText-2 valid becomes its 60 articles."""
  output = str(tmp_path / "wiki.txt")
  counts, = prepare.prepare(["wikitext-2/valid.txt"], output, data_dir)
  assert counts.documents == 60 and counts.sentences > 7000
  result = corpus.read_files([output], tokenizer)
  result.check_usable_for_nsp()
  assert result.num_documents == 60 and result.num_tokens > 200_000
