r"""SentencePiece vocabularies for ALBERT: training, and a tf.data tokenizer with HF's ids.

  model = train_sentencepiece(["runs/corpus/pretrain.txt"], "runs/vocab/spm-8k/spiece",
                              vocab_size=8192)
  # or: python -m bert_jax.text.learn_vocab --kind=sentencepiece --input=... --output=FOLDER
  tok = SentencePieceTokenizer.from_pretrained_dir("runs/vocab/spm-8k")  # spiece.model
  batch = tok.encode_for_model(["a sentence"], ["its pair"], max_length=128)
  ids = tok.tokenize(tf.constant(["in tf.data"]))                        # tf.RaggedTensor

`train_sentencepiece` trains a model with ALBERT's special-piece layout: `<pad>`=0,
`<unk>`=1, then the control symbols `[CLS]`=2, `[SEP]`=3, `[MASK]`=4, and no BOS/EOS.

`SentencePieceTokenizer` gives the ids of `transformers.AlbertTokenizer(Fast)` loaded from
the same folder (spiece.model + tokenizer_config.json): ALBERT's own preprocessing
(google-research/albert `preprocess_text`) in front of the `sentencepiece` model.
1. Special tokens in raw text. `<pad> <unk> [CLS] [SEP] [MASK]` written literally (exact
   and case-sensitive, even inside a word) become their ids, as HF's added tokens do
   (WikiText's `<unk>` is the common case); the text between them is tokenized piece by
   piece, each as if it were a whole text.
2. ALBERT's normalisation, by the `tokenizers` normalisers HF's AlbertTokenizer uses:
   "``" and "''" become '"'; unless `keep_accents`, NFKD and every combining mark
   dropped; when `lower_case`, context-free lowercasing (no final-sigma rule).
3. The `sentencepiece` library's `encode` on each piece of text: the model's own
   normaliser (its precompiled charsmap, e.g. nmt_nfkc or nmt_nfkc_cf), splitting at
   spaces, a '▁' prefix on each word, and the unigram Viterbi.
`tokenize` runs these in front of the graph, in a `tf.numpy_function`
(`subword.python_tokenize`): it works inside `tf.data.Dataset.map` but cannot be
serialised into a SavedModel. tensorflow_text's in-graph `SentencepieceTokenizer` is not
used: it bundles an older sentencepiece whose Viterbi breaks exact score ties differently
(the pieces of '$7,000,000,000' after '7' are ', 000 , 00 0,000' by the library and HF, but
', 00 0,000 , 000' by the op, the same score; 2 of 27,221 lines with a 2,000-piece model).
`encode_for_model` builds ALBERT's `[CLS] a [SEP] b [SEP]` with token types 0/1 and
HF's longest-first truncation.

bench/tokenizer_parity.py --kind=sentencepiece checks the ids on every line of
../shared/data against the `sentencepiece` library (on the text after rule 1 and the quote
rule) and against HF's AlbertTokenizer (on the raw text). Where HF's own Unigram pipeline
differs from the library, ours follows the library: HF's Viterbi breaks exact score ties
the other way (the same pieces in another order: 'hmmm' is '▁h mm m' to the library,
'▁h m mm' to HF; 14 of 574,956 lines with an 8k model), HF also splits words at U+0085,
and its Precompiled normaliser drops a combining mark that ends the text ('A\u0300').
Not reproduced: google-research/albert's old Python `encode_pieces` rule that re-splits a
piece ending in digit + ',' (HF's tokenizer does not apply it either).

Models from `train_sentencepiece(lower_case=True)` fold case inside the model (nmt_nfkc_cf),
so they want `lower_case=False` (and `keep_accents=True`); `save` writes these settings into
tokenizer_config.json. ALBERT's released models want HF's defaults, `lower_case=True,
keep_accents=False`, which `from_pretrained_dir` uses where a folder does not say.
"""
from __future__ import annotations

import json
import os
import re
from typing import Sequence

import sentencepiece as spm
from tokenizers import normalizers

from bert_jax.startup.lazy import tensorflow as tf
from bert_jax.text import subword

