"""Word alignment with eflomal, keeping the intersection of both directions.

eflomal learns from a corpus, not from one sentence pair, so a whole shard is aligned at once,
optionally together with extra parallel text that only adds statistics. Following seed 003 §3.2
(Och & Ney 2003), only links found in both the forward and the reverse direction are kept:
fewer links, higher precision.

eflomal seeds its sampler from ``/dev/urandom`` and has no seed option. Given a ``seed``,
:func:`align_intersection` runs it with a small ``LD_PRELOAD`` library (``urandom_shim.c``, built
once with the system C compiler and cached) that hands it a fixed stream instead, and with one
OpenMP thread per direction: the forward and the reverse model run side by side (eflomal's
outer OpenMP loop, two threads when the job has two cores), each drawing its seed from its own
fresh stream, while the samplers inside a direction run one after another (they take their
seeds in thread-arrival order). The same input and seed then give the same links on every run,
whatever the number of threads. Where the library cannot be built (no C compiler, not
Linux) eflomal runs unseeded, with a warning, and links can differ slightly between runs.
:func:`align_fastalign_intersection` is the pure-Python deterministic alternative (fast_align's
model by EM), at some cost in link quality.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import sys
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

Links = frozenset[tuple[int, int]]

_EMPTY = "<empty>"
log = logging.getLogger(__name__)


def _line(tokens: Sequence[str]) -> str:
    # eflomal splits on whitespace: a token must never contain any.
    words = ["_".join(t.split()) or "_" for t in tokens]
    return " ".join(words) if words else _EMPTY


def _parse_links(line: str) -> set[tuple[int, int]]:
    out = set()
    for item in line.split():
        i, _, j = item.partition("-")
        out.add((int(i), int(j)))
    return out


_SHIM_SRC = Path(__file__).with_name("urandom_shim.c")
_ENV_LOCK = threading.Lock()


@functools.cache
def urandom_shim() -> str | None:
    """Path of the compiled ``urandom_shim.c`` (built on first use, :func:`parasim.native.build`),
    or None where it cannot be."""
    from parasim.native import build

    if not sys.platform.startswith("linux"):
        log.warning("eflomal seeding needs LD_PRELOAD (Linux); running eflomal unseeded")
        return None
    so, why = build(_SHIM_SRC, "-ldl")
    if so is None:
        log.warning("could not build the eflomal seed library (%s); running eflomal unseeded", why)
    return so


def _cores() -> int:
    """CPU cores this job may use: ``OMP_NUM_THREADS`` (its first level) when set, else the
    process's CPU affinity."""
    first = os.environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    if first.isdigit() and int(first) > 0:
        return int(first)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@contextlib.contextmanager
