"""ArrayInput: per-epoch shuffling, resumption, eval padding, dynamic padding."""
import numpy as np
import pytest

from bert_jax.finetune.array_input import ArrayInput


def _features(rows=40, seq=16, choices=None, seed=0):
  """Rows of random lengths 2..seq; labels shaped like CoNLL (per token) and SQuAD (per row)."""
  rng = np.random.default_rng(seed)
  lengths = rng.integers(2, seq + 1, size=rows)
  shape = (rows, seq) if choices is None else (rows, choices, seq)
  mask = (np.arange(seq) < (lengths[:, None] if choices is None else
                            lengths[:, None, None])).astype(np.int32) * np.ones(shape, np.int32)
  return {
      "input_ids": np.where(mask == 1, rng.integers(5, 99, size=shape), 0).astype(np.int32),
      "token_type_ids": np.zeros(shape, np.int32),
      "attention_mask": mask,
      "token_labels": np.where(mask == 1, 1, -1).astype(np.int32),
      "label": np.arange(rows, dtype=np.int32),
  }, lengths


def test_epochs_reshuffle_and_resume_exactly():
  features, _ = _features()
  run = ArrayInput(features, 8, seed=3)
  batches = [next(run)["label"] for _ in range(12)]  # 5 steps/epoch: crosses 2 epochs
  assert sorted(np.concatenate(batches[:5])) == list(range(40))
  assert not np.array_equal(np.concatenate(batches[:5]), np.concatenate(batches[5:10]))
  resumed = ArrayInput(features, 8, seed=3)
  replay = ArrayInput(features, 8, seed=3)
  for _ in range(7):
    next(replay)
  resumed.restore(replay.state())
  for expected in batches[7:]:
    np.testing.assert_array_equal(next(resumed)["label"], expected)
  with pytest.raises(ValueError, match="seed=3, this run has 4"):
    ArrayInput(features, 8, seed=4).restore(replay.state())


def test_eval_batches_cover_every_row_once_and_mark_padding():
  features, _ = _features(rows=19)
  batches = list(ArrayInput(features, 8, shuffle=False).epoch_batches())
  labels = np.concatenate([b["label"][b["valid"] == 1] for b in batches])
  np.testing.assert_array_equal(labels, np.arange(19))
  assert [int(b["valid"].sum()) for b in batches] == [8, 8, 3]


