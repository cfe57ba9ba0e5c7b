"""The family configs' paper-scale variants (`configs/NAME.py:size=...`) hold their papers'
key values, so that a drift fails here; `runlocal` keeps each architecture; bad arguments
are refused in one line. No compiler: configs/NAME.py is only parsed (tests/test_targets.py
compiles each variant for a TPU)."""
import importlib

import pytest

from bert_jax.models import families
from bert_jax.models.config import BertConfig

# (config, size) -> the paper's values: family, model shape (L, H, A, E), vocabulary (kind,
# size), rows (batch, seq, predictions), steps, optimizer (name, peak lr, warmup, b2, eps,
# weight decay, clipping), objectives.
PAPER = {
    ("roberta", "base"): dict(
        family="roberta", shape=(12, 768, 12, None), vocab=("bpe", 50265),
        rows=(8192, 512, 80), steps=500_000,
        optim=("adamw", 6e-4, 24_000, 0.98, 1e-6, 0.01, 0.0), objectives="mlm"),
    **{("electra", size): dict(
        family="electra", shape=shape, vocab=("wordpiece", 30522), rows=rows, steps=steps,
        optim=("adamw", lr, 10_000, 0.999, 1e-6, 0.01, 1.0), objectives="mlm:1,rtd:50")
       for size, shape, rows, steps, lr in (
           ("small", (12, 256, 4, 128), (128, 128, 19), 1_000_000, 5e-4),
           ("base", (12, 768, 12, 768), (256, 512, 79), 766_000, 2e-4),
           ("large", (24, 1024, 16, 1024), (2048, 512, 130), 400_000, 2e-4))},
    **{("albert", size): dict(
        family="albert", shape=shape, vocab=("sentencepiece", 30000), rows=(4096, 512, 20),
        steps=125_000, optim=("lamb", 0.00176, 3125, 0.999, 1e-6, 0.01, 1.0),
        objectives="mlm,sop")
       for size, shape in (("base", (12, 768, 12, 128)), ("large", (24, 1024, 16, 128)),
                           ("xxlarge", (12, 4096, 64, 128)))},
    **{("spanbert", size): dict(
        family="bert", shape=shape, vocab=("wordpiece", 28996), rows=(256, 512, 80),
        steps=2_400_000, optim=("adamw", 1e-4, 10_000, 0.999, 1e-8, 0.01, 1.0),
        objectives="mlm,sbo")
       for size, shape in (("base", (12, 768, 12, None)), ("large", (24, 1024, 16, None)))},
    # Phase 1 (1,024 tokens) and the context extension (8,192): 1.719T and 300B tokens.
    **{("modernbert", size + phase): dict(
        family="modernbert", shape=shape, vocab=("tokenizer_json", 50368), rows=rows, steps=steps,
        optim=("stableadamw", lr, warmup, 0.98, 1e-6, 1e-5 / lr, 0.0), objectives="mlm",
        schedule=("wsd", end))
       for size, phase, shape, rows, steps, lr, warmup, end in (
           ("base", "", (22, 768, 12, None), (4608, 1024, 307), 364_304, 8e-4, 636, 8e-4),
           ("large", "", (28, 1024, 16, None), (4928, 1024, 307), 340_648, 5e-4, 397, 5e-4),
           ("base", ",phase=2", (22, 768, 12, None), (576, 8192, 2457), 63_579, 3e-4, 0,
            0.0))},
    ("ernie", "base"): dict(
        family="ernie", shape=(12, 768, 12, None), vocab=("wordpiece", 18000),
        rows=(256, 512, 80), steps=333_333, optim=("adamw", 1e-4, 10_000, 0.999, 1e-6, 0.01, 1.0),
        objectives="mlm,nsp"),
    ("distilbert", "base"): dict(
        family="distilbert", shape=(6, 768, 12, None), vocab=("wordpiece", 30522),
        rows=(4096, 512, 80), steps=6_100, optim=("adamw", 5e-4, 0, 0.999, 1e-6, 0.0, 5.0),
        objectives="distill:5,mlm:2,cosine:1"),
    ("reformer", "enwik8"): dict(
        family="reformer", shape=(12, 1024, 8, None), vocab=("sentencepiece", 258),
        rows=(8, 65536, 9830), steps=100_000, optim=("adamw", 7e-4, 2_000, 0.98, 1e-9, 0.0, 0.0),
        objectives="mlm"),
}
# ELECTRA's generator widths (fraction of the discriminator's) and masking rates.
ELECTRA = {"small": (0.25, 0.15), "base": (1 / 3, 0.15), "large": (0.25, 0.25)}