def _seeded_env(seed: int | None) -> Iterator[None]:
    """Environment of the eflomal subprocess: the seed library, its seed, and OpenMP threads
    ``"2,1"`` (the two directions side by side, the samplers of each in sequence) or ``"1"`` on
    one core (the job's ``OMP_NUM_THREADS``, which Snakemake sets to the rule's threads, or the
    CPUs this process may use). Unchanged when ``seed`` is None or the library cannot be built.

    eflomal's Python wrapper starts the binary with this process's environment and takes no
    ``env=``, hence the temporary change, under a lock.
    """
    shim = urandom_shim() if seed is not None else None
    if shim is None:
        yield
        return
    new = {
        "LD_PRELOAD": " ".join(x for x in (shim, os.environ.get("LD_PRELOAD", "")) if x),
        "PARASIM_URANDOM_SEED": str(int(seed) & 0xFFFFFFFFFFFFFFFF),
        "OMP_NUM_THREADS": "2,1" if _cores() >= 2 else "1",
    }
    with _ENV_LOCK:
        old = {k: os.environ.get(k) for k in new}
        os.environ.update(new)
        try:
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def align_intersection(
    src: Sequence[Sequence[str]],
    trg: Sequence[Sequence[str]],
    extra_src: Sequence[Sequence[str]] = (),
    extra_trg: Sequence[Sequence[str]] = (),
    n_samplers: int = 3,
    seed: int | None = None,
) -> list[Links]:
    """Align token lists with eflomal in both directions; return the intersection per pair.

    Args:
        src: English token lists.
        trg: other-language token lists, one per ``src`` entry.
        extra_src: extra English token lists, aligned with the rest for statistics only.
        extra_trg: their other-language side.
        n_samplers: independent eflomal samplers (more: steadier links, slower).
        seed: run eflomal seeded (same input and seed, same links; see the module docstring);
            None: eflomal seeds itself from ``/dev/urandom``.

    Returns:
        For each ``src``/``trg`` pair, the set of ``(en_index, other_index)`` links found in both
        directions. Empty sentences get no links.

    Raises:
        ValueError: when the sides have different lengths.
        RuntimeError: when eflomal fails (message names eflomal and the corpus size).
    """
    if len(src) != len(trg) or len(extra_src) != len(extra_trg):
        raise ValueError(
            f"align_intersection: side lengths differ ({len(src)}/{len(trg)}, "
            f"extra {len(extra_src)}/{len(extra_trg)})"
        )
    if not src:
        return []
    import eflomal

    src_lines = [_line(s) for s in src] + [_line(s) for s in extra_src]
    trg_lines = [_line(t) for t in trg] + [_line(t) for t in extra_trg]
    with tempfile.TemporaryDirectory(prefix="parasim-eflomal-") as tmp:
        fwd, rev = Path(tmp, "fwd"), Path(tmp, "rev")
        try:
            with _seeded_env(seed):
                eflomal.Aligner(n_samplers=n_samplers).align(
                    src_lines,
                    trg_lines,
                    links_filename_fwd=os.fspath(fwd),
                    links_filename_rev=os.fspath(rev),
                    quiet=True,
                )
            fwd_lines = fwd.read_text(encoding="utf-8").splitlines()
            rev_lines = rev.read_text(encoding="utf-8").splitlines()
        except Exception as exc:
            raise RuntimeError(
                f"eflomal failed on {len(src_lines)} sentence pairs: {type(exc).__name__}: {exc}"
            ) from exc
    if len(fwd_lines) < len(src) or len(rev_lines) < len(src):
        raise RuntimeError(
            f"eflomal returned {len(fwd_lines)}/{len(rev_lines)} link lines for {len(src)} pairs"
        )
    out: list[Links] = []
    for k in range(len(src)):
        if not src[k] or not trg[k]:
            out.append(frozenset())
            continue
        both = _parse_links(fwd_lines[k]) & _parse_links(rev_lines[k])
        out.append(frozenset((i, j) for i, j in both if i < len(src[k]) and j < len(trg[k])))
    return out


def read_parallel(
    en_path: str | os.PathLike, other_path: str | os.PathLike, limit: int | None = None
) -> tuple[list[str], list[str]]:
    """Read a line-aligned plain-text parallel corpus (one sentence per line).

    Raises:
        ValueError: when the two files have different numbers of lines.
    """
    en = Path(en_path).read_text(encoding="utf-8").splitlines()
    other = Path(other_path).read_text(encoding="utf-8").splitlines()
    if len(en) != len(other):
        raise ValueError(f"{en_path} has {len(en)} lines but {other_path} has {len(other)}")
    if limit is not None:
        en, other = en[:limit], other[:limit]
    return en, other


def unaligned_share(n_src: int, n_trg: int, links: Links, skip: tuple[set, set] = (set(), set())):
    """Share of words (both sides) that no link touches: a crude divergence signal.

    Args:
        n_src: number of English words.
        n_trg: number of other-language words.
        links: intersection links.
        skip: English and other-side indices to leave out of the count (e.g. punctuation).

    Returns:
        A float in [0, 1]; 1.0 when there are no countable words.
    """
    src_ok = [i for i in range(n_src) if i not in skip[0]]
    trg_ok = [j for j in range(n_trg) if j not in skip[1]]
    total = len(src_ok) + len(trg_ok)
    if total == 0:
        return 1.0
    a_src = {i for i, _ in links}
    a_trg = {j for _, j in links}
    unaligned = sum(i not in a_src for i in src_ok) + sum(j not in a_trg for j in trg_ok)
    return unaligned / total


