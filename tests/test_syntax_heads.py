"""The syntactic-heads probe: the treebank reader, the relations, the head and offset
scoring on attention maps whose answer is known, and the probe end to end on a tiny model."""
import zipfile

import jax
import numpy as np
import pytest

from bert_jax.models.bert import BertModel
from bert_jax.models.config import BertConfig
from bert_jax.probe import relations
from bert_jax.probe import syntax_heads
from bert_jax.text.dependency_treebank import DependencySentence
from bert_jax.text.dependency_treebank import TreebankFormatError
from bert_jax.text.dependency_treebank import parse_text
from bert_jax.text.dependency_treebank import read_treebank


def sentence(rows: str) -> DependencySentence:
  """A sentence from "word TAG head" rows, one per line."""
  return parse_text("\n".join("\t".join(r.split()) for r in rows.strip().splitlines()),
                    "hand-made")[0]


# "The old man has been eating apples in the park ." in this treebank's scheme: the subject
# hangs from the first auxiliary, each auxiliary governs the next verb, a preposition
# governs its object.
EATING = sentence("""
The DT 3
old JJ 3
man NN 4
has VBZ 0
been VBN 4
eating VBG 5
apples NNS 6
in IN 6
the DT 10
park NN 8
. . 4
""")
# "He said that John 's dog would eat cat food .": the complementizer governs its clause,
# "'s" governs the possessor and depends on the possessed noun.
SAID = sentence("""
He PRP 2
said VBD 0
that IN 2
John NNP 5
's POS 6
dog NN 7
would MD 3
eat VB 7
cat NN 10
food NN 8
. . 2
""")


# ------------------------------------------------------------------------------ reader
def test_reader_reads_the_real_sample(data_dir):
  sentences = read_treebank(data_dir=data_dir)
  assert len(sentences) == 3914
  assert sum(len(s.words) for s in sentences) == 94084
  files = {s.provenance.rsplit(":", 1)[0] for s in sentences}
  assert len(files) == 199
  first = sentences[0]
  assert first.words[:3] == ("Pierre", "Vinken", ",")
  assert first.tags[:3] == ("NNP", "NNP", ",")
  assert first.provenance.endswith("dependency_treebank/wsj_0001.dp:1")
  assert all(s.heads.count(0) == 1 for s in sentences)


@pytest.mark.parametrize("text, message", [
    ("The\tDT\t2\ndog\tNN\n", r"bad\.dp:2: expected 3 tab-separated columns"),
    ("The\tDT\tx\ndog\tNN\t0\n", r"bad\.dp:1: head 'x' is not an integer"),
    ("The\tDT\t3\ndog\tNN\t0\n", r"bad\.dp:1: head 3 of word 1 is outside"),
    ("The\tDT\t1\ndog\tNN\t0\n", r"bad\.dp:1: head 1 of word 1 is outside .* or the word"),
    ("The\tDT\t0\ndog\tNN\t0\n", r"bad\.dp:1 \(sentence starting here\): sentence has 2 roots"),
    ("a\tDT\t2\nb\tNN\t1\nc\tVB\t0\n", r"bad\.dp:1 .*: the heads of word 1 .* form a cycle"),
    ("\n\n", r"bad\.dp: no sentence"),
])
def test_malformed_rows_name_file_and_line(tmp_path, text, message):
  path = tmp_path / "bad.dp"
  path.write_text(text)
  with pytest.raises(TreebankFormatError, match=message) as error:
    read_treebank(str(path))
  assert "\n" not in str(error.value)


def test_zip_members_are_named_in_errors(tmp_path):
  path = tmp_path / "tb.zip"
  with zipfile.ZipFile(path, "w") as archive:
    archive.writestr("tb/a.dp", "The\tDT\t2\ndog\tNN\t0\n")
    archive.writestr("tb/b.dp", "The\tDT\t2\ndog\tNN\t0\n\nA\tDT\n")
  with pytest.raises(TreebankFormatError, match=r"tb\.zip:tb/b\.dp:4: expected 3"):
    read_treebank(str(path))


# --------------------------------------------------------------------------- relations
def named(rule, s):
  return [(s.words[d], s.words[g]) for d, g in relations.relation(rule)(s)]


def test_relations_of_a_hand_made_sentence():
  assert named("det", EATING) == [("The", "man"), ("the", "park")]
  assert named("amod", EATING) == [("old", "man")]
  assert named("nsubj", EATING) == [("man", "eating")]           # through has -> been
  assert named("aux", EATING) == [("has", "eating"), ("been", "eating")]
  assert named("dobj", EATING) == [("apples", "eating")]
  assert named("prep", EATING) == [("in", "eating")]
  assert named("pobj", EATING) == [("park", "in")]
  assert named("all", EATING) == [(w, EATING.words[h - 1]) for w, h, t in zip(
      EATING.words, EATING.heads, EATING.tags) if h and t != "."]
  assert named("nsubj", SAID) == [("He", "said"), ("dog", "eat")]
  assert named("aux", SAID) == [("would", "eat")]
  assert named("mark", SAID) == [("that", "eat")]                # inverted: that governs
  assert named("poss", SAID) == [("'s", "dog")]
  assert named("nn", SAID) == [("cat", "food")]
  assert named("dobj", SAID) == [("food", "eat")]
  assert named("prt", SAID) == []