def _config(name, arg):
  return importlib.import_module(f"configs.{name}").get_config(arg)


@pytest.mark.parametrize("name,size", sorted(PAPER))
def test_paper_variant_has_the_papers_values(name, size):
  want, config = PAPER[name, size], _config(name, f"size={size}")
  model = BertConfig(**config.model)  # a valid model config
  assert model.family == want["family"]
  assert (model.num_hidden_layers, model.hidden_size, model.num_attention_heads,
          model.embedding_size) == want["shape"]
  kind, vocab_size = want["vocab"]
  assert config.data.tokenizer == "" and families.tokenizer_kinds(model.family)[0] == kind
  assert model.vocab_size == vocab_size
  assert (config.data.batch_size, config.data.max_seq_length,
          config.data.max_predictions_per_seq) == want["rows"]
  assert config.num_train_steps == want["steps"] and config.grad_accum_steps == 1
  optim = config.optim
  assert (optim.name, optim.learning_rate, optim.warmup_steps, optim.b2, optim.eps,
          optim.weight_decay, optim.grad_clip_norm) == want["optim"]
  assert (optim.schedule, optim.end_learning_rate, optim.b1) == (
      *want.get("schedule", ("linear", 0.0)), 0.9)
  assert config.objectives == want["objectives"]
  # Paper scale: dynamic masking, bf16 compute over fp32 params, no CPU-scale aid.
  assert config.data.dupe_factor == 0 and model.dtype == "bfloat16"
  assert config.attention_guidance.weight == 0.0 and model.projection_init == "normal"
  assert model.max_position_embeddings >= config.data.max_seq_length


def test_each_familys_own_choices():
  roberta = _config("roberta", "size=base")
  assert (roberta.data.example_builder, roberta.data.lower_case, roberta.data.masking) == (
      "full_sentences", False, "token")
  assert roberta.model.hidden_dropout_prob == roberta.model.attention_probs_dropout_prob == 0.1
  for size, (fraction, masked) in ELECTRA.items():
    config = _config("electra", f"size={size}")
    assert config.task == "electra" and config.electra.generator_fraction == fraction
    assert config.data.masked_lm_prob == masked and config.electra.temperature == 1.0
    assert config.data.vocab_path.endswith("bert/uncased_L-12_H-768_A-12/vocab.txt")
  for size in ("base", "large", "xxlarge"):
    albert = _config("albert", f"size={size}")
    assert (albert.data.example_builder, albert.data.masking, albert.data.short_seq_prob,
            albert.data.lower_case) == ("sop", "ngram", 0.1, True)
    assert (albert.model.layer_sharing, albert.model.hidden_act,
            albert.model.hidden_dropout_prob, albert.model.attention_probs_dropout_prob) == (
                "all", "gelu_tanh", 0.0, 0.0)



