"""Where and in which precision the torch models run (sentence vectors, LM ranking).

``device: auto`` takes CUDA when a GPU is visible, else the CPU. ``dtype: auto`` takes bfloat16
where the hardware computes it natively (a CUDA GPU with bf16 support; a CPU with the AVX-512
BF16 or AMX instructions) and float32 elsewhere, where bfloat16 would be emulated and slower.
On a 2-core AVX-512 BF16 CPU, SmolLM2-135M encodes 3x faster in bfloat16 than in float32 (16 ->
44-48 sentences/s), and pairwise cosines of its vectors move by 0.001 on average
(BENCHMARKS.md); ``dtype: float32`` keeps full precision.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from parasim.config import ConfigError

DEVICES = ("auto", "cpu", "cuda")
DTYPES = ("auto", "float32", "bfloat16", "float16")


def cpu_seconds() -> float:
    """CPU seconds (user and system) of this process and of its children that have ended and
    been waited for (worker processes, spaCy's ``n_process`` pools): the CPU cost of a step is
    the difference of two calls."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Whether this CPU has bfloat16 instructions (Linux: ``avx512_bf16`` or ``amx_bf16``)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("flags"):
            flags = set(line.split(":", 1)[1].split())
            return bool(flags & {"avx512_bf16", "amx_bf16"})
    return False


def resolve_device(device: str, key: str = "device") -> str:
    """``"cuda"`` or ``"cpu"`` for a configured device (``"auto"``: CUDA when present).

    Args:
        device: the configured value.
        key: its config key path, for messages (e.g. ``negatives.encoder.device``).

    Raises:
        ConfigError: an unknown device name, or ``"cuda"`` asked for with no GPU visible.
    """
    import torch

    if device not in DEVICES:
        raise ConfigError(f"{key}: one of {list(DEVICES)}, not {device!r}")
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{key}: 'cuda' was asked for, but torch sees no CUDA device")
    return device


def resolve_dtype(device: str, dtype: str, key: str = "dtype"):
    """The torch dtype to run a model in on ``device`` (``"cpu"`` / ``"cuda"``).

    Raises:
        ConfigError: an unknown dtype name (``key``: its config key path, for the message).
    """
    import torch

    if dtype not in DTYPES:
        raise ConfigError(f"{key}: one of {list(DTYPES)}, not {dtype!r}")
    if dtype != "auto":
        return getattr(torch, dtype)
    if device == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def dtype_name(dtype) -> str:
    """``"bfloat16"`` for ``torch.bfloat16`` (for logs, cache keys and dataset cards)."""
    return str(dtype).removeprefix("torch.")


@functools.cache
def blas_controller():
    """threadpoolctl's view of the loaded BLAS libraries, built once per process: a fresh
    ``threadpool_limits`` rescans the process's libraries on every call (2–3 ms), as much as
    the aligner's DP of a small page. ``blas_controller().limit(limits=1, user_api="blas")``
    is the context for one BLAS thread."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()
