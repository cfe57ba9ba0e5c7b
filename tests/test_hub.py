"""Models by Hub id (bert_jax/files/hub.py), against a Hub-shaped server on 127.0.0.1
(tests/hub_server.py) serving random HF models with their tokenizers: load by id (`org/name`,
`@revision`, a bare legacy name) with HF's outputs, a short fine-tuning run with
init_from=id that records the commit, the same from the filled cache offline with the
server stopped, and one line for an unknown id, a gated repo and an empty offline cache.

huggingface_hub reads HF_ENDPOINT, HF_HOME and HF_HUB_OFFLINE when imported, so each case
runs as a program of its own with them set (HF_HOME a tmp folder)."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from bert_jax.files import hub  # noqa: E402
from bert_jax.models.config import BertConfig  # noqa: E402
from bert_jax.weights import load_pretrained  # noqa: E402
from tests.helpers.hf_reference import hf_config  # noqa: E402
from tests.helpers.hub_server import HubServer  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL = 1e-5
CONFIG = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=2, intermediate_size=37, max_position_embeddings=64)
IDS = np.array([[101, 7592, 2088, 102, 0, 0], [101, 2023, 2003, 1037, 3231, 102]], np.int32)


@pytest.fixture(scope="module")
def folders(tmp_path_factory, vocab_path):
  """{"tiny": an HF BertForMaskedLM folder with its tokenizer (tokenizer.json, as
  transformers 5 saves it), "bin": the same with pytorch_model.bin instead of safetensors},
  and the HF model's MLM logits on IDS."""
  root = tmp_path_factory.mktemp("hub_repos")
  torch.manual_seed(0)
  model = transformers.BertForMaskedLM(hf_config(CONFIG)).eval()
  tiny, bin_only = str(root / "tiny"), str(root / "bin")
  model.save_pretrained(tiny)
  vocab = root / "vocab"  # transformers 5's BertTokenizerFast takes no vocab_file: a folder
  vocab.mkdir()
  shutil.copyfile(vocab_path, vocab / "vocab.txt")
  transformers.BertTokenizerFast.from_pretrained(str(vocab)).save_pretrained(tiny)
  shutil.copytree(tiny, bin_only)
  os.remove(os.path.join(bin_only, "model.safetensors"))
  torch.save(model.state_dict(), os.path.join(bin_only, "pytorch_model.bin"))
  with torch.no_grad():
    logits = model(input_ids=torch.tensor(IDS, dtype=torch.long),
                   attention_mask=torch.tensor((IDS > 0).astype(np.int64))).logits.numpy()
  return {"tiny": tiny, "bin": bin_only, "logits": logits}


@pytest.fixture
def server(folders):
  hub_server = HubServer()
  hub_server.add("org/tiny-bert", folders["tiny"], tags=("v1",))
  hub_server.add("tiny-bert-legacy", folders["tiny"])
  hub_server.add("org/bin-only", folders["bin"])
  hub_server.add("org/gated", folders["tiny"], gated=True)
  yield hub_server
  hub_server.stop()


def _env(home, server=None, offline=False) -> dict:
  env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
  env.update(HF_HOME=str(home), HF_HUB_DISABLE_PROGRESS_BARS="1",
             HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_OFFLINE="1" if offline else "0",
             HF_ENDPOINT=server.url if server else "http://127.0.0.1:9")  # nothing there
  return env