PAD_PIECE, UNK_PIECE = "<pad>", "<unk>"
CONTROL_SYMBOLS = (subword.CLS, subword.SEP, subword.MASK)
SPECIAL_PIECES = (PAD_PIECE, UNK_PIECE) + CONTROL_SYMBOLS
MODEL_FILE = "spiece.model"


def train_sentencepiece(input_files: Sequence[str], model_prefix: str,
                        vocab_size: int, model_type: str = "unigram",
                        lower_case: bool = True,
                        character_coverage: float = 0.99995,
                        input_sentence_size: int = 10_000_000,
                        num_threads: int | None = None,
                        **extra_options) -> str:
  """Trains a SentencePiece model on plain-text files (one sentence per line).

  Args:
    input_files: text files to learn from.
    model_prefix: writes `<model_prefix>.model` and `<model_prefix>.vocab`.
    vocab_size: number of pieces, special pieces included.
    model_type: 'unigram' (ALBERT's choice), 'bpe', 'char' or 'word'.
    lower_case: fold case inside the model (normaliser 'nmt_nfkc_cf'), so the same
      folding applies when tokenizing; otherwise plain 'nmt_nfkc'.
    character_coverage: fraction of characters covered by the vocabulary.
    input_sentence_size: at most this many (shuffled) input lines are used.
    num_threads: trainer threads; defaults to the CPU count.
    **extra_options: any other `spm.SentencePieceTrainer` option, for example
      `user_defined_symbols` or `hard_vocab_limit=False` for tiny corpora.

  Returns:
    The path of the trained `.model` file.
  """
  missing = [path for path in input_files if not os.path.isfile(path)]
  if missing:
    raise FileNotFoundError(f"SentencePiece input file(s) not found: {missing}")
  if os.path.dirname(model_prefix):
    os.makedirs(os.path.dirname(model_prefix), exist_ok=True)
  spm.SentencePieceTrainer.train(
      input=list(input_files), model_prefix=model_prefix, vocab_size=vocab_size,
      model_type=model_type, character_coverage=character_coverage,
      normalization_rule_name="nmt_nfkc_cf" if lower_case else "nmt_nfkc",
      pad_id=0, unk_id=1, bos_id=-1, eos_id=-1, pad_piece=PAD_PIECE,
      unk_piece=UNK_PIECE, control_symbols=list(CONTROL_SYMBOLS),
      input_sentence_size=input_sentence_size, shuffle_input_sentence=True,
      num_threads=num_threads or os.cpu_count() or 1, minloglevel=2,
      **extra_options)
  return model_prefix + ".model"


def albert_normalizer(lower_case: bool, keep_accents: bool) -> normalizers.Normalizer:
  """ALBERT's text normalisation before the model, as HF's AlbertTokenizer applies it."""
  steps = [normalizers.Replace("``", '"'), normalizers.Replace("''", '"')]
  if not keep_accents:
    steps += [normalizers.NFKD(), normalizers.StripAccents()]
  if lower_case:
    steps.append(normalizers.Lowercase())
  return normalizers.Sequence(steps)


def find_model_file(folder: str) -> str:
  """The SentencePiece model of a folder: spiece.model, else its only `*.model` file."""
  if os.path.isfile(os.path.join(folder, MODEL_FILE)):
    return os.path.join(folder, MODEL_FILE)
  models = sorted(name for name in os.listdir(folder) if name.endswith(".model"))
  if len(models) != 1:
    raise FileNotFoundError(f"no {MODEL_FILE} in {folder}, and {len(models)} other "
                            f"*.model files ({', '.join(models)}) instead of one")
  return os.path.join(folder, models[0])


