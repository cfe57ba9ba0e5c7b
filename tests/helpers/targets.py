"""Skips for tests that need a target compiler (libtpu, the CUDA plugin, cuDNN) that CI
installs into a folder of its own (tests/conftest.py puts it on the path)."""
import importlib.util

import pytest

_NO_LIBTPU = importlib.util.find_spec("libtpu") is None
_NO_CUDA_PLUGIN = (importlib.util.find_spec("jax_plugins") is None  # no plugin at all
                   or importlib.util.find_spec("jax_plugins.xla_cuda12") is None)
needs_libtpu = pytest.mark.skipif(_NO_LIBTPU, reason="libtpu is not installed (pip install "
                                  "'libtpu==0.0.42.*', jax's [tpu] extra): no TPU compiler")
needs_cuda_plugin = pytest.mark.skipif(
    _NO_CUDA_PLUGIN, reason="jax-cuda12-plugin / jax-cuda12-pjrt are not installed: no GPU "
    "compiler")
_NO_CUDNN = (_NO_CUDA_PLUGIN or importlib.util.find_spec("nvidia") is None
             or importlib.util.find_spec("nvidia.cudnn") is None)
needs_cudnn = pytest.mark.skipif(
    _NO_CUDNN, reason="nvidia-cudnn-cu12 (and cublas, cuda-runtime) are not installed "
    "(requirements-targets.txt): no cuDNN to compile its flash attention with")
