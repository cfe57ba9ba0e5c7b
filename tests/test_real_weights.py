"""all-MiniLM-L6-v2 (a real BERT encoder, L6/H384) against HF and sentence-transformers."""
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.weights import load_pretrained  # noqa: E402


def _sst2_sentences(data_dir, n):
  with open(os.path.join(data_dir, "glue", "SST-2", "dev.tsv"), encoding="utf-8") as f:
    next(f)
    return [line.split("\t")[0] for _, line in zip(range(n), f)]


def test_minilm_matches_hf_last_hidden_state(minilm_dir, data_dir):
  sentences = _sst2_sentences(data_dir, 12) + ["short", "A 中文 test, naïve café!"]
  tokenizer = transformers.BertTokenizerFast.from_pretrained(minilm_dir)
  enc = tokenizer(sentences, padding=True, return_tensors="np")
  assert (enc["attention_mask"] == 0).any()  # the batch has padding
  model, variables = load_pretrained(minilm_dir)
  ours = model.apply(variables, enc["input_ids"], enc["token_type_ids"], enc["attention_mask"])
  ref = transformers.BertModel.from_pretrained(minilm_dir).eval()
  with torch.no_grad():
    theirs = ref(**{k: torch.tensor(v) for k, v in enc.items()})
  mask = enc["attention_mask"][..., None]
  diff = np.abs(np.asarray(ours.sequence_output) - theirs.last_hidden_state.numpy()) * mask
  assert diff.max() < 1e-5, diff.max()
  np.testing.assert_allclose(ours.pooled_output, theirs.pooler_output.numpy(), atol=1e-5)


@pytest.mark.slow
def test_embed_cli_reproduces_sentence_transformers(minilm_dir, data_dir, tmp_path):
  st = pytest.importorskip("sentence_transformers")
  sentences = _sst2_sentences(data_dir, 40)
  (tmp_path / "in.txt").write_text("\n".join(sentences) + "\n", encoding="utf-8")
  out = tmp_path / "out.npy"
  subprocess.run([sys.executable, "-m", "bert_jax.commands.embed", f"--model={minilm_dir}",
                  f"--input={tmp_path / 'in.txt'}", f"--output={out}", "--pooling=mean",
                  "--normalize", "--max_length=256", "--batch_size=16"], check=True)
  ours = np.load(out)
  reference = st.SentenceTransformer(minilm_dir, device="cpu").encode(sentences,
                                                                      convert_to_numpy=True)
  assert ours.shape == reference.shape == (40, 384)
  np.testing.assert_allclose(ours, reference, atol=1e-5)
