"""Named dependency relations, derived from the tags and heads of the treebank sample.

  pairs = RELATIONS["det"](sentence)   # [(dependent, governor), ...], 0-based word indices

The treebank (bert_jax/text/dependency_treebank.py) has unlabeled arcs from head rules;
Clark et al. (2019) probed BERT against Stanford Dependencies (de Marneffe et al. 2006),
whose labels and some of whose arc directions differ. Each relation here is a rule on
Penn Treebank tags, word positions and this treebank's arcs that yields (dependent,
governor) pairs oriented as the Stanford relation of the same name: where this treebank
points the other way (auxiliaries, complementizers), the rule inverts the arc; where the
Stanford governor is the main verb of a verb chain that this treebank hangs from its first
auxiliary (subjects), the rule follows the chain down. A word is the dependent of at most
one pair per relation. Each rule's docstring states it; the differences that remain
(copulas, coordination, the few temporal noun phrases after verbs) are in those docstrings.

An unknown relation name is a ValueError listing the known ones (`relation`).
"""
from collections.abc import Callable

from bert_jax.text.dependency_treebank import DependencySentence

Pair = tuple[int, int]  # (dependent, governor): 0-based word indices in the sentence

NOUN_TAGS = frozenset({"NN", "NNS", "NNP", "NNPS"})
NOMINAL_TAGS = NOUN_TAGS | {"PRP", "WP"}  # nouns and the pronouns that head noun phrases
VERB_TAGS = frozenset({"VB", "VBD", "VBG", "VBN", "VBP", "VBZ"})
FINITE_TAGS = frozenset({"VB", "VBD", "VBP", "VBZ", "MD"})
ADJECTIVE_TAGS = frozenset({"JJ", "JJR", "JJS"})
ADVERB_TAGS = frozenset({"RB", "RBR", "RBS"})
PUNCTUATION_TAGS = frozenset({",", ".", ":", "``", "''", "-LRB-", "-RRB-"})
BE_FORMS = frozenset({"be", "is", "are", "was", "were", "been", "being", "am", "'s", "'re",
                      "'m"})
AUXILIARY_VERBS = BE_FORMS | {"have", "has", "had", "having", "'ve", "'d", "do", "does",
                              "did"}


def _dependents(sentence: DependencySentence) -> list[list[int]]:
  """0-based dependents of each word, in sentence order."""
  children = [[] for _ in sentence.words]
  for i in range(len(sentence.words)):
    governor = sentence.governor(i)
    if governor is not None:
      children[governor].append(i)
  return children


def _is_auxiliary(sentence: DependencySentence, i: int) -> bool:
  """A modal, infinitival "to", or a form of be / have / do tagged as a verb."""
  tag = sentence.tags[i]
  return tag in ("MD", "TO") or (tag in VERB_TAGS
                                 and sentence.words[i].lower() in AUXILIARY_VERBS)


def _chained_verb(sentence: DependencySentence, children: list[list[int]], i: int) -> int | None:
  """The nearest verb to the right of auxiliary i that depends on it, else None."""
  if not _is_auxiliary(sentence, i):
    return None
  return next((j for j in children[i] if j > i and sentence.tags[j] in VERB_TAGS), None)


def _main_verb(sentence: DependencySentence, children: list[list[int]], i: int) -> int:
  """Word i, or, for an auxiliary, the verb at the end of the chain it governs
  ("has" in "has been made" -> "made")."""
  while (j := _chained_verb(sentence, children, i)) is not None:
    i = j
  return i


def _by_tags(dependent_tags, governor_tags, side: str = "") -> Callable:
  """A rule: every word tagged `dependent_tags` whose governor is tagged `governor_tags`
  (and lies to its "right" or "left" when `side` says so)."""
  def rule(sentence: DependencySentence) -> list[Pair]:
    pairs = []
    for d, tag in enumerate(sentence.tags):
      g = sentence.governor(d)
      if (tag in dependent_tags and g is not None and sentence.tags[g] in governor_tags
          and (side != "right" or g > d) and (side != "left" or g < d)):
        pairs.append((d, g))
    return pairs
  return rule


def det(sentence):
  """Determiner -> noun: DT or PDT whose governor is a noun (NN, NNS, NNP, NNPS)."""
  return _by_tags({"DT", "PDT"}, NOUN_TAGS)(sentence)


def amod(sentence):
  """Adjective -> noun: JJ, JJR or JJS whose governor is a noun."""
  return _by_tags(ADJECTIVE_TAGS, NOUN_TAGS)(sentence)


def nn(sentence):
  """Noun compound modifier -> noun: a noun whose governor is a noun to its right
  ("Rail" -> "Corp." in "Consolidated Rail Corp.")."""
  return _by_tags(NOUN_TAGS, NOUN_TAGS, side="right")(sentence)


def num(sentence):
  """Number -> noun: CD whose governor is a noun ("850" -> "railcars")."""
  return _by_tags({"CD"}, NOUN_TAGS)(sentence)


