"""A family member added from outside the package: XLM-RoBERTa (Conneau et al. 2020).

RoBERTa's encoder and heads (its `Family` entry and HF tensor names are RoBERTa's), HF's
`model_type` "xlm-roberta" and classes (XLMRobertaModel, XLMRobertaForMaskedLM, ...),
and a tokenizer kind of its own, "xlm_roberta": a SentencePiece model read with fairseq's
ids, not ALBERT's layout. `register()` declares the member in the models' family table,
then in the weights side's two, and the kind; tests/test_extension.py checks parity with
HF both ways and trains it a few steps.

Fairseq's ids over a SentencePiece model (V pieces: <unk>=0, <s>=1, </s>=2, then the rest):
<s>=0, <pad>=1, </s>=2, <unk>=3, piece i >= 3 at id i + 1, <mask> last (V + 1); a pair is
`<s> A </s></s> B </s>` with token types 0, as RoBERTa's.
"""
import dataclasses
import json
import os

import numpy as np
import sentencepiece as spm

from bert_jax.weights import hf_families, mapping
from bert_jax.models import families as model_families
from bert_jax.models.config import BertConfig
from bert_jax.text import tokenizers
from bert_jax.text.sentencepiece_vocab import find_model_file
from bert_jax.text.subword import SubwordTokenizer, python_tokenize

NAME = "xlm-roberta"  # the family, and HF's model_type
KIND = "xlm_roberta"  # the tokenizer kind
SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")  # ids 0-3
WORD_START = "\u2581"
MODEL_FILE = "sentencepiece.bpe.model"  # HF's name for it


class XlmRobertaTokenizer(SubwordTokenizer):
  """fairseq's ids (module docstring) of a SentencePiece model; the text is kept as it is
  (no lowercasing: the model's own normaliser only)."""
  lower_case = False
  pair_separators, second_type_id = 2, 0  # <s> A </s></s> B </s>, types 0

  def __init__(self, model_path: str):
    self._processor = spm.SentencePieceProcessor(model_file=model_path)
    pieces = self._processor.get_piece_size()
    self.vocab = list(SPECIALS) + [self._processor.id_to_piece(i)
                                   for i in range(3, pieces)] + ["<mask>"]
    self._set_special_ids(("<pad>", "<unk>", "<s>", "</s>", "<mask>"))

  @classmethod
  def from_pretrained_dir(cls, folder: str) -> "XlmRobertaTokenizer":
    return cls(find_model_file(folder))

  def save(self, folder: str) -> None:
    """Writes sentencepiece.bpe.model and HF's tokenizer_config.json."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, MODEL_FILE), "wb") as f:
      f.write(self._processor.serialized_model_proto())
    with open(os.path.join(folder, "tokenizer_config.json"), "w", encoding="utf-8") as f:
      json.dump({"tokenizer_class": "XLMRobertaTokenizer"}, f)

  def _encode_batch(self, texts: list[str]) -> list[list[int]]:
    return [[i + 1 if i else self.unk_id for i in row]
            for row in self._processor.encode(list(texts))]

  def tokenize(self, texts):
    """Strings [N] -> int32 ids [N, (pieces)], in front of the graph (usable in tf.data)."""
    return python_tokenize(self._encode_batch, texts)

  def decode(self, ids) -> str:
    return self._processor.decode([int(i) - 1 for i in ids if int(i) > 3 and
                                   int(i) != self.mask_id])

  def continuation_table(self) -> np.ndarray:
    """bool [V]: pieces without the word-start mark continue a word (specials stand alone)."""
    return np.array([i >= len(SPECIALS) and i != self.mask_id and
                     not piece.startswith(WORD_START) for i, piece in enumerate(self.vocab)])


def _from_hf(raw: dict, source: str) -> BertConfig:
  return BertConfig.from_json_dict({**raw, "family": NAME}, source)


def _to_hf(config: BertConfig) -> dict:
  return {**hf_families.FAMILIES["roberta"].config_to_hf(config), "model_type": NAME}


_ROBERTA_HF = hf_families.FAMILIES["roberta"]
FAMILY = dataclasses.replace(
    model_families.FAMILIES["roberta"], tokenizers=(KIND,),
    description="XLM-RoBERTa (Conneau et al. 2020): RoBERTa's encoder, a multilingual "
                "SentencePiece vocabulary with fairseq's ids")
HF_FAMILY = dataclasses.replace(
    _ROBERTA_HF, config_from_hf=_from_hf, config_to_hf=_to_hf,
    encoder_class="XLMRobertaModel", pretraining_class="XLMRobertaForMaskedLM",
    task_classes=tuple((task, "XLM" + cls) for task, cls in _ROBERTA_HF.task_classes))
TOKENIZER_KIND = tokenizers.Kind(
    "XLM-R SentencePiece", lambda names: sorted(n for n in names if n.endswith(".model")),
    MODEL_FILE, XlmRobertaTokenizer.from_pretrained_dir, ".model",
    lambda path, data: XlmRobertaTokenizer(path))


def register() -> None:
  """Adds the member and its tokenizer kind to the package's tables."""
  tokenizers.register_kind(KIND, TOKENIZER_KIND)
  model_families.register(NAME, FAMILY)
  hf_families.register(NAME, HF_FAMILY, mapping.NAMES["roberta"])


def unregister() -> None:
  hf_families.unregister(NAME)
  model_families.unregister(NAME)
  tokenizers.unregister_kind(KIND)


def train_vocab(text_file: str, folder: str, vocab_size: int = 300) -> str:
  """A SentencePiece model of fairseq's kind (<unk>=0, <s>=1, </s>=2) in `folder`."""
  os.makedirs(folder, exist_ok=True)
  prefix = os.path.join(folder, MODEL_FILE[:-len(".model")])
  spm.SentencePieceTrainer.train(input=text_file, model_prefix=prefix, vocab_size=vocab_size,
                                 model_type="unigram", num_threads=1, minloglevel=2,
                                 input_sentence_size=20000, shuffle_input_sentence=True)
  return folder
