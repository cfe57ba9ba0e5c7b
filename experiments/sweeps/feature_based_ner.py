r"""BERT Table 7 at CPU scale: a frozen encoder's six feature choices against fine-tuning.

Devlin et al. (2019), Table 7 (BERT-base, CoNLL-2003 NER dev F1; the features of a frozen
BERT into a two-layer 768-dimensional BiLSTM): embeddings only 91.0, second-to-last hidden
95.6, last hidden 94.9, weighted sum of the last four 95.9, concatenation of the last four
96.1, weighted sum of all twelve layers 95.5; fine-tuning 96.4. Each feature choice here is
a frozen run, fine-tuning the whole model is `finetune` (the recipes:
experiments/sweeps/_frozen.py), for two encoders:

  minilm  all-MiniLM-L6-v2, the configs' default init_from (L6/H384);
  mini    BERT-Mini's shape (L4/H256) pretrained here: configs/tiny.py's recipe at lr 1e-3
          (bert_model_size's l4_h256_lr1e3), 1,000 steps on the prepared corpus (PREPARE).

BERT-base's twelve layers map to fewer by position from the top, so "second-to-last" and
"last four" keep their meaning: second-to-last is -2 (MiniLM layer 5, Mini layer 3), the
last four -4..-1 (MiniLM layers 3-6, two thirds of its depth against BERT-base's third;
Mini layers 1-4, all of them), "all layers" every transformer layer, not the embeddings
(MiniLM 1-6; Mini 1-4, the last four's set, so Mini has no `wsum_all` run: its number
would be `wsum_last4`'s). The weighted sums are ELMo's learned scalar mix
(config.feature_mix=scalar_mix). Data: 2,000 random CoNLL-2003 training sentences (the
subset's seed is the run's), seq 64, scored on the whole validation set (entity F1).

  python -m experiments.run feature_based_ner                   # every run without a row
  python -m experiments.run feature_based_ner minilm_last_s0    # one run
  python -m experiments.tables feature_based_ner                # the per-run table
  python -m experiments.report                                  # the page's section

The paper's direction: fine-tuning above every feature choice, the concatenated top four
the best of those (0.3 below fine-tuning) and the embeddings alone far below (-5.4); the
verdict here reads fine-tuning against the embeddings, and concat_last4 against them.
"""
from experiments import tables
from experiments.sweeps import _frozen as frozen

CONFIG = "configs/conll.py:train_examples=2000"
MINI = "runs/feature_based_ner_mini"
# The Mini encoder, pretrained when a run to do reads it; it reads the prepared corpus and
# its 8k vocabulary (the ablation sweeps' PREPARE, e.g. `python -m experiments.run
# bert_objectives --print`, names their commands), which the MiniLM runs do not need.
PREPARE = (
    (f"{MINI}/eval_results.json",
     "python -m bert_jax.train --config=configs/tiny.py:vocab=runs/corpus/vocab-8k.txt "
     "--config.model.num_hidden_layers=4 --config.model.hidden_size=256 "
     "--config.model.num_attention_heads=4 --config.model.intermediate_size=1024 "
     "--config.optim.learning_rate=1e-3 --config.num_train_steps=1000 "
     f"--config.data.max_seq_length=64 --workdir={MINI}"),
)
METRICS = frozen.METRICS
# Encoder -> (init_from overrides, its name on the page, its transformer layers).
ENCODERS = {"minilm": ({}, "all-MiniLM-L6-v2 (L6/H384)", 6),
            "mini": ({"init_from": MINI}, "BERT-Mini shape (L4/H256), pretrained here", 4)}
# Choice -> (its overrides for an encoder of L layers, its name, the paper's dev F1).
CHOICES = {
    "embeddings": (lambda layers: frozen.frozen("0"), "embeddings only", 91.0),
    "second_to_last": (lambda layers: frozen.frozen("-2"), "second-to-last hidden", 95.6),
    "last": (lambda layers: frozen.frozen("-1"), "last hidden", 94.9),
    "wsum_last4": (lambda layers: frozen.frozen("-4,-3,-2,-1", "scalar_mix"),
                   "weighted sum of the last four", 95.9),
    "concat_last4": (lambda layers: frozen.frozen("-4,-3,-2,-1"),
                     "concatenation of the last four", 96.1),
    "wsum_all": (lambda layers: frozen.frozen(",".join(str(i) for i in range(1, layers + 1)),
                                              "scalar_mix"),
                 "weighted sum of all layers", 95.5),
    "finetune": (lambda layers: frozen.FINETUNE, "fine-tuning", 96.4),
}
PATH = ("eval_f1",)
VERDICTS = (("embeddings", "finetune"), ("embeddings", "concat_last4"))


def _choices(encoder: str) -> list[str]:
  """The encoder's choices (an L4 encoder's "all layers" are its last four)."""
  return [c for c in CHOICES if not (c == "wsum_all" and ENCODERS[encoder][2] <= 4)]


def get_sweep():
  runs = {}
  for encoder, (init, _, layers) in ENCODERS.items():
    for choice in _choices(encoder):
      runs.update(frozen.seeded(f"{encoder}_{choice}", CONFIG,
                                {"data.max_seq_length": 64, **init,
                                 **CHOICES[choice][0](layers)}))
  return runs


COLUMNS = frozen.COLUMNS


def render(rows: list[dict], plots_dir: str) -> str:
  """The page's section: per encoder, each choice's dev F1 beside the paper's, then the
  verdicts and the plot."""
  lines = []
  for encoder, (_, title, _) in ENCODERS.items():
    choices = _choices(encoder)
    lines += [f"{title}:", "", tables.markdown((
        ("features (BiLSTM head) or fine-tuning", lambda c: CHOICES[c][1]),
        ("seeds", lambda c: frozen.seeds_cell(rows, f"{encoder}_{c}")),
        ("CoNLL-2003 dev F1 here", lambda c: frozen.cell(rows, f"{encoder}_{c}", PATH)),
        ("paper (BERT-base)", lambda c: f"{CHOICES[c][2]:.1f}")), choices), ""]
    for worse, better in VERDICTS:
      said = frozen.direction(rows, f"{encoder}_{worse}", f"{encoder}_{better}", PATH)
      lines.append(f"- **{title}, {CHOICES[better][1]} above {CHOICES[worse][1]} (paper "
                   f"{CHOICES[better][2]} vs {CHOICES[worse][2]}): {said}.**")
    lines.append("")
  lines.append("Paper: Devlin et al. 2019, Table 7 (BERT-base, CoNLL-2003 NER dev F1). Runs: "
               "`python -m experiments.run feature_based_ner`; per run: "
               "`python -m experiments.tables feature_based_ner`.")
  plot = frozen.bars(plots_dir, "feature_based_ner", rows, {
      title: {c: (f"{encoder}_{c}", PATH) for c in _choices(encoder)}
      for encoder, (_, title, _) in ENCODERS.items()},
      {title: {c: CHOICES[c][2] for c in CHOICES} for _, title, _ in ENCODERS.values()})
  return "\n".join(lines + (["", plot] if plot else []))
