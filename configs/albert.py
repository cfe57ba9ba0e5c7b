r"""ALBERT-Tiny (L2/H128/A2, E64, one shared layer) pretraining on the prepared real corpus,
on 2 CPU cores: sentence-order prediction, n-gram masking, a SentencePiece vocabulary
learned here (Lan et al., 2019).

  python -m bert_jax.text.prepare --output=runs/corpus/pretrain.txt              # once
  python -m bert_jax.text.learn_vocab --kind=sentencepiece \
      --input=runs/corpus/pretrain.txt --vocab_size=8192 --output=runs/corpus/spm-8k   # once
  python -m bert_jax.train --config=configs/albert.py --workdir=runs/albert

Arg (`configs/albert.py:corpus=PATH,vocab=FOLDER,vocab_size=N,sharing=all,runlocal=True`):
the prepared file, the SentencePiece folder (spiece.model; read as ALBERT's released kind,
text/tokenizers.py's "sentencepiece") and its piece count; `sharing` is the cross-layer sharing (all, as ALBERT;
attention, ffn or none: the paper's Table 4 ablation); `runlocal` shrinks everything for a
smoke test (seconds).

What differs from configs/tiny.py (BERT): the albert family (factorized embeddings E=64 ->
H=128, the layers sharing their params), two consecutive segments of one document swapped
half of the time with the SOP head instead of NSP (example_builder=sop, objectives mlm,sop),
whole-word n-grams of 1-3 words masked (masking=ngram, p(n) = 6/11, 3/11, 2/11), ALBERT's
tanh GELU and no dropout, the SentencePiece vocabulary. Size, attention guidance and the
schedule are tiny.py's, but for two choices this tiny factorized model needs to leave the
unigram plateau (README, ALBERT-Tiny's stall): the E -> H projection starts at std
1/sqrt(E) (`model.projection_init=fan_in`; init only, the forward pass is HF's) and the
peak learning rate is 5e-4, not 2e-3. With the std-0.02 projection at 2e-3 all four
sharing modes stalled at the most frequent piece (held-out MLM 3.9-4.8% to step 1,000),
and with fan_in at 2e-3 the not-shared L4 model still did; with fan_in at 5e-4 both
not-shared and all-shared L4 leave it by step 500 (5.93% and 5.68%), while 1e-3 trains the
not-shared model faster (7.41%) and stalls the all-shared one. Its SOP head needs depth
more than params: at these 2 layers it stays at chance on the held-out pairs (50.63% at step
1,000 of 64-token rows), at `--config.model.num_hidden_layers=4` (the same 2.2 M shared
params, twice the compute) it reads 64.38 / 70.63 / 69.38% at steps 500 / 750 / 1,000
(2026-11-27, de00716, on 320 of them; experiments/sweeps/family_pretraining.py runs ALBERT so).

`size=base|large|xxlarge`: ALBERT v2 at the paper's scale (Lan et al. 2020, Sec. 4.1, as
google-research/albert's run_pretraining.py and create_pretraining_data.py set it): batch
4096, LAMB at lr 0.00176 with 3,125 warmup steps, 125k steps, 512-token SOP pairs with 10%
shorter, n-gram masking (n <= 3), 20 predictions per row, a 30,000-piece SentencePiece
vocabulary; no dropout; the projection starts as HF's (normal); bf16 compute, fp32 params
and LAMB state, no attention guidance:

  python -m bert_jax.train --workdir=gs://bucket/albert_base \
      --config=configs/albert.py:size=base,corpus=/data/*.txt,vocab=/models/albert-base-v2

`vocab` is a folder with spiece.model (HF albert-base-v2's, or `learn_vocab
--kind=sentencepiece --vocab_size=30000`); `tfds=NAME` reads a tfds dataset instead of
`corpus`, `seq=N` another row length, `runlocal=True` the same model for a smoke test (T64,
batch 8, 20 steps).
Planned (not run) for a TPU v6e-8 by its own compiler on a CPU machine (`--compile_only
--target=tpu:v6e-8 --config.mesh.data=1 --config.mesh.fsdp=8
--config.model.attention_impl=splash --config.grad_accum_steps=16`; 2026-12-01, 47695de,
libtpu 0.0.42.1, on a shared 2-core CPU): `size=xxlarge`'s 4,096 x 512 step as 16
micro-batches of 256 needs 30.74 GiB per chip of v6e's 32 (30.42 of it temporaries; the
sharded fp32 params and LAMB state 0.31), 190 s of compile. A compiler estimate, not a run.
"""
from bert_jax.files import storage
from bert_jax.models.config import config_for_size
from bert_jax.configs import tiny
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args)


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="", vocab_size=0,
                  sharing="all", size="", tfds="", seq=0, runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "albert-tiny", vocab_size=arg.vocab_size or 8192, layer_sharing=arg.sharing,
      max_position_embeddings=config.model.max_position_embeddings).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/spm-8k")
  use_albert_inputs(config)
  config.model.projection_init = "fan_in"
  config.optim.learning_rate = 5e-4
  return config


