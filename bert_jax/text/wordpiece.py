"""BERT WordPiece tokenizer that runs in-graph and matches Hugging Face's ids.

`WordPieceTokenizer.tokenize` is a pure TensorFlow graph (tf.strings, RE2 regexes, ICU
normalisation and tensorflow_text's FastWordpieceTokenizer), so it can run inside
`tf.data.Dataset.map`. It reproduces `transformers.BertTokenizerFast` (the Rust
`tokenizers` pipeline: added tokens -> BertNormalizer -> BertPreTokenizer -> WordPiece)
id for id. The rules that pipeline applies, and how the graph reproduces each one:

1. Special tokens in raw text. `[PAD] [UNK] [CLS] [SEP] [MASK]` are "added tokens" with
   `normalized=False`: an exact, case-sensitive occurrence in the raw text becomes that
   token, even glued to other text (`"[UNK]x"` -> `[UNK] x`). The graph swaps each for
   a private-use sentinel (U+E000 + index) before normalising; the sentinel is its own
   word and maps to the token's id. (Private-use characters already in the text are
   removed by rule 2 anyway, so they are first rewritten to a non-sentinel one.)
2. clean_text. Drop U+0000, U+FFFD and every "other" character (general category
   Cc, Cf, Co, Cs) except TAB, LF and CR. Unassigned code points (Cn) are kept. Then
   every whitespace character becomes a space. Whitespace is Rust's
   `char::is_whitespace` (the Unicode White_Space property), not Python's `isspace`
   (which adds U+001C..U+001F) nor category Zs (which lacks U+2028/U+2029).
3. Chinese characters. Code points in the CJK blocks `_CJK_RANGES` become single-char
   words. Note the Rust table starts Extension E at U+2B920, not U+2B820 as the Python
   `BasicTokenizer` does, so U+2B820..U+2B91F are NOT split.
4. Only when lowercasing (uncased vocab, `strip_accents` left unset): NFD, then drop
   nonspacing marks (Mn), then lowercase. Accents are stripped BEFORE lowercasing (the
   slow Python tokenizer lowercases first). Lowercasing is Rust's per-character
   `char::to_lowercase`: the full Unicode lowercase mapping with no context, so a
   final capital sigma becomes 'σ', never 'ς'. It is not case folding: 'ß', 'ﬁ', 'µ'
   and fullwidth letters stay as they are (tensorflow_text's `case_fold_utf8` is
   NFKC_Casefold and would change all of them, so it is not used). ICU's `toLower`,
   behind `tf.strings.lower(encoding='utf-8')`, maps a final 'Σ' to 'ς', so the graph
   lowercases 'Σ' to 'σ' itself first.
5. Pre-tokenisation: split on whitespace (dropped) and isolate every punctuation
   character as its own word. Punctuation is ASCII punctuation (all of
   !"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~, so also symbols such as $ + < = > ^ ` |) plus
   Unicode categories Pc Pd Pe Pf Pi Po Ps. Other symbols (So, Sm, Sc, Sk outside
   ASCII, e.g. '©', '€') are not split off.
6. WordPiece: greedy longest-match-first with the '##' continuation prefix. A word
   with more than 100 characters (Unicode code points, not UTF-8 bytes as in
   tensorflow_text's `max_bytes_per_word`) or with no full segmentation becomes a
   single [UNK].

`encode_for_model` then adds `[CLS] a [SEP] (b [SEP])`, truncates with Hugging Face's
'longest_first' rule (`subword.truncated_pair_lengths`) and pads.

Unicode versions differ between the pieces: tokenizers' category tables are older than
TensorFlow's RE2/ICU, which are older than Rust's lowercase tables. `_UNKNOWN_TO_HF_RANGES`
reconciles the categories, so with `lower_case=False` every one of the 1,112,064 code
points is handled exactly as HF does. With `lower_case=True`, 116 code points still
differ, all letters added in Unicode 13-17 (Vithkuqi, Garay, Todhri, Tulu-Tigalari,
Kirat Rai, Gurung Khema, U+1C89, U+2C2F, U+A7C0-U+A7DC, ...): Rust lowercases them
and ICU does not, or ICU decomposes them and tokenizers' NFD does not. Every line of
the corpora in ../shared/data matches (bench/tokenizer_parity.py). Text is assumed to be
valid UTF-8.
"""
from __future__ import annotations

import functools
import json
import os
import re
from typing import Sequence

import tokenizers
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.startup.lazy import tensorflow_text as tf_text
from bert_jax.text.subword import (CLS, MASK, PAD, SEP, SPECIAL_TOKENS, UNK, SubwordTokenizer,
                                  read_vocab)


MAX_CHARS_PER_WORD = 100
CONTINUATION_PREFIX = "##"

