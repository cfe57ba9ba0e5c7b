r"""Every family pretrains from scratch here and fine-tunes on SST-2 through the same CLI.

Each family's tiny config (configs/tiny.py for BERT, roberta.py, albert.py, spanbert.py,
electra.py, distilbert.py, modernbert.py) pretrains on the prepared corpus for STEPS steps
of 32 rows of 64 tokens (ELECTRA and ALBERT longer: STEPS_OF; ALBERT at 4 layers:
CHANGES_OF), its own recipe otherwise (vocabulary,
example builder, masking and its rate, objectives), and is scored on 20 held-out documents
by its own pretraining metric: MLM accuracy for all but ELECTRA (whose "mlm" is its
generator's), SOP accuracy (ALBERT), SBO accuracy (SpanBERT), the discriminator's accuracy
beside the all-original baseline (ELECTRA). DistilBERT's
teacher is this sweep's BERT run (it runs first). The `sst2` stage then fine-tunes the
pretrained workdir on 4,000 SST-2 training sentences (3 epochs, seq 64, lr 5e-4: the
ablation sweeps' sst2 stage, experiments/sweeps/_ablation.py) and scores SST-2 dev against
the majority class (50.92%). ModernBERT's row is its recipe (configs/modernbert.py: MLM at
30%, full rows, RoPE + GeGLU + local/global layers, a byte-level BPE), so its MLM accuracy
is over twice as many (and so harder: less context) masked positions as the others'.
Each run is several pretraining + fine-tuning minutes on 2 quiet cores, far more when shared.

  python -m experiments.run family_pretraining   # PREPARE learns the BPE / SentencePiece vocabs
  python -m experiments.tables family_pretraining
  python -m experiments.report                    # its section of experiments/README.md
"""
import re

from experiments import tables
from experiments.sweeps import _ablation as ablation

STEPS = 300
# A family that needs more steps to show its objective at all: ELECTRA's discriminator sits
# at the all-original baseline until its generator is past the unigram stage (quiet machine,
# 1,500-step run, held-out: 0.7620 = baseline at step 250, 0.7705 vs 0.7678 at 750, 0.7842
# vs 0.7774 at 1,250; configs/electra.py's docstring). ALBERT's one shared layer: its SOP
# head is at chance at step 250 and leaves it by 750 (albert_sharing's all_s0 at 64 tokens,
# 320 held-out pairs: 51.25 / 61.25 / 66.88% at steps 250 / 750 / 1,000).
STEPS_OF = {"electra": 1500, "albert": 1000}
# A family whose run changes its config beyond the steps. ALBERT-Tiny at L4: its layers
# share one set of params, so the four are the same 2.2 M params as two, at twice the
# compute. At L2 its SOP head stayed at chance (50.63% of the held-out pairs at step 1,000,
# held-out MLM 6.81%); at L4 (a one-off run of this command with eval_every_steps=250 and
# 10 eval batches, 2026-11-27, de00716) SOP reads 50.63 / 64.38 / 70.63 / 69.38% at steps 250 / 500
# / 750 / 1,000, as albert_sharing's L4 all-shared run did on WordPiece (66.88%).
CHANGES_OF = {"albert": {"model.num_hidden_layers": 4}}
MAJORITY = 444 / 872

PREPARE = ablation.PREPARE[:1] + (
    ("runs/corpus/bpe-8k/vocab.json",
     "python -m bert_jax.text.learn_vocab --kind=bpe --input=runs/corpus/pretrain.txt "
     "--vocab_size=8192 --output=runs/corpus/bpe-8k"),
    ("runs/corpus/spm-8k",
     "python -m bert_jax.text.learn_vocab --kind=sentencepiece "
     "--input=runs/corpus/pretrain.txt --vocab_size=8192 --output=runs/corpus/spm-8k"),
)

# family -> (its pretraining config, the held-out metric that is its own objective's)
FAMILIES = {
    "bert": ("configs/tiny.py", "eval_mlm_accuracy"),
    "distilbert": ("configs/distilbert.py:teacher=runs/family_pretraining/bert",
                   "eval_mlm_accuracy"),
    "roberta": ("configs/roberta.py", "eval_mlm_accuracy"),
    "albert": ("configs/albert.py", "eval_sop_accuracy"),
    "spanbert": ("configs/spanbert.py", "eval_sbo_accuracy"),
    "electra": ("configs/electra.py", "eval_rtd_accuracy"),
    "modernbert": ("configs/modernbert.py", "eval_mlm_accuracy"),
}
METRICS = {"eval_results.json": (
    "step", "eval_mlm_accuracy", "eval_mlm_loss", "eval_sop_accuracy", "eval_sbo_accuracy",
    "eval_rtd_accuracy", "eval_rtd_baseline_accuracy", "eval_rtd_replaced_accuracy",
    "eval_rtd_precision", "eval_distill_loss")}
STAGES = {"sst2": ablation.STAGES["sst2"]}


def get_sweep():
  def overrides(family):
    steps = STEPS_OF.get(family, STEPS)
    return {"num_train_steps": steps, "data.max_seq_length": 64, "eval_every_steps": 0,
            "checkpoint_every_steps": steps, "data.eval_held_out_docs": 20, "eval_batches": 0,
            **CHANGES_OF.get(family, {})}
  return {family: {"config": config, "overrides": overrides(family), "stages": STAGES}
          for family, (config, _) in FAMILIES.items()}


def _percent(value) -> str:
  return "" if value is None else f"{100 * value:.2f}"


def _own_metric(row) -> str:
  """The family's own held-out metric, named (ELECTRA's beside its all-original baseline)."""
  metrics = row["metrics"]
  key = FAMILIES[row["run"]][1]
  text = f"{key.removeprefix('eval_')} {_percent(metrics.get(key))}"
  if "eval_rtd_baseline_accuracy" in metrics:
    text += f" (all-original {_percent(metrics['eval_rtd_baseline_accuracy'])})"
  return text


def _sst2(row):
  return row["metrics"].get("sst2", {}).get("eval_accuracy")


COLUMNS = (
    ("family (tiny, pretrained from scratch)", lambda row: row["run"]),
    ("pretraining steps", lambda row: str(row["metrics"].get("step", ""))),
    ("model changed from its config", lambda row: ", ".join(  # as the row's command ran
        "=".join(pair) for pair in re.findall(r"--config\.model\.(\w+)=(\S+)", row["command"]))),
    ("own held-out metric (%)", _own_metric),
    ("held-out MLM acc (%)", lambda row: _percent(row["metrics"].get("eval_mlm_accuracy"))),
    ("SST-2 dev acc (%)", lambda row: _percent(_sst2(row))),
    ("above the majority class (50.92%)",
     lambda row: "" if _sst2(row) is None else ("yes" if _sst2(row) > MAJORITY else "no")),
)


def render(rows, plots_dir) -> str:
  """The results page's section: COLUMNS' table of the rows."""
  del plots_dir  # a table only
  return tables.markdown(COLUMNS, rows)
