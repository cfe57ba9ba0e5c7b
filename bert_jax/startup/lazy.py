"""TensorFlow, imported on first use.

TensorFlow is the input pipeline (tf.data, in-graph tokenisation) and costs seconds to
import: most of `import bert_jax`'s time, and most of a command line's start when it stops
on a bad flag or a missing file before any data flows. The modules that build the pipeline
therefore name it through these handles,

  from bert_jax.startup.lazy import tensorflow as tf

and TensorFlow is imported when an attribute is first read (`tf.data`, `tf.int32`, ...),
not when the module is. `import bert_jax`, `load_pretrained`, the models, the optimizer
and a command line's flag and path checks run without it. On import, TensorFlow's GPUs are
hidden from it (tf.data only: accelerators belong to JAX), however it was imported first.
A module that uses a handle at import time (a decorator, an annotation evaluated at
definition) imports TensorFlow with it: such modules start with
`from __future__ import annotations` and keep decorators inside functions.
"""
import importlib
import threading
import types
from typing import Any, Callable


class LazyModule(types.ModuleType):
  """Stands for the module `name`; the first attribute read imports it (`on_import` then
  runs once on it), and every attribute read is the real module's."""

  def __init__(self, name: str, on_import: Callable[[types.ModuleType], None] | None = None):
    super().__init__(name)
    self._lazy_on_import = on_import
    self._lazy_module = None
    self._lazy_lock = threading.Lock()  # tf.data calls Python from its own threads

  def _lazy_load(self) -> types.ModuleType:
    with self._lazy_lock:
      if self._lazy_module is None:
        module = importlib.import_module(self.__name__)
        if self._lazy_on_import is not None:
          self._lazy_on_import(module)
        self._lazy_module = module
    return self._lazy_module

  def __getattr__(self, attr: str) -> Any:
    if attr.startswith("_lazy_"):  # before __init__ has set them (copy, pickle)
      raise AttributeError(attr)
    value = getattr(self._lazy_module or self._lazy_load(), attr)
    if not attr.startswith("__"):
      setattr(self, attr, value)  # the next read is a plain attribute
    return value

  def __dir__(self):
    return dir(self._lazy_module or self._lazy_load())

  @property
  def loaded(self) -> bool:
    """Whether the real module has been imported through this handle."""
    return self._lazy_module is not None


def _hide_gpus(tf: types.ModuleType) -> None:
  try:
    tf.config.set_visible_devices([], "GPU")
  except RuntimeError:  # TensorFlow's runtime already started: leave it as it is
    pass


def _through_the_tensorflow_handle(_) -> None:
  tensorflow.config  # pylint: disable=pointless-statement  # its on_import: GPUs hidden


tensorflow = LazyModule("tensorflow", on_import=_hide_gpus)
tensorflow_text = LazyModule("tensorflow_text", on_import=_through_the_tensorflow_handle)