def _run(args, env, timeout=600):
  result = subprocess.run([sys.executable, *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=timeout)
  return result


def _assert_mlm_logits(logits_file, folders):
  ours = np.load(logits_file)
  real = (IDS > 0)[..., None]
  assert (np.abs(ours - folders["logits"]) * real).max() < TOL


def test_what_looks_like_a_hub_id(tmp_path):
  assert hub.parse("org/name") == ("org/name", "main")
  assert hub.parse("bert-base-uncased") == ("bert-base-uncased", "main")
  assert hub.parse("org/name@v1.0") == ("org/name", "v1.0")
  assert hub.parse("org/name@refs/pr/3") == ("org/name", "refs/pr/3")
  for path in ("/abs/model", "./model", "~/model", "a/b/c", "model.ckpt", "run/config.json",
               "../model", ""):
    assert hub.parse(path) is None, path
  (tmp_path / "org").mkdir()
  (tmp_path / "org" / "name").mkdir()
  os.chdir(tmp_path)
  try:
    assert not hub.is_hub_id("org/name")  # a local folder wins
    assert hub.locate("org/name") == ("org/name", None)
  finally:
    os.chdir(ROOT)


LOAD_BY_ID = """
import sys, numpy as np
from bert_jax import weights
from bert_jax.models.families import tokenizer_kinds
from bert_jax.text.tokenizers import model_tokenizer
ids = np.array({ids})
for n, name in enumerate(sys.argv[2:]):
  source = weights.resolve(name)
  model, variables = weights.load_pretrained(name)
  tokenizer = model_tokenizer(name, tokenizer_kinds("bert"))
  assert tokenizer.vocab_size == 30522, tokenizer.vocab_size
  np.save(f"{{sys.argv[1]}}/{{n}}.npy", np.asarray(model.apply(variables, ids, None, ids > 0).mlm_logits))
  print(name, source.hub.commit, source.hub.revision, source.path)
"""


@pytest.mark.slow
def test_a_model_loads_by_id_revision_and_legacy_name(server, folders, tmp_path):
  """One program loads org/tiny-bert, org/tiny-bert@v1 and tiny-bert-legacy, each fetched
  once (its weights and tokenizer from one snapshot), with HF's MLM logits."""
  names = ["org/tiny-bert", "org/tiny-bert@v1", "tiny-bert-legacy"]
  result = _run(["-c", LOAD_BY_ID.format(ids=IDS.tolist()), str(tmp_path), *names],
                _env(tmp_path / "hf_home", server))
  assert result.returncode == 0, result.stderr
  commit = server.repos["org/tiny-bert"].sha
  lines = [line.split() for line in result.stdout.splitlines() if line.startswith(tuple(names))]
  assert [line[:3] for line in lines] == [[names[0], commit, "main"], [names[1], commit, "v1"],
                                          [names[2], commit, "main"]]
  snapshot = tmp_path / "hf_home" / "hub" / "models--org--tiny-bert" / "snapshots" / commit
  assert lines[0][3] == str(snapshot)
  assert sorted(os.listdir(snapshot)) == ["config.json", "model.safetensors", "tokenizer.json",
                                          "tokenizer_config.json"]
  for n in range(3):
    _assert_mlm_logits(tmp_path / f"{n}.npy", folders)
  infos = [r for r in server.requests if r.startswith("GET /api/models/org/tiny-bert/revision/")]
  assert infos == ["GET /api/models/org/tiny-bert/revision/main",
                   "GET /api/models/org/tiny-bert/revision/v1"], server.requests


@pytest.mark.slow
def test_a_bin_only_repo_fetches_its_bin_and_converts_by_id(server, folders, tmp_path):
  """No safetensors at the revision: the .bin is fetched; the loader names the convert
  command, and `bert_jax.commands.convert --input=ID` writes model.safetensors."""
  env = _env(tmp_path / "hf_home", server)
  refused = _run(["-m", "bert_jax.commands.fill_mask", "--model=org/bin-only", "a [MASK] ."], env)
  lines = refused.stderr.strip().splitlines()
  assert refused.returncode == 1 and len(lines) == 1, refused.stderr
  assert lines[0] == ("bert_jax.commands.fill_mask: error: org/bin-only@main: the Hub model has only "
                      "pytorch_model.bin; pickle files are not loaded. Convert it to "
                      "model.safetensors first: python -m bert_jax.commands.convert "
                      "--input=org/bin-only@main --output=NEW_FOLDER"), lines[0]
  out = tmp_path / "converted"
  result = _run(["-m", "bert_jax.commands.convert", "--input=org/bin-only@main", f"--output={out}"],
                env)
  assert result.returncode == 0, result.stderr
  assert sorted(os.listdir(out)) == ["config.json", "model.safetensors", "tokenizer.json",
                                     "tokenizer_config.json"]
  model, variables = load_pretrained(str(out))
  mask = (IDS > 0).astype(np.int32)
  logits = np.asarray(model.apply(variables, IDS, None, mask).mlm_logits)
  assert (np.abs(logits - folders["logits"]) * mask[..., None]).max() < TOL
  assert not [r for r in server.requests if r.endswith((".bin", ".safetensors"))
              and "org/tiny-bert" in r]


def _fine_tune(workdir, env):
  return _run(["-m", "bert_jax.train", "--config=configs/glue.py:dataset=sst2,runlocal=True",
               "--config.init_from=org/tiny-bert", "--config.num_train_steps=2",
               "--config.eval_every_steps=0", "--config.log_every_steps=1",
               f"--workdir={workdir}"], env)


@pytest.mark.slow
def test_fine_tuning_from_an_id_records_its_commit_and_runs_again_offline(server, tmp_path,
                                                                          data_dir):
  """GLUE SST-2 runlocal, 2 steps, init_from=org/tiny-bert: the run's notes and
  model_config.json name the commit; then the server is stopped and the same run from the
  filled cache with HF_HUB_OFFLINE=1 starts from the same commit."""
  home, commit = tmp_path / "hf_home", server.repos["org/tiny-bert"].sha
  result = _fine_tune(tmp_path / "online", _env(home, server))
  assert result.returncode == 0, result.stderr[-3000:]
  assert (f"Initialised from org/tiny-bert (Hub org/tiny-bert@main, commit {commit}; "
          "dropped the checkpoint's ['mlm_head']; newly initialised ['classifier', "
          "'bert/pooler'])") in result.stdout, result.stdout
  server.stop()
  server.stop = lambda: None  # the fixture's teardown: already stopped
  offline = _fine_tune(tmp_path / "offline", _env(home, None, offline=True))
  assert offline.returncode == 0, offline.stderr[-3000:]
  assert f"Initialised from org/tiny-bert (Hub org/tiny-bert@main, commit {commit};" in (
      offline.stdout)
  for run in ("online", "offline"):
    with open(tmp_path / run / "model_config.json") as f:
      assert json.load(f)["init_from"] == {"hub_id": "org/tiny-bert", "revision": "main",
                                           "commit": commit}
    with open(tmp_path / run / "metrics.jsonl") as f:
      losses = [row["loss"] for row in map(json.loads, f) if "loss" in row]
    assert len(losses) == 2 and all(np.isfinite(losses)), losses


@pytest.mark.slow
@pytest.mark.parametrize("case", ["unknown", "gated", "unknown_revision", "offline_empty",
                                  "unreachable"])
def test_an_id_that_cannot_be_fetched_is_one_line(case, server, tmp_path):
  closed = "http://127.0.0.1:9"  # the discard port: nothing listens there
  name, offline, message = {
      "unknown": ("org/missing", False, "org/missing: no such local path, and no Hub model "
                  f"of that id on {server.url} (a private one needs a token: hf auth login, "
                  "or HF_TOKEN): check the path or the id"),
      "gated": ("org/gated", False, f"org/gated: a gated model on {server.url}: accept its "
                "terms on its page, then log in with a token that may read it (hf auth login, "
                "or HF_TOKEN)"),
      "unknown_revision": ("org/tiny-bert@nope", False, "org/tiny-bert@nope: the Hub model "
                           f"has no such revision on {server.url}: name an existing branch, "
                           "tag or commit after @"),
      "offline_empty": ("org/tiny-bert", True, "org/tiny-bert: HF_HUB_OFFLINE is set and the "
                        f"Hub cache ({tmp_path / 'hf_home' / 'hub'}) does not hold it: fetch "
                        "it once with the network on, or unset HF_HUB_OFFLINE"),
      "unreachable": ("org/tiny-bert", False, f"org/tiny-bert: cannot reach {closed} ("
                      "ConnectError: [Errno 111] Connection refused) and the Hub cache "
                      f"({tmp_path / 'hf_home' / 'hub'}) does not hold it: check the network "
                      "or HF_ENDPOINT, or fetch it once where the Hub is reachable"),
  }[case]
  result = _run(["-m", "bert_jax.commands.convert", f"--input={name}", f"--output={tmp_path / 'out'}"],
                _env(tmp_path / "hf_home", None if case == "unreachable" else server, offline))
  lines = result.stderr.strip().splitlines()
  assert result.returncode == 1 and len(lines) == 1, result.stderr
  errno = re.escape("[Errno 111] Connection refused")  # the OS's wording
  assert re.fullmatch(re.escape(f"bert_jax.commands.convert: error: {message}").replace(errno, ".+"),
                      lines[0]), lines[0]
  assert not os.path.exists(tmp_path / "out")