def _fastalign_direction(
    src_ids: list[np.ndarray],
    trg_ids: list[np.ndarray],
    iterations: int,
    tension: float,
    null_prob: float,
) -> list[set[tuple[int, int]]]:
    """fast_align (Dyer et al. 2013): IBM model 1 with a diagonal prior, by EM, one direction.

    Every target token aligns to one source token or to NULL; returns the Viterbi links
    ``(src_index, trg_index)`` per sentence pair. Deterministic: EM has no random step.
    """
    # One cell per (sentence, target token, source token or NULL), grouped by target token.
    rows_s, rows_t, grp, prior, where = [], [], [], [], []
    g = 0
    for k, (s, t) in enumerate(zip(src_ids, trg_ids, strict=True)):
        m, n = len(s), len(t)
        if not m or not n:
            continue
        i = np.repeat(np.arange(n), m + 1)
        j = np.tile(np.arange(-1, m), n)  # -1: NULL
        h = np.exp(-tension * np.abs((i + 1) / n - (j + 1) / m))
        h = h.reshape(n, m + 1)
        h[:, 1:] *= (1 - null_prob) / h[:, 1:].sum(axis=1, keepdims=True)
        h[:, 0] = null_prob
        rows_s.append(np.where(j < 0, 0, np.concatenate([[0], s + 1])[j + 1]))
        rows_t.append(t[i])
        grp.append(g + i)
        prior.append(h.ravel())
        where.append((k, g, n, m))
        g += n
    if not where:
        return [set() for _ in src_ids]
    cs, ct = np.concatenate(rows_s), np.concatenate(rows_t)
    grp_a, prior_a = np.concatenate(grp), np.concatenate(prior)
    pairs, pair_idx = np.unique(np.stack([cs, ct]), axis=1, return_inverse=True)
    pair_idx = pair_idx.ravel()
    n_src = int(cs.max()) + 1
    t_table = np.ones(pairs.shape[1])  # uniform start
    for _ in range(iterations):
        p = t_table[pair_idx] * prior_a
        post = p / np.bincount(grp_a, weights=p, minlength=g)[grp_a]
        counts = np.bincount(pair_idx, weights=post, minlength=pairs.shape[1])
        t_table = counts / np.bincount(pairs[0], weights=counts, minlength=n_src)[pairs[0]]
    score = t_table[pair_idx] * prior_a
    out: list[set[tuple[int, int]]] = [set() for _ in src_ids]
    offset = 0
    for k, _, n, m in where:
        block = score[offset : offset + n * (m + 1)].reshape(n, m + 1)
        offset += n * (m + 1)
        best = block.argmax(axis=1)  # ties: the lowest index, so stable
        out[k] = {(int(b) - 1, i) for i, b in enumerate(best) if b > 0}
    return out


def align_fastalign_intersection(
    src: Sequence[Sequence[str]],
    trg: Sequence[Sequence[str]],
    extra_src: Sequence[Sequence[str]] = (),
    extra_trg: Sequence[Sequence[str]] = (),
    iterations: int = 5,
    tension: float = 4.0,
    null_prob: float = 0.08,
) -> list[Links]:
    """Deterministic alternative to :func:`align_intersection`: fast_align's model (IBM 1 with a
    diagonal prior, EM) in both directions, intersected. Same inputs and output; the same input
    always gives the same links (eflomal's sampler cannot be seeded).

    Args:
        src, trg, extra_src, extra_trg: as for :func:`align_intersection` (lowercased here).
        iterations: EM iterations per direction (fast_align: 5).
        tension: diagonal tension (fast_align's default 4.0).
        null_prob: probability of aligning to NULL (fast_align: 0.08).
    """
    if len(src) != len(trg) or len(extra_src) != len(extra_trg):
        raise ValueError(
            f"align_fastalign_intersection: side lengths differ ({len(src)}/{len(trg)}, "
            f"extra {len(extra_src)}/{len(extra_trg)})"
        )
    if not src:
        return []
    all_src = [[w.lower() for w in s] for s in [*src, *extra_src]]
    all_trg = [[w.lower() for w in t] for t in [*trg, *extra_trg]]
    vs = {w: i for i, w in enumerate(sorted({w for s in all_src for w in s}))}
    vt = {w: i for i, w in enumerate(sorted({w for t in all_trg for w in t}))}
    s_ids = [np.array([vs[w] for w in s], dtype=np.int64) for s in all_src]
    t_ids = [np.array([vt[w] for w in t], dtype=np.int64) for t in all_trg]
    fwd = _fastalign_direction(s_ids, t_ids, iterations, tension, null_prob)  # (en, other)
    rev = _fastalign_direction(t_ids, s_ids, iterations, tension, null_prob)  # (other, en)
    return [frozenset(fwd[k] & {(i, j) for j, i in rev[k]}) for k in range(len(src))]