def poss(sentence):
  """Possessor -> possessed noun: PRP$ or WP$ whose governor is a noun ("its" ->
  "profit"); and a possessive "'s" (tag POS) whose governor is a noun ("'s" -> "visit" in
  "Richard Nixon 's first visit"). The "'s" stands for the possessor before it, as in
  Clark et al.'s scoring, which judges such a possessor by the attention of its "'s"
  (this treebank hangs "Nixon" from "'s" and "'s" from "visit")."""
  return _by_tags({"PRP$", "WP$", "POS"}, NOUN_TAGS)(sentence)


def nsubj(sentence):
  """Subject -> verb: a noun or pronoun (PRP, WP) whose governor is a verb or modal to
  its right, paired with the main verb of the chain that governor starts ("it" ->
  "spend" in "it would spend": this treebank hangs "it" from "would"). A copula's
  subject stays with the copula ("profit" -> "was" in "profit was higher"), where
  Stanford Dependencies pair it with the predicate."""
  children = _dependents(sentence)
  return [(d, _main_verb(sentence, children, g))
          for d, g in _by_tags(NOMINAL_TAGS, VERB_TAGS | {"MD"}, side="right")(sentence)]


def dobj(sentence):
  """Object -> verb: a noun or pronoun whose governor is a verb to its left, other than a
  form of "be" (whose noun is a predicate). This treebank has no labels: the few bare
  temporal noun phrases after a verb ("rose 5% yesterday") count too."""
  return [(d, g) for d, g in _by_tags(NOMINAL_TAGS, VERB_TAGS, side="left")(sentence)
          if sentence.words[g].lower() not in BE_FORMS]


def pobj(sentence):
  """Object of a preposition -> preposition: a noun, pronoun or number whose governor is
  IN or TO to its left (this treebank, like Stanford Dependencies, hangs the object from
  the preposition)."""
  return _by_tags(NOMINAL_TAGS | {"CD"}, {"IN", "TO"}, side="left")(sentence)


def prep(sentence):
  """Preposition -> what its phrase modifies: IN or TO that governs an object (a noun,
  pronoun or number to its right), paired with its own governor (a noun, verb, ...)."""
  children = _dependents(sentence)
  pairs = []
  for d, tag in enumerate(sentence.tags):
    g = sentence.governor(d)
    has_object = any(j > d and sentence.tags[j] in NOMINAL_TAGS | {"CD"} for j in children[d])
    if tag in ("IN", "TO") and has_object and g is not None:
      pairs.append((d, g))
  return pairs


def aux(sentence):
  """Auxiliary -> main verb: a modal, infinitival "to" or a form of be / have / do that
  governs a verb to its right here, paired with the verb at the end of that chain
  ("has" -> "made" and "been" -> "made" in "has been made"); this treebank points the
  other way (the auxiliary governs). Stanford's aux and auxpass together."""
  children = _dependents(sentence)
  return [(d, _main_verb(sentence, children, d)) for d in range(len(sentence.words))
          if _chained_verb(sentence, children, d) is not None]


def mark(sentence):
  """Complementizer -> verb of its clause: IN (that, because, if, ...) that governs a verb
  or modal to its right here (VB, VBD, VBP, VBZ, MD; a gerund after a preposition is
  Stanford's pcomp, not mark), paired with the main verb of that verb's chain; this treebank points
  the other way (the complementizer governs its clause)."""
  children = _dependents(sentence)
  pairs = []
  for d, tag in enumerate(sentence.tags):
    verbs = [j for j in children[d] if j > d and sentence.tags[j] in FINITE_TAGS]
    if tag == "IN" and verbs:
      pairs.append((d, _main_verb(sentence, children, verbs[0])))
  return pairs


def advmod(sentence):
  """Adverb -> verb: RB, RBR or RBS whose governor is a verb or modal."""
  return _by_tags(ADVERB_TAGS, VERB_TAGS | {"MD"})(sentence)


def prt(sentence):
  """Verb particle -> verb: RP whose governor is a verb ("up" -> "set")."""
  return _by_tags({"RP"}, VERB_TAGS)(sentence)


def every_arc(sentence):
  """Every arc of this treebank as it is (not re-oriented), punctuation and the root
  left out: Clark et al.'s "all" row, on this scheme's arcs."""
  return [(d, sentence.governor(d)) for d, tag in enumerate(sentence.tags)
          if sentence.governor(d) is not None and tag not in PUNCTUATION_TAGS]


# Name -> rule; the names are the Stanford Dependencies relations the rules stand for.
RELATIONS: dict[str, Callable[[DependencySentence], list[Pair]]] = {
    "all": every_arc,
    "prep": prep,
    "pobj": pobj,
    "det": det,
    "nn": nn,
    "nsubj": nsubj,
    "amod": amod,
    "dobj": dobj,
    "advmod": advmod,
    "aux": aux,
    "num": num,
    "poss": poss,
    "mark": mark,
    "prt": prt,
}


def relation(name: str) -> Callable[[DependencySentence], list[Pair]]:
  """The rule called `name`; ValueError naming the known ones otherwise."""
  if name not in RELATIONS:
    raise ValueError(f"unknown relation {name!r}; expected one of {', '.join(RELATIONS)}")
  return RELATIONS[name]