def test_unknown_relation_is_named():
  with pytest.raises(ValueError, match="unknown relation 'iobj'; expected one of all, "):
    relations.relation("iobj")


# ----------------------------------------------------------------------------- scoring
def governor_maps(s: DependencySentence, spans, length: int) -> np.ndarray:
  """Token maps [L=2, N=3, T, T]: head (2, 3) puts each word's first piece on its
  governor's first piece (the root on [CLS]); head (1, 1) is the transpose (each governor
  on its dependents, un-normalised); every other head is uniform."""
  probs = np.full((2, 3, length, length), 1.0 / length)
  to_governor = np.zeros((length, length))
  to_governor[:, 0] = 1.0
  for d, (start, _) in enumerate(spans):
    g = s.governor(d)
    if g is not None:
      to_governor[start] = 0.0
      to_governor[start, spans[g][0]] = 1.0
  probs[1, 2] = to_governor
  probs[0, 0] = to_governor.T
  return probs


def test_a_head_on_the_governor_scores_100_percent():
  # "eating" in three pieces and "apples" in two: the first-piece alignment must find them.
  spans = [(1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 9), (9, 11), (11, 12), (12, 13),
           (13, 14), (14, 15)]
  tally = syntax_heads.Tally(2, 3)
  tally.add(EATING, syntax_heads.word_attention(governor_maps(EATING, spans, 16), spans))
  result = tally.summary()
  for name in ("all", "det", "dobj", "pobj", "prep", "amod"):
    accuracy = result[name]["accuracy"]
    assert accuracy["dep->gov"][1][2] == 1.0, name    # the governor head
    assert accuracy["gov->dep"][0][0] == 1.0, name    # its transpose, read column-wise
    assert accuracy["dep->gov"][0][0] < 1.0, name     # ... and not row-wise
    assert result[name]["best_head"]["accuracy"] == 1.0
  assert result["det"]["best_head"]["layer"] in (1, 2)
  # Re-oriented relations are not this treebank's arcs: "has" (the root) and "been" look
  # at their own governors, not at "eating"; "man" looks at "has", not "eating".
  assert result["aux"]["accuracy"]["dep->gov"][1][2] == 0.0
  assert result["nsubj"]["accuracy"]["dep->gov"][1][2] == 0.0


def test_offset_baseline_picks_the_best_offset():
  tally = syntax_heads.Tally(1, 1, ["det", "pobj", "all"])
  uniform = np.ones((1, 1, len(EATING.words), len(EATING.words)))
  tally.add(EATING, uniform)
  result = tally.summary()
  # det: The -> man is +2, the -> park +1: one each; the nearer offset wins the tie.
  assert result["det"]["best_offset"] == {"offset": 1, "accuracy": 0.5}
  assert result["pobj"]["best_offset"] == {"offset": -2, "accuracy": 1.0}
  # all: 9 arcs, 3 at +1 (old, man, the) and 3 at -1 (been, eating, apples).
  assert result["all"]["pairs"] == 9
  assert result["all"]["best_offset"]["offset"] in (-1, 1)
  assert result["all"]["best_offset"]["accuracy"] == pytest.approx(3 / 9, abs=1e-4)


def test_mean_alignment_sums_to_and_averages_from():
  probs = np.arange(16, dtype=float).reshape(1, 1, 4, 4)
  spans = [(1, 3), (3, 4)]  # word 0 = pieces 1-2, word 1 = piece 3
  words = syntax_heads.word_attention(probs, spans, "mean")[0, 0]
  # from word 0 (rows 1, 2 averaged) to word 1 (column 3): (7 + 11) / 2
  assert words[0, 1] == 9.0
  # from word 1 (row 3) to word 0 (columns 1 + 2): 13 + 14
  assert words[1, 0] == 27.0
  assert words[0, 0] == words[1, 1] == 0.0
  first = syntax_heads.word_attention(probs, spans, "first")[0, 0]
  assert first[0, 1] == 7.0 and first[1, 0] == 13.0
  with pytest.raises(ValueError, match="unknown alignment 'last'"):
    syntax_heads.word_attention(probs, spans, "last")


# ------------------------------------------------------------------- the probe, end to end
def test_probe_on_a_tiny_model(tokenizer, data_dir):
  config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16, num_hidden_layers=2,
                      num_attention_heads=2, intermediate_size=32,
                      max_position_embeddings=32)
  model = BertModel(config)
  variables = jax.jit(model.init)(jax.random.PRNGKey(0), np.zeros((1, 8), np.int32))
  sentences = read_treebank(data_dir=data_dir)[:16]
  result = syntax_heads.probe(model, variables, tokenizer, sentences, max_length=32,
                              batch_size=8)  # one compiled shape: [8, 32]
  lengths = [len(e.ids) for e in syntax_heads.encode(sentences, tokenizer, 10_000)[0]]
  assert result["left_out"] == sum(n > 32 for n in lengths) == 7
  assert result["sentences"] == 9
  det = result["relations"]["det"]
  assert det["pairs"] > 0
  assert np.array(det["accuracy"]["dep->gov"]).shape == (2, 2)
  assert 0.0 <= det["best_head"]["accuracy"] <= 1.0
  table = syntax_heads.format_table(result)
  assert "| det |" in table and "8-11 dep->gov, 94.3" in table
  with pytest.raises(ValueError, match="beyond the model's 32 positions"):
    syntax_heads.probe(model, variables, tokenizer, sentences, max_length=64)
