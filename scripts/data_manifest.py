"""Writes bert_jax/commands/data_manifest.json, the download table of `python -m bert_jax.commands.download`,
from the data root's files and their public sources.

  python scripts/data_manifest.py              # (re)write it from the data root
  python scripts/data_manifest.py --check      # exit 1 when the committed table differs

Every file of the data root is a byte-for-byte copy of a file in a public GitHub repository
(its README.md gives each as `owner/repo:path@commit`, renames included); SOURCES below is
that list, by data set. Sizes and sha256 digests are computed from the data root's copies
(`--data_dir`, else the one data root of bert_jax.text.paths), which are the public files.
tests/test_download.py checks the committed table against the data root.
"""
import argparse
import json
import os
import sys
import urllib.parse

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
from bert_jax.commands import download  # noqa: E402  (this checkout's package)
from bert_jax.text import paths  # noqa: E402

_AUTOPROMPT = ("eyalbd2/Reproducing-AutoPrompt", "53e9e221b58e5ed882a56c9d8be838b895351165")
_COLA = ("Nstats/my_bert", "c4dc29457f224d7097338f68ff8f3ed4dcde87ff")
_MRPC = ("Nstats/my_bert", "733d79335044b1b7eabb5b47a0eae0cd621dadc0")
_STSB = ("mieseung/Cutoff_with_Attribution", "0ef7460ee83f01034891e92b4f405d2c14944daf")
_PROMPT_FT = ("ZhengxiangShi/PowerfulPromptFT", "b4ecdea060847115e9909b442ab4eb15bcb2a2c4")
_FASTNLP = ("fastnlp/fastNLP", "79939d049b15ab479afc43426a92b7dfafa0b21c")
_CONLL = ("kamalkraj/BERT-NER", "b88dae7241db90716ec40f33a356af9623406ddd")
_NLTK_DATA = ("nltk/nltk_data", "5db857e6f7df11eabb5e5665836db9ec8df07e28")
_ALLENNLP = ("allenai/allennlp-models", "b1f372248c17ad12684d344955fbcd98e957e77e")
_HF_DATASETS = ("huggingface/datasets", "18b48ae2f0895f885f9804b0ca0e38fe4d19fac3")
_WIKITEXT = ("pytorch/examples", "77f55b912142e11fcfdf5b530231fb9c52f181e8")
_SEEDS = (13, 21, 42, 87, 100)


def _kshot(task: str, dev_name: str) -> list[tuple]:
  return [(f"glue/{task}/k-shot/16-{seed}/{name}", *_PROMPT_FT,
           f"data/k-shot/{task}/16-{seed}/{name}")
          for seed in _SEEDS for name in ("train.tsv", dev_name)]


def _nltk(name: str) -> tuple:
  return (f"nltk_corpora/{name}.zip", *_NLTK_DATA, f"packages/corpora/{name}.zip")