# CJK blocks exactly as in tokenizers' BertNormalizer (`is_chinese_char`).
_CJK_RANGES = (
    (0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
    (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))
# Rust `char::is_whitespace` (White_Space), minus the Cc members that clean_text drops
# first (U+000B, U+000C, U+0085) and plus TAB/LF/CR, which it keeps.
_WHITESPACE_RANGES = (
    (0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680),
    (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
    (0x3000, 0x3000))
_ASCII_PUNCTUATION_RANGES = ((0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E))

# Unicode version drift. tokenizers classifies characters with tables from an older
# Unicode than TensorFlow's RE2 and ICU. To it, these code points (measured by sweeping
# every code point through both pipelines) are unassigned: neither punctuation, nor
# nonspacing marks, nor format characters. Letters, digits and symbols inside the
# ranges are unaffected, since the ranges are only subtracted from those classes.
_UNKNOWN_TO_HF_RANGES = (
    (0x61D, 0x61D), (0x7FD, 0x7FD), (0x890, 0x891), (0x898, 0x8E2), (0x9FD, 0x9FE),
    (0xA76, 0xA76), (0xAFA, 0xAFF), (0xB55, 0xB55), (0xC04, 0xC04), (0xC3C, 0xC3C),
    (0xC77, 0xC77), (0xC84, 0xC84), (0xD00, 0xD00), (0xD3B, 0xD3C), (0xD81, 0xD81),
    (0xEBA, 0xEBA), (0xECE, 0xECE), (0x180F, 0x180F), (0x1885, 0x1886),
    (0x1ABF, 0x1ACE), (0x1B7D, 0x1B7E), (0x1DF6, 0x1DFB), (0x2E43, 0x2E5D),
    (0xA82C, 0xA82C), (0xA8C5, 0xA8C5), (0xA8FF, 0xA8FF), (0xA9BD, 0xA9BD),
    (0x10D24, 0x10D27), (0x10EAB, 0x10EAD), (0x10EFD, 0x10EFF), (0x10F46, 0x10F59),
    (0x10F82, 0x10F89), (0x11070, 0x11074), (0x110C2, 0x110C2), (0x110CD, 0x110CD),
    (0x111C9, 0x111C9), (0x111CF, 0x111CF), (0x1123E, 0x1123E), (0x11241, 0x11241),
    (0x1133B, 0x1133B), (0x11438, 0x1145B), (0x1145D, 0x1145E), (0x11660, 0x1166C),
    (0x116B9, 0x116B9), (0x1182F, 0x1183B), (0x1193B, 0x11946), (0x119D4, 0x119D7),
    (0x119DA, 0x119E2), (0x11A01, 0x11A47), (0x11A51, 0x11AA2), (0x11B00, 0x11B09),
    (0x11C30, 0x11C36), (0x11C38, 0x11C45), (0x11C70, 0x11C71), (0x11C92, 0x11CA7),
    (0x11CAA, 0x11CB6), (0x11D31, 0x11D36), (0x11D3A, 0x11D3A), (0x11D3C, 0x11D3D),
    (0x11D3F, 0x11D47), (0x11D90, 0x11D91), (0x11D95, 0x11D97), (0x11EF3, 0x11EF8),
    (0x11F00, 0x11F01), (0x11F36, 0x11F3A), (0x11F40, 0x11F40), (0x11F42, 0x11F4F),
    (0x11FFF, 0x11FFF), (0x12FF1, 0x12FF2), (0x13430, 0x13440), (0x13447, 0x13455),
    (0x16E97, 0x16E9A), (0x16F4F, 0x16F4F), (0x16FE2, 0x16FE4), (0x1CF00, 0x1CF2D),
    (0x1CF30, 0x1CF46), (0x1E000, 0x1E006), (0x1E008, 0x1E018), (0x1E01B, 0x1E021),
    (0x1E023, 0x1E024), (0x1E026, 0x1E02A), (0x1E08F, 0x1E08F), (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE), (0x1E2EC, 0x1E2EF), (0x1E4EC, 0x1E4EF), (0x1E944, 0x1E94A),
    (0x1E95E, 0x1E95F))
# Characters whose category changed since then, kept with their old category:
# U+166D CANADIAN SYLLABICS CHI SIGN and U+111C9 SHARADA SANDHI MARK were Po (split
# off), U+1734 HANUNOO SIGN PAMUDPOD was Mn (stripped when lowercasing).
_OLD_PUNCTUATION_RANGES = ((0x166D, 0x166D), (0x111C9, 0x111C9))
_OLD_NONSPACING_MARK_RANGES = ((0x1734, 0x1734),)

# Private-use sentinels that stand in for the special tokens from rule 1 to rule 6.
SENTINEL_BASE = 0xE000
_NON_SENTINEL_PRIVATE_USE = 0xE000 + len(SPECIAL_TOKENS)


def _char_class(ranges: Sequence[tuple[int, int]], extra: str = "",
                negate: bool = False) -> str:
  """An RE2 character class `[...]` (or `[^...]`) for inclusive code point ranges."""
  parts = [f"\\x{{{lo:X}}}" if lo == hi else f"\\x{{{lo:X}}}-\\x{{{hi:X}}}"
           for lo, hi in ranges]
  return ("[^" if negate else "[") + "".join(parts) + extra + "]"


def _category_class(category: str, excluded: Sequence[tuple[int, int]]) -> str:
  """RE2 class of Unicode `category` minus the code points in `excluded`."""
  return _char_class(excluded, extra=f"\\P{{{category}}}", negate=True)


_SENTINEL_RANGES = ((SENTINEL_BASE, _NON_SENTINEL_PRIVATE_USE - 1),)
_SENTINELS = _char_class(_SENTINEL_RANGES)
# Rule 2: category C (Cc Cf Co Cs; RE2's \p{C} has no Cn) minus TAB/LF/CR/sentinels.
_REMOVED_CHARS = _category_class(
    "C", ((0x09, 0x0A), (0x0D, 0x0D)) + _SENTINEL_RANGES + _UNKNOWN_TO_HF_RANGES
) + r"|\x{FFFD}"
_NONSPACING_MARKS = (
    _category_class("Mn", _UNKNOWN_TO_HF_RANGES) + "|"
    + _char_class(_OLD_NONSPACING_MARK_RANGES))
_WHITESPACE = _char_class(_WHITESPACE_RANGES)
_CJK = _char_class(_CJK_RANGES)
_PUNCTUATION = (_char_class(_ASCII_PUNCTUATION_RANGES + _OLD_PUNCTUATION_RANGES) + "|"
                + _category_class("P", _UNKNOWN_TO_HF_RANGES))
_KEPT_DELIMITERS = "|".join((_PUNCTUATION, _CJK, _SENTINELS))
_ALL_DELIMITERS = "|".join((_WHITESPACE, _KEPT_DELIMITERS))


# ------------------------------------------------------------------------------------
# The in-graph normalisation steps (rules 1-5 of the module docstring).
# ------------------------------------------------------------------------------------
def _protect_special_tokens(texts: tf.Tensor) -> tf.Tensor:
  """Rule 1: replaces each literal special token by its private-use sentinel."""
  texts = tf.strings.regex_replace(texts, _SENTINELS, chr(_NON_SENTINEL_PRIVATE_USE))
  for index, token in enumerate(SPECIAL_TOKENS):
    texts = tf.strings.regex_replace(
        texts, re.escape(token), chr(SENTINEL_BASE + index))
  return texts


def _strip_accents_and_lowercase(texts: tf.Tensor) -> tf.Tensor:
  """Rule 4: NFD, drop Mn, then context-free lowercasing."""
  texts = tf_text.normalize_utf8(texts, "NFD")
  texts = tf.strings.regex_replace(texts, _NONSPACING_MARKS, "")
  texts = tf.strings.regex_replace(texts, "\u03a3", "\u03c3")  # No final-sigma rule.
  return tf.strings.lower(texts, encoding="utf-8")


def normalize_and_split(texts: tf.Tensor, lower_case: bool) -> tf.RaggedTensor:
  """Rules 1-5: strings [N] -> normalised words [N, (words)], specials as sentinels."""
  texts = _protect_special_tokens(texts)
  texts = tf.strings.regex_replace(texts, _REMOVED_CHARS, "")
  if lower_case:
    texts = _strip_accents_and_lowercase(texts)
  return tf_text.regex_split(texts, _ALL_DELIMITERS, _KEPT_DELIMITERS)


class WordPieceTokenizer(SubwordTokenizer):
  """BERT WordPiece tokenizer reading a `vocab.txt`; ids equal BertTokenizerFast's.

  Attributes:
    vocab: the tokens; a token's id is its index.
    vocab_size: len(vocab).
    pad_id, unk_id, cls_id, sep_id, mask_id: ids of the special tokens.
    lower_case: whether text is accent-stripped and lowercased (uncased vocab).
  """

  def __init__(self, vocab_path: str, lower_case: bool = True):
    self.vocab = read_vocab(vocab_path)
    self.lower_case = lower_case
    self._set_special_ids()
    # The graph emits a sentinel word for each special token (rule 1) and for
    # over-long words, so the WordPiece model sees the sentinels in their place.
    graph_vocab = list(self.vocab)
    for index, token in enumerate(SPECIAL_TOKENS):
      graph_vocab[graph_vocab.index(token)] = chr(SENTINEL_BASE + index)
    self._unk_sentinel = chr(SENTINEL_BASE + SPECIAL_TOKENS.index(UNK))
    self._graph_vocab = graph_vocab

  @functools.cached_property
  def _wordpiece(self):
    """The in-graph WordPiece model, built on first tokenization: reading the vocabulary
    (its ids, saving it, masking's tables) needs no TensorFlow. Made eagerly (init_scope)
    even when first read while tf.data traces a function, so every graph can use it."""
    with tf.init_scope():
      return tf_text.FastWordpieceTokenizer(
          vocab=self._graph_vocab, suffix_indicator=CONTINUATION_PREFIX,
          # Every word reaching the model has <= 100 chars, so <= 400 UTF-8 bytes.
          max_bytes_per_word=4 * MAX_CHARS_PER_WORD,
          token_out_type=tf.int32, unknown_token=self._unk_sentinel,
          no_pretokenization=True)

  @classmethod
  def from_pretrained_dir(cls, path: str) -> "WordPieceTokenizer":
    """Reads `vocab.txt` and, if present, `do_lower_case` from `tokenizer_config.json`."""
    lower_case = True
    config_path = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(config_path):
      with open(config_path, encoding="utf-8") as f:
        lower_case = bool(json.load(f).get("do_lower_case", True))
    return cls(os.path.join(path, "vocab.txt"), lower_case=lower_case)

  def save(self, folder: str) -> None:
    """Writes vocab.txt and tokenizer_config.json, as `from_pretrained_dir` reads them, and
    the same tokenizer as tokenizer.json (HF's fast BERT tokenizer, `fast_tokenizer`)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "vocab.txt"), "w", encoding="utf-8") as f:
      f.write("".join(token + "\n" for token in self.vocab))
    roles = {"unk_token": UNK, "sep_token": SEP, "pad_token": PAD, "cls_token": CLS,
             "mask_token": MASK}  # what a tokenizer.json reader needs to know besides
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
      json.dump({"do_lower_case": self.lower_case, "tokenizer_class": "BertTokenizer",
                 **roles}, f)
    self.save_tokenizer_json(folder)

  def fast_tokenizer(self) -> tokenizers.Tokenizer:
    """HF's fast BERT tokenizer of this vocabulary (as transformers builds BertTokenizerFast
    from a vocab.txt): BertNormalizer (lowercasing and accent stripping with lower_case),
    BertPreTokenizer, WordPiece with `##` and 100-character words, `[CLS] A [SEP] B [SEP]`."""
    fast = tokenizers.Tokenizer(models.WordPiece(
        {token: i for i, token in enumerate(self.vocab)}, unk_token=UNK,
        max_input_chars_per_word=MAX_CHARS_PER_WORD))
    fast.normalizer = normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None,
        lowercase=self.lower_case)
    fast.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    fast.post_processor = processors.BertProcessing((SEP, self.sep_id), (CLS, self.cls_id))
    fast.decoder = decoders.WordPiece(prefix=CONTINUATION_PREFIX)
    fast.add_special_tokens([tokenizers.AddedToken(token, normalized=False, special=True)
                             for token in SPECIAL_TOKENS])
    return fast

  @property
  def strips_accents(self) -> bool:
    return self.lower_case  # BERT's uncased normalisation strips accents too (rule 4).

  def span_text(self, ids: Sequence[int]) -> str:
    """Pieces joined by spaces, '##' continuations glued (a leading one dropped)."""
    return " ".join(self.decode(ids).replace(CONTINUATION_PREFIX, "").split())

  def normalized_words(self, words: Sequence[str]) -> list[list[str]]:
    """BERT's normalised words of each word (punctuation split off, lowercased)."""
    return [[w.decode("utf-8") for w in word]
            for word in self.split_words(list(words)).to_list()]

  def split_words(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """Normalised words [N, (words)] before WordPiece; over-long words -> sentinel."""
    words = normalize_and_split(texts, self.lower_case)
    too_long = tf.strings.length(words.flat_values, unit="UTF8_CHAR") > (
        MAX_CHARS_PER_WORD)
    return words.with_flat_values(
        tf.where(too_long, self._unk_sentinel, words.flat_values))

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor | tf.Tensor:
    """Strings [N] -> int32 ids [N, (pieces)]; a scalar string gives ids [pieces]."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank == 0:
      return self.tokenize(texts[tf.newaxis])[0]
    words = self.split_words(texts)
    pieces = self._wordpiece.tokenize(words.flat_values)
    return words.with_flat_values(pieces).merge_dims(1, 2)

  def decode(self, ids: Sequence[int]) -> str:
    """Joins the pieces with spaces, glues '##' continuations, drops [PAD]."""
    tokens = [self.vocab[int(i)] for i in ids if int(i) != self.pad_id]
    return " ".join(tokens).replace(" " + CONTINUATION_PREFIX, "")
