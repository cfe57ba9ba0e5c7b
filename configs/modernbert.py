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

`size=base|large,phase=1|2`: ModernBERT at the paper's scale (Warner et al. 2024, Sec. 2;
AnswerDotAI/ModernBERT's yamls/modernbert/modernbert-base-pretrain.yaml), in its two
phases: phase 1 (default) 1.719T tokens of 1,024-token packed rows (base: batch 4,608, lr
8e-4 after a 3B-token warmup; large: 4,928 and 5e-4 after 2B), RoPE theta 10,000; phase 2
the context extension, 300B tokens at 8,192 with the global layers' theta 160,000, lr 3e-4
and its 1 - sqrt decay over the last 50B. Both: 30% MLM, no NSP, StableAdamW (betas 0.9 /
0.98, eps 1e-6, decoupled weight decay 1e-5, no global clipping), the trapezoidal
(warmup-stable-decay) schedule, alternating global / 128-token local attention, GeGLU,
RoPE, a 50,368-entry BPE vocabulary; bf16 compute, fp32 params and optimizer state, no
attention guidance (configs/tiny.py's is off in this file anyway). Not here: the paper's
batch-size warmup (its first 50B tokens) and large's restart at lr 5e-5.

  python -m bert_jax.train --config=configs/modernbert.py:size=base,corpus=/data/*.txt \
      --workdir=gs://bucket/modernbert_base
  python -m bert_jax.train --config=configs/modernbert.py:size=base,phase=2,corpus=... \
      --config.init_from=gs://bucket/modernbert_base --workdir=gs://bucket/modernbert_base_8k

`vocab` is a tokenizer folder, read as the family's kinds in order (tokenizer.json, as HF
answerdotai/ModernBERT-base ships its OLMo-based BPE; or vocab.json + merges.txt);
`tfds=NAME` reads a tfds dataset instead of `corpus`, `seq=N` another row length,
`runlocal=True` the same model for a smoke test (T64, batch 8, 20 steps).
"""
from bert_jax.files import storage
from bert_jax.models.config import config_for_size
from bert_jax.configs import tiny
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args)

MASKED_LM_PROB = 0.3


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="", vocab_size=0, size="",
                  phase=0, tfds="", seq=0, runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg, "phase")
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "modernbert-tiny", vocab_size=arg.vocab_size or 8192, pad_token_id=1).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/bpe-8k")
  use_modernbert_inputs(config)
  config.optim.b2 = 0.98
  config.attention_guidance.weight = 0.0
  return config


def use_modernbert_inputs(config):
  """ModernBERT's inputs (Warner et al. 2024, Sec. 2.2): cased text, full rows of text
  across documents, MLM alone at 30%, room for 30% of a row's positions but its two
  specials (128 -> 38; 1,024 -> 307; 8,192 -> 2,457)."""
  config.data.lower_case = False
  config.data.example_builder = "full_sentences"
  config.data.masking = "token"
  config.data.masked_lm_prob = MASKED_LM_PROB
  config.data.max_predictions_per_seq = round(
      MASKED_LM_PROB * (config.data.max_seq_length - 2))
  config.objectives = "mlm"


def paper_config(arg):
  """configs/modernbert.py:size=base|large,phase=1|2 (module docstring)."""
  phase = arg.phase or 1
  if phase not in PHASES:
    raise ValueError(f"config arg phase={arg.phase}: expected one of {sorted(PHASES)}")
  # HF answerdotai/ModernBERT-{base,large} config.json: base L22/H768/A12, GeGLU I1152;
  # large L28/H1024/A16, I2624 (the paper's Table 5: GLU expansions 2,304 and 5,248, halved
  # per gate); vocab 50,368, 8,192 positions, local window 128, global every 3rd layer.
  config = pretraining_config("modernbert-base", **RECIPE_SHAPES.get(arg.size, {}))
  seq = PHASES[phase][0]
  set_pretraining_data(config, recipe_data_arg(arg, seq=seq))
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/bpe-50k")
  config.model.vocab_size = arg.vocab_size or 50368
  use_modernbert_inputs(config)
  # The paper packs unpadded documents several to a row, each attending to itself only
  # (Sec. 2.1.3, sequence_packing in the repo's yaml): the packed sentence blocks here.
  config.data.packing = True

  def recipe(config):
    _modernbert(config)
    PHASES[phase][1](config, arg.size)
  paper_scale(config, {size: recipe for size in PHASE_1}, arg)
  if arg.runlocal:  # the smoke test's rows: 30% of 64
    config.data.max_predictions_per_seq = round(
        MASKED_LM_PROB * (config.data.max_seq_length - 2))
  return config


def _modernbert(config):
  """Both sizes' optimizer (yamls/modernbert/modernbert-base-pretrain.yaml of
  AnswerDotAI/ModernBERT; the paper, Sec. 2.2.2): StableAdamW, betas (0.9, 0.98), eps
  1e-6, no global clipping; decoupled weight decay 1e-5 off norms and biases, which in the
  lr-scaled form here is 1e-5 / peak lr (the same decay at every step of the schedule)."""
  config.optim.name = "stableadamw"  # optimizer decoupled_stableadamw
  config.optim.b1 = 0.9  # betas [0.9, 0.98]
  config.optim.b2 = 0.98
  config.optim.eps = 1e-6  # eps 1e-6
  config.optim.grad_clip_norm = 0.0  # StableAdamW clips per tensor; no global clipping


def _phase_1(config, size):
  """Phase 1 at 1,024 tokens, RoPE theta 10,000 in every layer (rotary_emb_base 10000),
  the trapezoid's warmup and long constant part: the yaml's warmup_stable_decay with
  t_decay 0 (its decay runs in phase 2), as `schedule=wsd` whose end equals its peak."""
  batch, lr, warmup_tokens = PHASE_1[size]
  tokens = 1_719_000_000_000  # max_duration 1_719_000_000_000tok (the paper: 1.7T)
  config.data.batch_size = batch
  config.num_train_steps = -(-tokens // (batch * 1024))
  config.optim.learning_rate = lr
  config.optim.warmup_steps = -(-warmup_tokens // (batch * 1024))
  config.optim.schedule = "wsd"
  config.optim.end_learning_rate = lr  # constant after the warmup
  config.optim.weight_decay = 1e-5 / lr
  config.model.global_rope_theta = 10_000.0


def _phase_2(config, size):
  """Phase 2, the context extension (the paper, Sec. 2.2.3): 8,192-token rows, the global
  layers' RoPE theta raised to 160,000, 300B more tokens at a constant 3e-4 whose last 50B
  decay as 1 - sqrt to 0 (`schedule=wsd`, decay_fraction 50 / 300), no warmup. Its batch
  keeps phase 1's tokens per step (4,608 x 1,024 = 576 x 8,192): the paper's batch there is
  not in a source read here. A run starts from phase 1's workdir (--config.init_from)."""
  phase_1_batch = PHASE_1[size][0]
  batch = phase_1_batch * 1024 // 8192
  config.data.batch_size = batch
  config.num_train_steps = -(-300_000_000_000 // (batch * 8192))
  config.optim.learning_rate = 3e-4
  config.optim.warmup_steps = 0
  config.optim.schedule = "wsd"
  config.optim.decay_fraction = 50 / 300
  config.optim.end_learning_rate = 0.0
  config.optim.weight_decay = 1e-5 / 3e-4
  config.model.global_rope_theta = 160_000.0


RECIPE_SHAPES = {"base": {}, "large": dict(num_hidden_layers=28, hidden_size=1024,
                                           num_attention_heads=16, intermediate_size=2624)}
# size -> phase 1's (global batch, peak lr, warmup tokens): the yaml's global_train_batch_size
# 4608, lr 8e-4, t_warmup 3B tokens for base; large's from the paper (Sec. 2.2.2 and its
# training-settings table: lr 5e-4 after a 2B-token warmup, batch 4,928); large's restart at
# 5e-5 after 900B tokens (Sec. 2.2.2) is not part of this schedule.
PHASE_1 = {"base": (4608, 8e-4, 3_000_000_000), "large": (4928, 5e-4, 2_000_000_000)}
# phase -> (row length, the phase's schedule).
PHASES = {1: (1024, _phase_1), 2: (8192, _phase_2)}
