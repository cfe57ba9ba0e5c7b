"""An HuggingFace folder's files on disk: config.json read, the safetensors weights (one
file, or shards with an index) checked and read, PyTorch's pytorch_model.bin converted.

  raw, path = read_json(folder)       # config.json as a dict, and its path
  check_weights(folder)               # the safetensors file(s) there and whole, none read
  state = read_state(folder)          # every tensor, by its HF name
  bin_to_safetensors(folder, output)  # pytorch_model.bin (or its shards) -> model.safetensors

Only safetensors are loaded: a folder with just `pytorch_model.bin` is refused with the
command that converts it (`bin_to_safetensors`, torch.load with weights_only=True, the one
reader of a pickle). What the tensors' names and shapes mean (HF's names <-> our params,
the HF class a folder holds, the folder `save` writes) is hf.py's side.
"""
import json
import os
import shutil

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load_file


def read_json(folder: str) -> tuple[dict, str]:
  """(the folder's config.json as a dict, its path)."""
  path = os.path.join(folder, "config.json")
  if not os.path.exists(path):
    raise FileNotFoundError(f"{folder}: no config.json (is this an HF model folder?)")
  try:
    with open(path) as f:
      return json.load(f), path
  except json.JSONDecodeError as e:
    raise ValueError(f"{path}: not valid JSON ({e})") from None


def _load_safetensors(path: str) -> dict[str, np.ndarray]:
  """One safetensors file; a damaged one (cut short, not safetensors) is a ValueError
  that names it."""
  try:
    return load_file(path)
  except SafetensorError as error:
    raise ValueError(f"{path}: not a readable safetensors file ({error}); the file is "
                     "damaged or cut short: download or convert it again") from None


def read_state(folder: str) -> dict[str, np.ndarray]:
  """All tensors of the folder's safetensors file(s), by name."""
  single = os.path.join(folder, "model.safetensors")
  index = os.path.join(folder, "model.safetensors.index.json")
  if os.path.exists(single):
    return _load_safetensors(single)
  if os.path.exists(index):
    with open(index) as f:
      shards = sorted(set(json.load(f)["weight_map"].values()))
    state = {}
    for shard in shards:
      state.update(_load_safetensors(os.path.join(folder, shard)))
    return state
  if only_bin(folder):
    raise ValueError(f"{folder}: only pytorch_model.bin found; pickle files are not loaded. "
                     f"Convert it to model.safetensors first: python -m bert_jax.commands.convert "
                     f"--input={folder} --output=NEW_FOLDER")
  raise FileNotFoundError(f"{folder}: no model.safetensors or model.safetensors.index.json")


_BIN, _BIN_INDEX = "pytorch_model.bin", "pytorch_model.bin.index.json"
TORCH_INSTALL = "pip install torch --index-url https://download.pytorch.org/whl/cpu"


def only_bin(folder: str) -> bool:
  """The folder holds PyTorch's pickled weights (pytorch_model.bin, or its shards with an
  index) and no safetensors."""
  return (os.path.isdir(folder) and not any(
      os.path.exists(os.path.join(folder, name))
      for name in ("model.safetensors", "model.safetensors.index.json"))
          and any(os.path.exists(os.path.join(folder, n)) for n in (_BIN, _BIN_INDEX)))


def _bin_files(folder: str) -> list[str]:
  index = os.path.join(folder, _BIN_INDEX)
  if not os.path.exists(os.path.join(folder, _BIN)) and os.path.exists(index):
    with open(index) as f:
      return [os.path.join(folder, shard)
              for shard in sorted(set(json.load(f)["weight_map"].values()))]
  return [os.path.join(folder, _BIN)]


def bin_to_safetensors(folder: str, output: str) -> int:
  """Writes `output` as `folder` with its pytorch_model.bin (or shards) as one
  model.safetensors, every tensor by its name and dtype, and the folder's other files
  (config.json, the tokenizer's) copied; returns the tensor count.

  The pickle is read with torch.load(weights_only=True), which builds tensors and plain
  containers only (no code from the file runs): the one place a pickle is read."""
  try:
    import torch
    from safetensors.torch import save_file as save_torch_file
  except ImportError:
    raise ValueError(f"{folder}: reading pytorch_model.bin needs torch, which is not "
                     f"installed here: {TORCH_INSTALL}") from None
  state = {}
  for path in _bin_files(folder):
    if not os.path.exists(path):
      raise FileNotFoundError(f"{path}: a shard {_BIN_INDEX} names is missing")
    try:
      loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # noqa: BLE001 -- torch raises many kinds for a bad pickle
      raise ValueError(f"{path}: not readable as PyTorch weights with weights_only=True "
                       f"({type(error).__name__}: {str(error).splitlines()[0]})") from None
    if not isinstance(loaded, dict) or not all(
        isinstance(v, torch.Tensor) for v in loaded.values()):
      raise ValueError(f"{path}: not a state dict (a mapping of names to tensors)")
    # Tied tensors share storage, which safetensors refuses: each is written on its own.
    state.update({name: t.detach().contiguous().clone() for name, t in loaded.items()})
  os.makedirs(output, exist_ok=True)
  for name in sorted(os.listdir(folder)):
    source = os.path.join(folder, name)
    if os.path.isfile(source) and not name.startswith("pytorch_model"):
      shutil.copyfile(source, os.path.join(output, name))
  save_torch_file(state, os.path.join(output, "model.safetensors"), metadata={"format": "pt"})
  return len(state)


def check_weights(folder: str) -> None:
  """The folder's safetensors file(s) are there and whole: each file's header is read and
  its size checked against the tensors the header lists, so a file cut short is refused
  (a ValueError naming it) before any weights are read."""
  index = os.path.join(folder, "model.safetensors.index.json")
  files = [os.path.join(folder, "model.safetensors")]
  if not os.path.exists(files[0]) and os.path.exists(index):
    with open(index) as f:
      files = [os.path.join(folder, shard)
               for shard in sorted(set(json.load(f)["weight_map"].values()))]
  for path in files:
    if os.path.exists(path):
      _check_safetensors_size(path)
    elif path.endswith("model.safetensors"):
      read_state(folder)  # the one-line error for what the folder holds instead
    else:
      raise FileNotFoundError(f"{path}: a shard {index} names is missing")


def _check_safetensors_size(path: str) -> None:
  """A safetensors file: 8 bytes (little-endian header length), a JSON header whose
  tensors' data_offsets end inside the file."""
  size = os.path.getsize(path)
  damaged = (f"{path}: not a readable safetensors file ({{}}); the file is damaged or cut "
             "short: download or convert it again")
  with open(path, "rb") as f:
    head = f.read(8)
    length = int.from_bytes(head, "little") if len(head) == 8 else -1
    if not 0 < length <= size - 8:
      raise ValueError(damaged.format(f"{size} bytes, header length {length}"))
    try:
      header = json.loads(f.read(length))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
      raise ValueError(damaged.format(f"header is not JSON: {e}")) from None
  ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
  needed = 8 + length + max(ends, default=0)
  if size < needed:
    raise ValueError(damaged.format(f"{size} bytes, its header lists {needed}"))


def labels_of(raw: dict) -> list[str] | None:
  """The class names of an HF fine-tuned folder's config.json already read (id2label), if
  it names any other than transformers' default LABEL_i."""
  names = [raw.get("id2label", {}).get(str(i)) for i in range(len(raw.get("id2label", {})))]
  if not names or None in names or names == [f"LABEL_{i}" for i in range(len(names))]:
    return None
  return names