@pytest.mark.parametrize("choices", [None, 4])
def test_dynamic_padding_keeps_every_real_token(choices):
  features, lengths = _features(choices=choices)
  trimmed = ArrayInput(features, 8, seed=1, pad_to_multiple_of=4)
  full = ArrayInput(features, 8, seed=1)
  widths = set()
  for _ in range(5):
    short, long = next(trimmed), next(full)
    width = short["input_ids"].shape[-1]
    widths.add(width)
    assert width % 4 == 0 or width == 16
    assert width >= lengths[long["label"]].max() > width - 4
    for key in ("input_ids", "token_type_ids", "attention_mask", "token_labels"):
      np.testing.assert_array_equal(short[key], long[key][..., :width])
      assert not long[key][..., width:].any() or key == "token_labels"
    np.testing.assert_array_equal(short["label"], long["label"])
  assert len(widths) > 1  # the batches really differ in width
  # width_examples: one batch per width a batch can have (what the trainer compiles first).
  assert widths <= set(trimmed.widths())
  expected = sorted({min(-(-n // 4) * 4, 16) for n in lengths})
  assert trimmed.widths() == expected and full.widths() == [16]
  examples = trimmed.width_examples()
  assert [e["input_ids"].shape[-1] for e in examples] == expected
  assert all(e["label"].shape == (8,) and e["token_labels"].shape[-1] == e["input_ids"].shape[-1]
             for e in examples)


def test_dynamic_padding_gives_every_process_the_same_width():
  features, _ = _features(rows=64)
  per_process = [ArrayInput(features, 16, seed=2, process_index=p, process_count=4,
                            pad_to_multiple_of=2) for p in range(4)]
  whole = ArrayInput(features, 16, seed=2, pad_to_multiple_of=2)
  for _ in range(4):
    widths = {next(run)["input_ids"].shape[1] for run in per_process}
    assert widths == {next(whole)["input_ids"].shape[1]}


@pytest.mark.parametrize("choices", [None, 4])
def test_eval_batches_are_cut_to_their_real_rows_width(choices):
  features, lengths = _features(rows=19, choices=choices)
  cut = list(ArrayInput(features, 8, shuffle=False, pad_to_multiple_of=4).epoch_batches())
  full = list(ArrayInput(features, 8, shuffle=False).epoch_batches())
  for start, short, long in zip(range(0, 19, 8), cut, full):
    width = short["input_ids"].shape[-1]
    real = lengths[start:start + 8]  # the last batch's padding rows (row 0) do not count
    assert width == min(-(-real.max() // 4) * 4, 16)
    for key in ("input_ids", "attention_mask", "token_labels"):
      np.testing.assert_array_equal(short[key], long[key][..., :width])
    np.testing.assert_array_equal(short["valid"], long["valid"])
  assert len({b["input_ids"].shape[-1] for b in cut}) > 1


def test_cut_eval_outputs_pad_back_to_the_full_width():
  from bert_jax.finetune.array_input import pad_sequence_outputs
  chunks = [{"logits": np.ones((2, 4, 3)), "label": np.zeros(2)},
            {"logits": np.ones((1, 8, 3)), "label": np.zeros(1)}]
  padded = pad_sequence_outputs(chunks, ("logits",), 8, -5.0)
  assert [c["logits"].shape for c in padded] == [(2, 8, 3), (1, 8, 3)]
  assert (padded[0]["logits"][:, 4:] == -5.0).all() and (padded[0]["logits"][:, :4] == 1).all()
  assert padded[1]["label"].shape == (1,)


@pytest.mark.slow
@pytest.mark.parametrize("config_name,arg,seq", [("conll", "runlocal=True", 32),
                                                 ("squad", "version=2.0,runlocal=True", 256),
                                                 ("glue", "dataset=sst2,runlocal=True", 32)])
def test_cut_eval_batches_score_as_full_width_ones(tokenizer, config_name, arg, seq):
  """The task's evaluate with eval batches cut to their width (pad_to_multiple_of) gives the
  per-token and per-example outputs and the official scores of max_seq_length batches."""
  import importlib

  import jax

  from bert_jax.run import tasks
  from bert_jax.models.config import BertConfig
  config = importlib.import_module(f"configs.{config_name}").get_config(arg)
  config.data.eval_batch_size = 8
  config.data.max_seq_length = seq  # SQuAD: windows shorter than the length, to cut
  model_config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=16,
                            num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
                            max_position_embeddings=config.data.max_seq_length)
  evaluations, widths = [], set()
  for multiple in (0, 8):
    config.data.pad_to_multiple_of = multiple
    task = tasks.make_task(config, model_config)
    model = task.build_model()
    inputs = task.make_inputs(tokenizer, 0, 1)
    params = model.init(jax.random.key(0), **task.example_inputs(1))["params"]
    run_eval = jax.jit(lambda p, b: task.eval_outputs(
        task.forward(model, p, b, deterministic=True), b))

    def run(batch):
      widths.add(batch["input_ids"].shape[-1])
      return run_eval(params, batch)
    evaluations.append(task.evaluate(run, inputs))
  assert min(widths) < config.data.max_seq_length  # some batches were cut
  full, cut = evaluations
  real = inputs.eval.features["attention_mask"] > 0  # per-token outputs: real positions
  assert full.outputs.keys() == cut.outputs.keys()
  for key, want in full.outputs.items():
    got = cut.outputs[key]
    if key in task.sequence_outputs:
      got, want = got[real], want[real]
    np.testing.assert_allclose(got, want, atol=2e-5, err_msg=key)
  assert cut.metrics == pytest.approx(full.metrics, abs=1e-6)
