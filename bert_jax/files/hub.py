"""Models by Hub id: where a model path is taken, `org/name` (or a legacy bare name such as
`bert-base-uncased`) that is not a local path names a model on the Hugging Face Hub,
`org/name@revision` a branch, tag or commit of it (default: main).

  folder, fetched = hub.locate("google-bert/bert-base-uncased@main")
  folder = hub.local_path(path)   # a local path as it is; an id's snapshot folder

The one resolver of model paths: the weights loader (load_pretrained, config.init_from, a
distillation teacher, `bert_jax.commands.convert --input`) and the tokenizer beside a model
(embed, fill_mask, tag_spans, the probes) all go through it, so an id is fetched once per
process. `huggingface_hub.snapshot_download` fetches into its cache (it honours HF_HOME,
HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN and HF_HUB_OFFLINE: an id already fetched loads
offline): config and tokenizer files (*.json, *.txt, *.model) and the safetensors weights;
pytorch_model.bin only where the revision has no safetensors. The commit fetched is
recorded (`HubModel.commit`). huggingface_hub is imported only when an id is fetched. A
failure is one line naming the id and what to do.
"""
import dataclasses
import os
import re

# A Hub repo name: letters, digits, "-", "_", "."; an optional namespace before one "/";
# an optional "@revision" (a branch or tag, which may hold "/", or a commit hash).
_ID = re.compile(r"(?P<repo>(?:[A-Za-z0-9][\w.-]*/)?[A-Za-z0-9][\w.-]*)(?:@(?P<rev>[\w./-]+))?")
# What only a local path has: a folder prefix of its own, a checkpoint prefix, a file suffix.
_PATH_LIKE = re.compile(r"^(\.|~|/)|\.\.|//|\.ckpt|\.(json|txt|npz|bin|safetensors|index)$")
WEIGHTS = ["*.safetensors"]
OTHERS = ["*.json", "*.txt", "*.model"]  # config.json, tokenizer files, the shards' index
BIN = ["pytorch_model*.bin"]


@dataclasses.dataclass(frozen=True)
class HubModel:
  """A model fetched by id: the id and revision asked for, the commit they resolved to,
  and its snapshot folder in huggingface_hub's cache."""
  repo_id: str
  revision: str
  commit: str
  folder: str

  def record(self) -> dict:
    """What a run writes into its notes and model_config.json."""
    return {"hub_id": self.repo_id, "revision": self.revision, "commit": self.commit}

  def describe(self) -> str:
    return f"Hub {self.repo_id}@{self.revision}, commit {self.commit}"


_FETCHED: dict[tuple[str, str], HubModel] = {}  # per process: an id is fetched once


def parse(path: str) -> tuple[str, str] | None:
  """(repo id, revision) of a string that looks like a Hub id, else None."""
  match = _ID.fullmatch(path or "")
  if match is None or _PATH_LIKE.search(match["repo"]):
    return None
  return match["repo"], match["rev"] or "main"


def is_hub_id(path: str) -> bool:
  """`path` is no local file or folder (nor a TF checkpoint prefix) and looks like an id."""
  return (bool(path) and not os.path.exists(path) and not os.path.exists(path + ".index")
          and parse(path) is not None)


def locate(path: str) -> tuple[str, HubModel | None]:
  """(the local folder of `path`, what was fetched for it): a local path (or one that is
  no id) as it is with None; an id fetched (once per process) into the cache."""
  if not is_hub_id(path):
    return path, None
  repo_id, revision = parse(path)
  if (repo_id, revision) not in _FETCHED:
    _FETCHED[(repo_id, revision)] = _fetch(path, repo_id, revision)
  fetched = _FETCHED[(repo_id, revision)]
  return fetched.folder, fetched


def local_path(path: str) -> str:
  """`locate`'s folder alone."""
  return locate(path)[0]


def _fetch(path: str, repo_id: str, revision: str) -> HubModel:
  """snapshot_download of the config, tokenizer and safetensors files, then the .bin
  files where the snapshot has no safetensors; the errors as one line each."""
  try:
    import huggingface_hub
    from huggingface_hub import constants
  except ImportError:
    raise ValueError(f"{path}: no such local path, and fetching it as a Hub id needs "
                     "huggingface_hub: pip install huggingface_hub") from None
  try:
    folder = huggingface_hub.snapshot_download(repo_id, revision=revision,
                                               allow_patterns=OTHERS + WEIGHTS)
    commit = os.path.basename(folder)
    if not any(name.endswith(".safetensors") for name in os.listdir(folder)):
      folder = huggingface_hub.snapshot_download(repo_id, revision=commit,
                                                 allow_patterns=OTHERS + BIN)
  except Exception as error:  # noqa: BLE001 -- huggingface_hub's, each made one line
    raise _one_line(error, path, constants) from None
  return HubModel(repo_id, revision, commit, folder)


def _one_line(error: Exception, path: str, constants) -> Exception:
  """The error of a failed fetch as one line naming the id and what to do."""
  from huggingface_hub import errors
  where = constants.ENDPOINT
  cache = constants.HF_HUB_CACHE
  if isinstance(error, errors.GatedRepoError):
    return ValueError(f"{path}: a gated model on {where}: accept its terms on its page, then "
                      "log in with a token that may read it (hf auth login, or HF_TOKEN)")
  if isinstance(error, errors.RevisionNotFoundError):
    return ValueError(f"{path}: the Hub model has no such revision on {where}: name an "
                      "existing branch, tag or commit after @")
  if isinstance(error, errors.RepositoryNotFoundError):
    return ValueError(f"{path}: no such local path, and no Hub model of that id on {where} "
                      "(a private one needs a token: hf auth login, or HF_TOKEN): check the "
                      "path or the id")
  if isinstance(error, errors.LocalEntryNotFoundError):
    cause = error.__cause__
    if isinstance(cause, errors.OfflineModeIsEnabled) or constants.HF_HUB_OFFLINE:
      return OSError(f"{path}: HF_HUB_OFFLINE is set and the Hub cache ({cache}) does not hold "
                     "it: fetch it once with the network on, or unset HF_HUB_OFFLINE")
    reason = f"{type(cause).__name__}: {cause}" if cause else "no answer"
    return OSError(f"{path}: cannot reach {where} ({reason.splitlines()[0]}) and the Hub "
                   f"cache ({cache}) does not hold it: check the network or HF_ENDPOINT, or "
                   "fetch it once where the Hub is reachable")
  if isinstance(error, errors.HfHubHTTPError):
    status = getattr(error.response, "status_code", "an error")
    return OSError(f"{path}: {where} answered {status} ({str(error).splitlines()[0]}): try "
                   "again later, or check HF_ENDPOINT")
  if isinstance(error, OSError):
    return OSError(f"{path}: fetching the Hub model into {cache} failed ({error})")
  raise error