def test_the_other_members_own_choices():
  from bert_jax.pretrain import selectors
  for size in ("base", "large"):
    span = _config("spanbert", f"size={size}")
    assert (span.data.example_builder, span.data.masking, span.data.lower_case,
            span.data.masked_lm_prob) == ("doc_sentences", "span", False, 0.15)
    assert span.data.vocab_path.endswith("bert/cased_L-12_H-768_A-12/vocab.txt")
    assert span.model.hidden_dropout_prob == span.model.attention_probs_dropout_prob == 0.1
  # Joshi et al. 2020, Sec. 3.1: geometric(0.2) span lengths clipped at 10 words.
  assert (selectors.SPAN_GEOMETRIC_P, selectors.SPAN_MAX_WORDS) == (0.2, 10)
  for arg, theta in (("size=base", 10_000.0), ("size=large", 10_000.0),
                     ("size=base,phase=2", 160_000.0)):
    modern = _config("modernbert", arg)
    assert (modern.model.local_attention, modern.model.global_attn_every_n_layers,
            modern.model.local_rope_theta, modern.model.global_rope_theta) == (
                128, 3, 10_000.0, theta)
    assert (modern.data.masked_lm_prob, modern.data.packing, modern.data.lower_case,
            modern.data.example_builder) == (0.3, True, False, "full_sentences")
    assert modern.model.hidden_dropout_prob == modern.model.attention_probs_dropout_prob == 0
  assert _config("modernbert", "size=large").model.intermediate_size == 2624
  # Phase 2: 300B tokens, the last 50B decaying; phase 1's 4,608 x 1,024 tokens per step.
  phase_2 = _config("modernbert", "size=base,phase=2")
  assert phase_2.optim.decay_fraction == 50 / 300
  assert phase_2.data.batch_size * 8192 == 4608 * 1024
  for phase, masking in (("basic", "token"), ("phrase", "phrase"), ("entity", "entity")):
    ernie = _config("ernie", f"size=base,phase={phase}")
    assert (ernie.data.masking, ernie.data.masking_mixture, ernie.data.spans) == (
        masking, "", True)
    assert (ernie.model.hidden_act, ernie.model.task_type_vocab_size) == ("relu", 0)
  distil = _config("distilbert", "size=base,teacher=/models/bert-base-uncased")
  assert (distil.distillation.teacher, distil.distillation.student_layers,
          distil.distillation.temperature) == ("/models/bert-base-uncased", "0,2,4,7,9,11", 2.0)
  assert (distil.optim.warmup_fraction, distil.data.example_builder) == (0.05, "full_sentences")
  reformer = BertConfig(**_config("reformer", "size=enwik8").model)
  assert reformer.attn_layers == ("local", "local", "lsh", "local") * 3
  assert (reformer.axial_pos_shape, reformer.axial_pos_embds_dim) == ((128, 512), (256, 768))
  assert (reformer.num_hashes, reformer.num_buckets, reformer.lsh_attn_chunk_length,
          reformer.local_attn_chunk_length, reformer.attention_head_size) == (4, 512, 256, 128, 128)
  assert reformer.max_position_embeddings == 65536 and reformer.reversible
  assert (reformer.chunk_size_feed_forward, reformer.lsh_attention_groups) == (4096, 16)
  shorter = BertConfig(**_config("reformer", "size=enwik8,seq=1280").model)  # 20 LSH chunks
  assert (shorter.chunk_size_feed_forward, shorter.lsh_attention_groups) == (256, 4)


@pytest.mark.parametrize("name,size", sorted(PAPER))
def test_runlocal_keeps_the_architecture_and_shrinks_the_run(name, size):
  full, local = _config(name, f"size={size}"), _config(name, f"size={size},runlocal=True")
  assert local.model.to_dict() == full.model.to_dict()
  assert local.objectives == full.objectives and local.optim.name == full.optim.name
  assert (local.data.batch_size, local.data.max_seq_length, local.num_train_steps,
          local.grad_accum_steps) == (8, 64, 20, 1)


def test_arguments_choose_data_length_and_vocabulary(tmp_path):
  config = _config("roberta", f"size=base,tfds=wikipedia/20230601.en,seq=128,vocab={tmp_path},"
                   "vocab_size=50000")
  assert (config.data.tfds_name, config.data.max_seq_length) == ("wikipedia/20230601.en", 128)
  assert (config.data.vocab_path, config.model.vocab_size) == (str(tmp_path), 50000)
  assert _config("albert", "size=large,sharing=none").model.layer_sharing == "none"


@pytest.mark.parametrize("name,arg,match", [
    ("roberta", "size=large", r"size='large': expected one of \['base'\]"),
    ("electra", "size=xl", r"expected one of \['base', 'large', 'small'\]"),
    ("albert", "size=xlarge", r"expected one of \['base', 'large', 'xxlarge'\]"),
    ("electra", "seq=512", "seq=512.* needs a paper-scale size="),
    ("roberta", "tfds=wikipedia", "tfds='wikipedia' needs a paper-scale size="),
    ("modernbert", "size=base,phase=3", r"phase=3: expected one of \[1, 2\]"),
    ("modernbert", "phase=2", r"phase=2 needs a paper-scale size= \(the CPU recipe does not"),
    ("ernie", "size=base,phase=word", r"phase='word': expected one of \['basic', 'phrase'"),
    ("ernie", "size=base,tfds=wikipedia", "knowledge masking reads a corpus file"),
    ("spanbert", "vocab=/x/vocab.txt", "vocab='/x/vocab.txt' needs a paper-scale size="),
    ("reformer", "size=64k", r"expected one of \['enwik8'\]"),
    ("distilbert", "size=large", r"expected one of \['base'\]"),
])
def test_bad_recipe_arguments_are_refused(name, arg, match):
  with pytest.raises(ValueError, match=match):
    _config(name, arg)
