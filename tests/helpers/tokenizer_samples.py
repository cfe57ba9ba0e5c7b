"""Shared by the tokenizer tests: real sample lines, a training text, reference checks, and
a ModernBERT-like tokenizer.json (byte-level BPE with BERT's specials)."""
import importlib.util
import pathlib

import numpy as np
import pytest

_BENCH_DIR = pathlib.Path(__file__).resolve().parents[2] / "bench"
SAMPLE_LINES = 300  # per corpus
EDGE_CASES = (
    "", "   ", "\t\n", "Hello, World!", " leading and trailing spaces  ",
    "Café naïve Ångström résumé Zoë façade ΟΔΟΣ straße ﬁ µ", "中文字符 日本語 한국어 🙂☃",
    "``quoted'' and ` single ' and ''''", "a\x00b \x07c d\u200be \ufffdf g\x85h \u00adi",
    "a\u2028b\u00a0c\u3000d\te\nf\rg", "[CLS] x [SEP] y [MASK]ed [PAD] [UNK]x [cls]",
    "<s>x</s> <pad><unk>y hello <mask> world <mask>", "A\u0301 e\u0301 final\u0301",
    "$7,000,000,000. 0.1-0-0-0 1990, 3,",
)
SPECIALS = {"unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
            "pad_token": "[PAD]", "mask_token": "[MASK]"}


def parity_bench():
  """bench/tokenizer_parity.py: the corpus readers and the checked HF constructor."""
  spec = importlib.util.spec_from_file_location(
      "tokenizer_parity", _BENCH_DIR / "tokenizer_parity.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def write_lines(path: pathlib.Path, lines) -> str:
  path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def training_text(tmp_path_factory, data_dir) -> str:
  lines = [line for line in parity_bench().wikitext_texts(data_dir) if line.strip()]
  return write_lines(tmp_path_factory.mktemp("text") / "train.txt", lines[:3000])


@pytest.fixture(scope="module")
def sample_lines(data_dir) -> list[str]:
  corpora = parity_bench().corpus_lines(data_dir, max_lines=SAMPLE_LINES)
  assert len(corpora) >= 8 and all(corpora.values())
  return [line for lines in corpora.values() for line in lines] + list(EDGE_CASES)


def assert_model_inputs_equal(ours, hf_tokenizer, texts_a, texts_b, lengths):
  """encode_for_model equals the HF tokenizer's pair encoding (longest-first, padded)."""
  for max_length in lengths:
    for b in (None, texts_b):
      mine = ours.encode_for_model(texts_a, b, max_length=max_length)
      theirs = hf_tokenizer(texts_a, b, truncation="longest_first", padding="max_length",
                            max_length=max_length, return_token_type_ids=True,
                            return_tensors="np")
      for key in ("input_ids", "token_type_ids", "attention_mask"):
        assert mine[key].dtype == np.int32
        np.testing.assert_array_equal(mine[key], theirs[key], err_msg=f"{key} {max_length}")


def mismatches(ours: list[list[int]], theirs: list[list[int]], lines) -> list[str]:
  assert len(ours) == len(theirs) == len(lines)
  return [line for line, a, b in zip(lines, ours, theirs) if list(a) != list(b)]


def modernbert_like_tokenizer(text: str, folder: str, vocab_size: int) -> str:
  """Writes to `folder` what answerdotai/ModernBERT-base ships (tokenizer.json and its
  settings, no other vocabulary file): a byte-level BPE learned on `text`, BERT's specials
  after the pieces, [CLS] A [SEP] B [SEP] with every token type 0. Returns the folder."""
  import transformers
  from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
  tok = Tokenizer(models.BPE())
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.decoder = decoders.ByteLevel()
  tok.train([text], trainers.BpeTrainer(vocab_size=vocab_size,
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
  tok.add_special_tokens(list(SPECIALS.values()))
  tok.post_processor = processors.TemplateProcessing(
      single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:0 [SEP]:0",
      special_tokens=[(t, tok.token_to_id(t)) for t in ("[CLS]", "[SEP]")])
  transformers.PreTrainedTokenizerFast(tokenizer_object=tok, **SPECIALS).save_pretrained(folder)
  return folder