class SentencePieceTokenizer(subword.SubwordTokenizer):
  """ALBERT's SentencePiece tokenizer behind the `WordPieceTokenizer` interface.

  Attributes:
    vocab: the pieces; a piece's id is its index.
    vocab_size: len(vocab).
    pad_id, unk_id, cls_id, sep_id, mask_id: ids of the special pieces.
    lower_case: whether text is lowercased, before the model or by the model itself.
    do_lower_case: whether text is lowercased before the model (HF's do_lower_case).
    keep_accents: False: accents are stripped before the model (rule 2 of the module
      docstring).
  """

  def __init__(self, model_path: str, lower_case: bool = False,
               keep_accents: bool = True):
    """Loads `model_path` (a `.model` file with `[CLS]`, `[SEP]`, `[MASK]` pieces).

    Args:
      model_path: the SentencePiece model.
      lower_case: lowercase text before the model (HF's do_lower_case), for
        models trained on lowercased text that do not fold case themselves (ALBERT's
        released ones). Models from `train_sentencepiece(lower_case=True)` fold case
        already.
      keep_accents: False strips accents before the model (HF's keep_accents=False).
    """
    if not os.path.isfile(model_path):
      raise FileNotFoundError(f"SentencePiece model not found: {model_path}")
    with open(model_path, "rb") as f:
      self._model_proto = f.read()
    self._processor = spm.SentencePieceProcessor(model_proto=self._model_proto)
    self.vocab = [self._processor.id_to_piece(i)
                  for i in range(self._processor.get_piece_size())]
    missing = [piece for piece in SPECIAL_PIECES if piece not in self.vocab]
    if missing:
      raise ValueError(
          f"SentencePiece model {model_path} lacks the piece(s) {', '.join(missing)}.")
    self._set_special_ids(SPECIAL_PIECES)
    self.do_lower_case = lower_case
    self.keep_accents = keep_accents
    self.strips_accents = not keep_accents
    folds_case = self._processor.normalize("ABC") == self._processor.normalize("abc")
    self.lower_case = lower_case or folds_case
    self._special_split = re.compile(
        "(" + "|".join(re.escape(piece) for piece in SPECIAL_PIECES) + ")")
    self._special_ids = {piece: self.vocab.index(piece) for piece in SPECIAL_PIECES}
    self._normalizer = albert_normalizer(lower_case, keep_accents)

  @classmethod
  def from_pretrained_dir(cls, path: str) -> "SentencePieceTokenizer":
    """Reads spiece.model (or the folder's one *.model) and tokenizer_config.json.

    `do_lower_case` and `keep_accents` default to HF AlbertTokenizer's (True, False).
    """
    settings = {}
    config_path = os.path.join(path, "tokenizer_config.json")
    if os.path.isfile(config_path):
      with open(config_path, encoding="utf-8") as f:
        settings = json.load(f)
    return cls(find_model_file(path),
               lower_case=bool(settings.get("do_lower_case", True)),
               keep_accents=bool(settings.get("keep_accents", False)))

  def save(self, folder: str) -> None:
    """Writes spiece.model and tokenizer_config.json (HF AlbertTokenizer's settings)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, MODEL_FILE), "wb") as f:
      f.write(self._model_proto)
    config = {"tokenizer_class": "AlbertTokenizer",
              "do_lower_case": self.do_lower_case,
              "keep_accents": self.keep_accents, "remove_space": True,
              "bos_token": subword.CLS, "eos_token": subword.SEP,
              "cls_token": subword.CLS, "sep_token": subword.SEP,
              "unk_token": UNK_PIECE, "pad_token": PAD_PIECE,
              "mask_token": subword.MASK}
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
      json.dump(config, f, indent=2)

  def _encode_batch(self, texts: list[str]) -> list[list[int]]:
    """Rules 1-3 of the module docstring; one `sentencepiece` call for the whole batch."""
    parts = [self._special_split.split(text) for text in texts]  # Odd parts: specials.
    encoded = iter(self._processor.encode(
        [self._normalizer.normalize_str(plain) for row in parts for plain in row[::2]]))
    rows = []
    for row in parts:
      ids = next(encoded)
      for special in row[1::2]:  # re.split puts a (maybe empty) plain part after each.
        ids += [self._special_ids[special], *next(encoded)]
      rows.append(ids)
    return rows

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor | tf.Tensor:
    """Strings [N] -> int32 ids [N, (pieces)]; a scalar string gives ids [pieces].

    Runs in front of the graph (`subword.python_tokenize`): usable in tf.data.
    """
    return subword.python_tokenize(self._encode_batch, texts)

  def decode(self, ids: Sequence[int]) -> str:
    """Detokenised text of the ids, [PAD] dropped."""
    return self._processor.decode([int(i) for i in ids if int(i) != self.pad_id])