def use_albert_inputs(config):
  """ALBERT's inputs and losses: sentence-order pairs (create_pretraining_data.py's
  random_next_sentence False: the two segments swapped half of the time), whole-word
  n-grams of up to 3 words masked (ngram 3, favor_shorter_ngram), MLM + SOP."""
  config.data.example_builder = "sop"
  config.data.masking = "ngram"
  config.objectives = "mlm,sop"


def paper_config(arg):
  """configs/albert.py:size=base|large|xxlarge (module docstring)."""
  size = RECIPE_SIZES.get(arg.size, "albert-base-v2")
  # Every v2 size: E128, one shared layer, tanh GELU, no dropout (config/large/
  # albert_config.json: both dropouts 0), 512 positions.
  config = pretraining_config(size, layer_sharing=arg.sharing)
  set_pretraining_data(config, recipe_data_arg(arg, seq=512))  # max_seq_length 512
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/spm-30k")
  config.model.vocab_size = arg.vocab_size or 30000  # albert_config.json vocab_size 30000
  use_albert_inputs(config)
  paper_scale(config, RECIPES, arg)
  return config


def _albert(config):
  """The recipe every size shares (run_pretraining.py's flag defaults, optimization.py)."""
  config.data.batch_size = 4096  # train_batch_size 4096; Sec. 4.1: batch size of 4096
  config.data.max_predictions_per_seq = 20  # max_predictions_per_seq 20
  config.data.masked_lm_prob = 0.15  # create_pretraining_data.py masked_lm_prob 0.15
  config.data.short_seq_prob = 0.1  # short_seq_prob 0.1
  config.data.lower_case = True  # do_lower_case True
  config.num_train_steps = 125_000  # num_train_steps 125000; Sec. 4.1: 125,000 steps
  config.optim.name = "lamb"  # optimizer lamb; Sec. 4.1: LAMB
  config.optim.learning_rate = 0.00176  # learning_rate 0.00176; Sec. 4.1: lr 0.00176
  config.optim.warmup_steps = 3125  # num_warmup_steps 3125
  config.optim.end_learning_rate = 0.0  # polynomial_decay to 0, poly_power 1.0 (linear)
  # optimization.py's LAMBOptimizer: weight_decay_rate 0.01, beta_1 0.9, beta_2 0.999,
  # epsilon 1e-6, LayerNorm and biases excluded; clip_by_global_norm(clip_norm=1.0).
  config.optim.weight_decay = 0.01
  config.optim.b1 = 0.9
  config.optim.b2 = 0.999
  config.optim.eps = 1e-6
  config.optim.grad_clip_norm = 1.0
  config.model.projection_init = "normal"  # modeling.py's initializer, range 0.02


RECIPES = {"base": _albert, "large": _albert, "xxlarge": _albert}
RECIPE_SIZES = {"base": "albert-base-v2", "large": "albert-large-v2",
                "xxlarge": "albert-xxlarge-v2"}
