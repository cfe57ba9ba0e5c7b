r"""ModernBERT-Tiny (L3/H128/A2, GeGLU I192) pretraining on the prepared real corpus, on 2 CPU
cores: MLM only at 30% masking, full rows of sentences, a byte-level BPE vocabulary learned
here (Warner et al. 2024, "Smarter, Better, Faster, Longer", arXiv 2412.13663).

  python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt            # once
  python -m bert_jax.text.learn_vocab --kind=bpe --input=runs/corpus/pretrain.txt \
      --vocab_size=8192 --output=runs/corpus/bpe-8k                           # once
  python -m bert_jax.train --config=configs/modernbert.py --workdir=runs/modernbert

Arg (`configs/modernbert.py:corpus=PATH,vocab=FOLDER,vocab_size=N,runlocal=True`): the
prepared file, the BPE folder (vocab.json + merges.txt) and its entry count; `runlocal`
shrinks everything for a smoke test (seconds).

ModernBERT's choices that this codebase has, all taken:
  - the modernbert family ("modernbert-tiny", models/modernbert.py): no position table,
    RoPE (theta 160,000 in global layers, 10,000 in local ones), pre-LN GeGLU layers,
    no biases in norms, attention, MLP or the MLM transform, exact GELU, no dropout;
    layer 0 global, layers 1-2 local (global every 3rd layer, as the paper's), the local
    window 64 tokens (|i - j| <= 32; the paper's is 128 at sequence length 1,024-8,192);
  - no NSP, MLM alone (objectives=mlm) with 30% of the tokens selected, 80/10/10;
  - full sequences: <s> whole sentences </s> packed up to the length, crossing documents
    with a separator (example_builder=full_sentences, every position used but the end);
  - its tokenizer kind: a byte-level BPE (configs/roberta.py's, learned from the corpus;
    the paper's is OLMo's 50,368-entry BPE with BERT's [CLS]/[SEP] specials, ours keeps
    RoBERTa's <s>/</s>), whose <pad> = 1 is pad_token_id;
  - AdamW with b2 = 0.98 and eps 1e-6, weight decay off norms and biases.
What differs from the paper, because the codebase does not have it or it is a size choice:
  - optimizer: AdamW with global-norm clipping at 1.0, not the paper's StableAdamW (its
    per-tensor update clipping), which is `--config.optim.name=stableadamw` (optim.py,
    equal to torch-optimi's). Measured in the main job's run (below; 2026-11-28, 83a6e37, alone):
    with `--config.optim.grad_clip_norm=0`, as the paper has no global clipping, held-out
    MLM 26.75% at step 1,500 against AdamW's 26.84% (SST-2 dev through the main job's
    fine-tuning, seeds 0-2: 77.87 [77.06, 78.90] against 78.17), so AdamW stays. Weight decay 0.01
    in optax's (lr-scaled) form is the paper's decoupled 1e-5 at its peak lr 8e-4
    (1e-5 / 8e-4 = 0.0125), rounded to BERT's;
  - schedule: linear warmup + linear decay to 0, not the paper's trapezoid (warmup, long
    constant phase, 1 - sqrt decay), which is `--config.optim.schedule=wsd` (optim.py).
    In the main job's run (2026-11-28, 83a6e37, alone) it reads 22.56 / 25.57 / 27.80% held-out
    MLM at steps 500 / 1,000 / 1,500 against linear decay's 22.69 / 25.53 / 26.84%: +0.96
    at the end, though SST-2 dev reads 77.33 [76.95, 77.75] against 78.17 (seeds 0-2,
    within the seeds' noise). Not the default: the main job's and the sweeps' committed
    numbers come from linear decay. No batch-size warmup; the peak lr is configs/tiny.py's 2e-3
    for this tiny model (the paper: 8e-4 at 149M params);
  - packing: ModernBERT trains on unpadded rows of several documents that do not see
    each other. The model takes such rows (`--config.data.packing`: rotary positions
    restart per example, attention and the local window stay inside it;
    tests/test_packing.py), but this config keeps rows of contiguous text across
    documents (RoBERTa's FULL-SENTENCES), the recipe its README numbers come from;
  - no attention guidance (configs/tiny.py's auxiliary loss): RoPE gives every head the
    relative positions that BERT's learned table must discover on the unigram plateau;
  - sequence length 128 (the paper: 1,024, then 8,192), 3 layers.

The main job's model (scripts/main_job.sh), which since 2026-11-27 (63477ad) adds
`--config.init_word_vectors=runs/corpus/bpe-8k-vectors.npz --config.init_word_vectors_std=0.1`
(the corpus' PPMI + SVD vectors, bert_jax.pretrain.word_vectors, at 5x the fresh table's
std: held-out MLM 22.69 / 26.84% at steps 500 / 1,500; experiments/PAYOFF.md, "The vectors' scale").
Without them, measured in the main job (2026-11-24, 2df362f, a fresh clone,
alone on 2 cores): 1,500 steps of 32 x 128 tokens in 485 s (~13,600 tokens/s; MFU 29.9% in
its run report); held-out MLM accuracy 19.40 / 22.28 / 23.78% at steps 500 /
1,000 / 1,500 (30% of the tokens masked; ln 8192 = 9.01, final held-out loss 5.02). Fine-tuned
on 8,000 SST-2 sentences (3 epochs, lr 5e-4, seq 64), seeds 0-2: dev accuracy 76.99 [76.72,
77.41] against 76.53 [75.92, 77.18] from random weights of the same shape (README,
"Does pretraining here pay off?", has the learning curve; experiments/PAYOFF.md the variants
tried).
"""
from bert_jax.files import storage
from bert_jax.models.config import config_for_size
from bert_jax.configs import tiny
from bert_jax.configs.common import parse_arg

MASKED_LM_PROB = 0.3


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="runs/corpus/bpe-8k",
                  vocab_size=8192, runlocal=False)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "modernbert-tiny", vocab_size=arg.vocab_size, pad_token_id=1).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab)
  config.data.lower_case = False
  config.data.example_builder = "full_sentences"
  config.data.masking = "token"
  config.data.masked_lm_prob = MASKED_LM_PROB
  # Room for 30% of a row's positions but its <s> and </s> (128 -> 38; runlocal 64 -> 19).
  config.data.max_predictions_per_seq = round(
      MASKED_LM_PROB * (config.data.max_seq_length - 2))
  config.objectives = "mlm"
  config.optim.b2 = 0.98
  config.attention_guidance.weight = 0.0
  return config
