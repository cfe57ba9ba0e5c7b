r"""ERNIE-Tiny (L2/H128/A2) pretraining with knowledge masking on an annotated corpus, on 2
CPU cores (Sun et al., 2019: basic, phrase-level and entity-level masking).

The corpus is plain text with a span file beside it (bert_jax/text/spans.py: one JSON line
per text line, the entities and phrases by word offsets). The codebase's own taggers write
it: an NER model and a chunker fine-tuned from all-MiniLM-L6-v2 on CoNLL-2003
(configs/conll.py; the commands are experiments/sweeps/ernie_masking.py's PREPARE):

  python -m bert_jax.text.prepare --source=wikitext-2/valid.txt --source=wikitext-2/test.txt \
      --source=nltk_corpora/state_union.zip --source=nltk_corpora/inaugural.zip \
      --output=runs/corpus/knowledge.txt
  python -m bert_jax.commands.tag_spans --model=runs/conll_ner --phrase_model=runs/conll_chunk \
      --input=runs/corpus/knowledge.txt --max_length=64   # writes knowledge.spans.jsonl
  python -m bert_jax.pretrain.inspect --config=configs/ernie.py --json   # whole-unit shares
  python -m bert_jax.train --config=configs/ernie.py --workdir=runs/ernie

Measured (2-core AMD EPYC, 2026-11-29, commit 6ad898a): the taggers, each fine-tuned on
4,000 random CoNLL-2003 training sentences for one epoch (seq 64, lr 2e-4, 8 min 7 s
each, two at once), score on its validation set: NER entity F1 0.7595 (PER 0.895, LOC
0.810, MISC 0.622, ORG 0.603), chunker chunk F1 0.8629 (NP 0.876, VP 0.827, PP 0.950).
They tag the 39,852 lines (246 documents, 0.90M words) in 22 min 22 s (its last 7 min
beside another job): 37,090 entities and 499,600 phrases. `inspect` over 100 batches of
the ernie_masking sweep's rows (T64, 8k vocabulary, 15% selected in every scheme) gives
the share of annotated units predicted whole / of the touched ones only partly predicted:
  masking             entities whole / split   phrases whole / split
  token               0.081 / 0.700            0.082 / 0.683
  phrase              0.139 / 0.056            0.168 / 0
  entity              0.143 / 0                0.094 / 0.603
  mixture (3 levels)  0.114 / 0.371            0.114 / 0.482
Token masking still predicts 8% of units whole (one-piece words); entity (phrase) masking
never splits an entity (phrase), and the mixture splits about half as often as tokens.
(`python -m bert_jax.pretrain.inspect --config=configs/ernie.py:masking=NAME --batches=100
--json --config.data.vocab_path=$PWD/runs/corpus/vocab-8k.txt --config.model.vocab_size=8065
--config.data.max_seq_length=64 --config.data.max_predictions_per_seq=10
--config.data.eval_held_out_docs=20`; the mixture is the default `masking=mixture`.)

The ablation (`python -m experiments.run ernie_masking`: this config on the ablation
baseline, 1,000 steps of 32 x 64 NSP pairs, seeds 0 and 1; 7.5-14.4 min a run with its four
fine-tunings, 2026-11-29, commit ca50e77; experiments/README.md): CoNLL-2003 dev F1
fine-tuned 28.10 (token) / 26.86 (+ phrase) / 23.91 (+ phrase + entity), token above ERNIE's
mixture on both seeds, the paper's direction reversed at this scale; SST-2 63.65 / 62.27 /
65.25 (seeds overlap); held-out MLM accuracy 16.24 / 15.01 / 16.31.

Any span file in that format serves as well (`python -m bert_jax.text.prepare --with_spans
--source=tagged.txt --output=...` checks it and carries it through).

Arg (`configs/ernie.py:corpus=PATH,masking=NAME,mixture=SPEC,runlocal=True`): the
prepared file (its span file beside it); the masking scheme, "mixture" (default) of
`mixture` = "token:1|phrase:1|entity:1" (ERNIE's three levels, one drawn per example with
those weights; "|" between them, as "," separates the args),
or one of them alone ("token" is BERT's basic masking, the ablation's baseline);
`runlocal` shrinks everything for a smoke test (seconds).

What differs from configs/tiny.py (BERT): the ernie family (BERT's encoder and heads; ERNIE
1.0 has no task-type table, so task_type_vocab_size=0), config.data.spans=True (the stream
lays the span tags out beside the ids) and knowledge masking: an annotated entity or phrase
is masked whole or not at all, the budget of 15% kept. NSP pairs, the WordPiece vocabulary,
size, attention guidance and schedule are tiny.py's, so the runs compare.

`size=base,phase=basic|phrase|entity`: ERNIE 1.0 at the paper's scale (Sun et al. 2019,
Sec. 3.2 and 4.1): BERT-base's shape (L12/H768/A12) with ERNIE 1.0's released fields (ReLU,
an 18,000-piece vocabulary, 513 positions, no task types; HF nghuyong/ernie-1.0-base-zh),
trained in the paper's three learning stages of knowledge masking, one run each, every run
starting from the one before (`--config.init_from`): basic-level (tokens), then
phrase-level, then entity-level masking, 15% of the tokens. The paper gives neither batch
nor steps: BERT-base's are used (batch 256 x 512, lr 1e-4 after 10k warmup steps, linear
decay, 1M steps, BERT's NSP pairs), split evenly over the stages, each its own warmup and
decay; a choice here, not ERNIE's. Its dialogue language model (DLM) is not here. bf16
compute, fp32 params and Adam state, no attention guidance:

  python -m bert_jax.train --config=configs/ernie.py:size=base,phase=basic,corpus=/data/zh.txt \
      --workdir=gs://bucket/ernie_basic   # then phase=phrase and phase=entity with init_from

`vocab` is a WordPiece vocab.txt (default: ERNIE 1.0's, runs/corpus/ernie-1.0/vocab.txt);
the corpus needs its span file (above); `tfds=NAME` is refused (a tfds dataset has no span
file), `seq=N` another row length, `runlocal=True` the same model for a smoke test.
"""
from bert_jax.files import storage
from bert_jax.configs import tiny
from bert_jax.configs.base import set_pretraining_data
from bert_jax.configs.common import (paper_scale, parse_arg, pretraining_config,
                                     recipe_data_arg, refuse_paper_args)