# Data set name -> its files: (path under the data root, owner/repo, commit, path there).
SOURCES = {
    "sst2": [
        ("glue/SST-2/train.tsv", *_AUTOPROMPT, "glue_data/SST-2/train_full.tsv"),
        ("glue/SST-2/dev.tsv", *_AUTOPROMPT, "glue_data/SST-2/dev.tsv")],
    "cola": [
        ("glue/CoLA/train.tsv", *_COLA, "data/CoLA/train.tsv"),
        ("glue/CoLA/dev.tsv", *_COLA, "data/CoLA/dev.tsv")],
    "mrpc": [
        ("glue/MRPC/train.tsv", *_MRPC, "data/MRPC/train.tsv"),
        ("glue/MRPC/Microsoft Shared Source License.htm", *_MRPC,
         "data/MRPC/Microsoft Shared Source License.htm")],
    "stsb": [(f"glue/STS-B/{name}", *_STSB, f"glue_data/STS-B/{name}")
             for name in ("train.tsv", "dev.tsv", "LICENSE.txt", "readme.txt")],
    "rte": [("glue/RTE/train.tsv", "marcwww/nlu_eval", "1403aef7eeb8e0876e28835daf0fa64918bea396",
             "data/RTE/train_copy.tsv")],
    "wnli": [("glue/WNLI/dev.tsv", "amrnag/Specialized-Transformers",
              "cae3514a52b66977974bfedd7ecc2efd029a72e9", "data/WNLI/dev.tsv")],
    "mnli": [(f"glue/MNLI/first_rows/{name}", *_FASTNLP, f"tests/data_for_tests/io/MNLI/{name}")
             for name in ("dev_matched.tsv", "dev_mismatched.tsv")] + _kshot("MNLI",
                                                                            "dev_matched.tsv"),
    "qqp": _kshot("QQP", "dev.tsv"),
    "conll2003": [(f"conll2003/{name}", *_CONLL, f"data/{name}")
                  for name in ("train.txt", "valid.txt", "test.txt")],
    "squad": [
        ("squad/squad.json", *_ALLENNLP, "test_fixtures/rc/squad.json"),
        ("squad/du2017_split/test-v1.1.json", "tomhosking/squad-du-split",
         "beac7f3ddcdd579010c7352646938e8ab31e8add", "test-v1.1.json"),
        ("squad/v2.0_train_subset/train-v2.0.json", "PhongNTDo/guide_train_MRC_transformers",
         "631a448de42714910b179afdf83799e01ff1bfaa", "train-v2.0.json")],
    "swag": [("swag/swag.csv", *_ALLENNLP, "test_fixtures/mc/swag.csv")] + [
        (f"swag/hf_dummy/{kind}/dummy_data.zip", *_HF_DATASETS,
         f"datasets/swag/dummy/{kind}/0.0.0/dummy_data.zip") for kind in ("regular", "full")],
    "wikitext2": [(f"wikitext-2/{name}", *_WIKITEXT, f"word_language_model/data/wikitext-2/{name}")
                  for name in ("valid.txt", "test.txt")],
    "gutenberg": [("nltk_corpora/gutenberg.zip", "nltk/nltk",
                   "583117dd80c39f604910ead218cab30da18a8d9a", "nltk_data/corpora/gutenberg.zip")],
    "state_union": [_nltk("state_union")],
    "inaugural": [_nltk("inaugural")],
    "movie_reviews": [_nltk("movie_reviews")],
    "brown": [_nltk("brown")],
    "dependency_treebank": [_nltk("dependency_treebank")],
    "bert_vocab": [
        ("bert/uncased_L-12_H-768_A-12/vocab.txt", "Nstats/my_bert",
         "4831e0fa230f97ca3081141f8d2af2454ba55a4c",
         "data/pretrained_model/uncased_base/vocab.txt"),
        ("bert/uncased_L-12_H-768_A-12/bert_config.json", "Nstats/my_bert",
         "0413ed4be445e8502eb70c2b2e7063406421c10d",
         "data/pretrained_model/uncased_base/bert_config.json")],
}


def raw_url(repo: str, commit: str, path: str) -> str:
  """raw.githubusercontent.com's address of `path` at `commit` (path segments quoted)."""
  return f"{download.RAW}/{repo}/{commit}/{urllib.parse.quote(path)}"


def manifest(data_dir: str) -> dict:
  """{set: [{path, url, size, sha256}, ...]} from the copies under `data_dir`."""
  table = {}
  for name, files in SOURCES.items():
    table[name] = [{"path": target, "url": raw_url(repo, commit, source),
                    "size": os.path.getsize(os.path.join(data_dir, target)),
                    "sha256": download.sha256_of(os.path.join(data_dir, target))}
                   for target, repo, commit, source in files]
  return table


def render(table: dict) -> str:
  return json.dumps(table, indent=1) + "\n"


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--data_dir", help="the data root (default: bert_jax's one data root)")
  parser.add_argument("--check", action="store_true",
                      help="compare with the committed table instead of writing it")
  args = parser.parse_args()
  table = manifest(args.data_dir or paths.default_data_dir())
  text = render(table)
  if args.check:
    with open(download.MANIFEST) as f:
      current = f.read() == text
    print(f"{download.MANIFEST}: "
          + ("current" if current else "differs from the data root's files"))
    return 0 if current else 1
  with open(download.MANIFEST, "w") as f:
    f.write(text)
  print(f"wrote {download.MANIFEST}: {sum(len(files) for files in table.values())} files")
  return 0


if __name__ == "__main__":
  sys.exit(main())
