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
"""
from bert_jax import storage
from bert_jax.models.config import config_for_size
from bert_jax.configs import tiny
from bert_jax.configs.common import parse_arg


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/pretrain.txt", vocab="runs/corpus/spm-8k",
                  vocab_size=8192, sharing="all", runlocal=False)
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "albert-tiny", vocab_size=arg.vocab_size, layer_sharing=arg.sharing,
      max_position_embeddings=config.model.max_position_embeddings).to_json_dict())
  config.data.vocab_path = storage.absolute(arg.vocab)
  config.data.example_builder = "sop"
  config.data.masking = "ngram"
  config.objectives = "mlm,sop"
  config.model.projection_init = "fan_in"
  config.optim.learning_rate = 5e-4
  return config