from bert_jax.models.config import config_for_size


def get_config(arg=None):
  arg = parse_arg(arg, corpus="runs/corpus/knowledge.txt", masking="mixture",
                  mixture="token:1|phrase:1|entity:1", size="", phase="", vocab="", tfds="",
                  seq=0, runlocal=False)
  if arg.size:
    return paper_config(arg)
  refuse_paper_args(arg, "phase", "vocab")
  config = tiny.get_config(f"corpus={arg.corpus},runlocal={arg.runlocal}")
  config.model.update(config_for_size(
      "ernie-tiny", vocab_size=config.model.vocab_size, task_type_vocab_size=0,
      layer_norm_eps=config.model.layer_norm_eps,
      max_position_embeddings=config.model.max_position_embeddings).to_json_dict())
  config.data.spans = True
  config.data.masking = arg.masking
  config.data.masking_mixture = arg.mixture.replace("|", ",") if arg.masking == "mixture" else ""
  return config


def paper_config(arg):
  """configs/ernie.py:size=base,phase=NAME (module docstring)."""
  if arg.tfds:
    raise ValueError(f"config arg tfds={arg.tfds!r}: knowledge masking reads a corpus file "
                     "with its span file beside it (corpus=PATH)")
  phase = arg.phase or "basic"
  if phase not in PHASES:
    raise ValueError(f"config arg phase={phase!r}: expected one of {list(PHASES)} (ERNIE's "
                     "stages, in order)")
  # Sec. 4.1: "the same model size as BERT-base"; ERNIE 1.0's released config fields.
  config = pretraining_config("ernie-1.0-base-zh", task_type_vocab_size=0)
  set_pretraining_data(config, recipe_data_arg(arg, seq=512))
  config.data.vocab_path = storage.absolute(arg.vocab or "runs/corpus/ernie-1.0/vocab.txt")
  config.data.spans = True
  config.data.masking = PHASES[phase]
  config.data.masking_mixture = ""
  paper_scale(config, RECIPES, arg)
  return config


def _ernie_base(config):
  """BERT-base's pretraining values (Devlin et al. 2019, Sec. A.2; configs/base.py), a third
  of its 1M steps per stage."""
  config.data.batch_size = 256
  config.data.max_predictions_per_seq = 80  # 15% of 512 is 77
  config.data.masked_lm_prob = 0.15  # Sec. 3.2: the masking budget, as BERT's
  config.num_train_steps = 1_000_000 // len(PHASES)
  config.optim.name = "adamw"
  config.optim.learning_rate = 1e-4
  config.optim.warmup_steps = 10_000
  config.optim.end_learning_rate = 0.0
  config.optim.b2 = 0.999
  config.optim.weight_decay = 0.01
  config.objectives = "mlm,nsp"


RECIPES = {"base": _ernie_base}
# ERNIE's learning stages (Sec. 3.2), in order -> the masking each one uses.
PHASES = {"basic": "token", "phrase": "phrase", "entity": "entity"}
