"""SentencePiece vocabularies for ALBERT-style runs: training, and an in-graph tokenizer.

`train_sentencepiece` trains a model with ALBERT's special-piece layout: `<pad>`=0,
`<unk>`=1, then the control symbols `[CLS]`=2, `[SEP]`=3, `[MASK]`=4, and no BOS/EOS.
`SentencePieceTokenizer` wraps such a model behind the same interface as
`tokenizer.WordPieceTokenizer`; its `tokenize` runs tensorflow_text's
`SentencepieceTokenizer`, so it works inside `tf.data.Dataset.map`.
"""
import os
from typing import Sequence

import sentencepiece as spm
import tensorflow as tf
import tensorflow_text as tf_text

from bert_jax.text import wordpiece as tokenizer

PAD_PIECE, UNK_PIECE = "<pad>", "<unk>"
CONTROL_SYMBOLS = (tokenizer.CLS, tokenizer.SEP, tokenizer.MASK)


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


class SentencePieceTokenizer(tokenizer.SubwordTokenizer):
  """A SentencePiece model behind the `WordPieceTokenizer` interface.

  Attributes:
    vocab: the pieces; a piece's id is its index.
    vocab_size: len(vocab).
    pad_id, unk_id, cls_id, sep_id, mask_id: ids of the special pieces.
    lower_case: whether text is lowercased, by the graph or by the model itself.
  """

  def __init__(self, model_path: str, lower_case: bool = False):
    """Loads `model_path` (a `.model` file with `[CLS]`, `[SEP]`, `[MASK]` pieces).

    Args:
      model_path: the SentencePiece model.
      lower_case: lowercase text in-graph before the model, for models trained on
        lowercased text that do not fold case themselves (ALBERT's released ones).
        Models from `train_sentencepiece(lower_case=True)` fold case already.
    """
    if not os.path.isfile(model_path):
      raise FileNotFoundError(f"SentencePiece model not found: {model_path}")
    with open(model_path, "rb") as f:
      model_proto = f.read()
    self._processor = spm.SentencePieceProcessor(model_proto=model_proto)
    self.vocab = [self._processor.id_to_piece(i)
                  for i in range(self._processor.get_piece_size())]
    if self._processor.pad_id() < 0:
      raise ValueError(f"SentencePiece model {model_path} has no pad piece.")
    missing = [piece for piece in CONTROL_SYMBOLS if piece not in self.vocab]
    if missing:
      raise ValueError(
          f"SentencePiece model {model_path} lacks the piece(s) {', '.join(missing)}.")
    self._set_special_ids((self.vocab[self._processor.pad_id()],
                           self.vocab[self._processor.unk_id()]) + CONTROL_SYMBOLS)
    self._lowercase_in_graph = lower_case
    folds_case = self._processor.normalize("ABC") == self._processor.normalize("abc")
    self.lower_case = lower_case or folds_case
    self._sentencepiece = tf_text.SentencepieceTokenizer(
        model=model_proto, out_type=tf.int32)

  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor | tf.Tensor:
    """Strings [N] -> int32 ids [N, (pieces)]; a scalar string gives ids [pieces]."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if self._lowercase_in_graph:
      texts = tf.strings.lower(texts, encoding="utf-8")
    return self._sentencepiece.tokenize(texts)

  def decode(self, ids: Sequence[int]) -> str:
    """Detokenised text of the ids, [PAD] dropped."""
    return self._processor.decode([int(i) for i in ids if int(i) != self.pad_id])
