"""Dynamic-programming sentence alignment with n:m links and deletions (beyond the paper).

The search follows vecalign (Thompson & Koehn, 2019), written here in numpy:

* link types ``(a, b)``: ``a`` consecutive source lines with ``b`` consecutive target lines, for
  every ``a, b >= 1`` with ``a + b <= max_size`` and both ``<= max_side``, plus deletions
  ``(1, 0)`` and ``(0, 1)``;
* cost of a link: ``2 * (a * b) ** size_penalty * (1 - sim) / (norm_src + norm_tgt)``, where
  ``sim`` is the scorer's similarity of the concatenations and each ``norm`` is
  ``1 - (mean similarity of that concatenation with the other side's concatenations)``, so a line
  that resembles everything (a generic heading) is not rewarded;
* deletion penalty: a percentile (``del_percentile``) of the costs of random 1:1 pairs;
* search: a full DP when the grid is small (``full_dp_cells``); otherwise both sides are
  downsampled (consecutive lines merged), aligned recursively with 1:1 links, and the path is
  refined at full resolution inside a band of ``width`` cells around it;
* two steps at full resolution (after Bertalign, Liu & Zhu 2023): a DP with 1:1 links and
  deletions only gives an anchor path, then the DP with every n:m type runs in a band of
  ``anchor_width`` cells around it (``anchor_width=0``: one n:m pass). Work and memory are
  ``O((n_src + n_tgt) * width * n_types)``: linear in file length.

The DP runs row by row over source positions; every row is a handful of vectorised numpy
operations per link type; insertions (0:1, within a row) use a running minimum.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from parasim.accel import blas_controller

from .scoring import CombinedScorer, Scorer

Link = tuple[tuple[int, ...], tuple[int, ...]]

_INS = -1  # backpointer: 0:1 (target line unmatched)


@dataclass(frozen=True)
class DPParams:
    """Search parameters of :func:`align` (defaults tuned on the Text+Berg dev set).

    Attributes:
        max_size: largest ``a + b`` of an n:m link.
        max_side: largest number of lines on one side of a link.
        del_percentile: deletion penalty as this quantile of random 1:1 costs (vecalign's
            knob; used when ``del_penalty`` is None).
        del_penalty: fixed deletion penalty. With word cosine the random costs all sit near 1,
            so a percentile does not separate them; a fixed value tunes better.
        size_penalty: exponent on ``a * b`` in the link cost (vecalign: 1.0).
        width: half-width of the band around the coarse path.
        full_dp_cells: grids up to this many cells are searched exhaustively.
        chunk_cells: cells of similarities computed at once (memory bound).
        length_weight: weight of the length term ``|log((len_src + k) / (len_tgt * r + k))|``
            added to each link's cost (character lengths of the concatenations, ``r`` the
            file-level length ratio, ``k = length_smooth``); 0 turns it off.
        merge_penalty: added to a link's cost for every line beyond 1:1 (``a + b - 2``).
        anchor_width: two-step search (as Bertalign): a first DP with 1:1 links and deletions
            only gives an anchor path; the n:m search then runs within this many cells of it
            (0: one n:m search over the whole band). An n:m link spans a few cells around the
            1:1 path, so it stays reachable, while the n:m path cannot drift far from where
            the reliable 1:1 links put it (Text+Berg dev lax F1 0.979 -> 0.988).
        seed: for the random pairs behind the deletion penalty.
    """

    max_size: int = 6
    max_side: int = 5
    del_percentile: float = 0.2
    del_penalty: float | None = 1.0
    size_penalty: float = 0.6
    width: int = 10
    full_dp_cells: int = 300_000
    chunk_cells: int = 16_384
    length_weight: float = 0.6
    length_smooth: float = 10.0
    merge_penalty: float = 0.3
    anchor_width: int = 3
    seed: int = 0

    def types(self) -> list[tuple[int, int]]:
        """Non-deletion link types, smallest first."""
        out = [
            (a, b)
            for a in range(1, self.max_side + 1)
            for b in range(1, self.max_side + 1)
            if a + b <= self.max_size
        ]
        return sorted(out, key=lambda t: (t[0] + t[1], t))


@dataclass
class Alignment:
    """Result of :func:`align`.

    Attributes:
        links: ``(src ids, tgt ids)`` in order; deletions have one empty side.
        sims: scorer similarity of each link (NaN for deletions).
        del_penalty: the deletion penalty used at full resolution.
        levels: number of coarse-to-fine levels (1: full DP).
    """

    links: list[Link]
    sims: np.ndarray
    del_penalty: float = 0.0
    levels: int = 1
    cells: int = 0
    extra: dict = field(default_factory=dict)


def deletion_penalty(scorer: Scorer, params: DPParams, n_sample: int = 80) -> float:
    """The ``del_percentile`` quantile of 1:1 costs between random source and target lines."""
    if params.del_penalty is not None:
        return float(params.del_penalty)
    rng = np.random.default_rng(params.seed)
    si = np.sort(rng.choice(scorer.n_src, size=min(n_sample, scorer.n_src), replace=False))
    tj = np.sort(rng.choice(scorer.n_tgt, size=min(n_sample, scorer.n_tgt), replace=False))
    sims = scorer.sample_sims(si, tj)
    ns, nt = scorer.src_norm(1)[si + 1], scorer.tgt_norm(1)[tj + 1]
    costs = 2 * (1 - sims) / (ns[:, None] + nt[None, :] + 1e-6)
    return float(np.quantile(costs, params.del_percentile))


def _band_full(n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n + 1, np.int64), np.full(n + 1, m, np.int64)


def band_from_links(links: list[Link], n: int, m: int, factor: int, width: int):
    """Column window ``[lo[i], hi[i]]`` per row i around a coarse path scaled by ``factor``.

    Runs of deletions are searched along a straight slant (as vecalign does), so a block of
    unmatched lines at the coarse level does not pin the fine path to one edge of the block.
    """
    nodes = [(0, 0)]
    x = y = 0
    pend = False
    for s, t in links:
        x += len(s)
        y += len(t)
        if len(s) and len(t):
            if pend:
                nodes.append((x - len(s), y - len(t)))
                pend = False
            nodes.append((x, y))
        else:
            pend = True
    if nodes[-1] != (x, y):
        nodes.append((x, y))
    pts = np.array(nodes, dtype=np.float64) * factor
    pts[:, 0] = np.minimum(pts[:, 0], n)
    pts[:, 1] = np.minimum(pts[:, 1], m)
    pts[-1] = (n, m)
    lo = np.full(n + 1, m, np.int64)
    hi = np.zeros(n + 1, np.int64)
    for (x0, y0), (x1, y1) in zip(pts[:-1], pts[1:], strict=True):
        steps = int(max(abs(x1 - x0), abs(y1 - y0), 1))
        t = np.arange(steps + 1) / steps
        xs = np.rint(x0 + (x1 - x0) * t).astype(np.int64)
        ys = np.rint(y0 + (y1 - y0) * t).astype(np.int64)
        np.minimum.at(lo, xs, ys)
        np.maximum.at(hi, xs, ys)
    lo = np.minimum.accumulate(lo[::-1])[::-1]  # non-decreasing
    hi = np.maximum.accumulate(hi)
    lo = np.clip(lo - width, 0, m)
    hi = np.clip(hi + width, 0, m)
    lo[0] = 0
    hi[-1] = m
    return lo, hi


@dataclass
class _Table:
    """The DP's nodes ``(i, j)``, ``lo[i] <= j <= hi[i]``, stored row after row in flat arrays.

    Attributes:
        lo: first column of each row's window.
        widths: number of columns of each row's window.
        start: offset of each row in the flat arrays (``start[-1]``: the number of cells).
        D: cost of the best path to each node (inf: unreached).
        BP: backpointer of each node: a link type's index, ``T`` for a 1:0 deletion, ``_INS``.
        SIM: scorer similarity of the link that ends at each node (NaN for deletions).
    """

    lo: np.ndarray
    widths: np.ndarray
    start: np.ndarray
    D: np.ndarray
    BP: np.ndarray
    SIM: np.ndarray

    @classmethod
    def empty(cls, lo: np.ndarray, hi: np.ndarray) -> _Table:
        """A table over the band ``[lo[i], hi[i]]`` with every node unreached."""
        widths = hi - lo + 1
        start = np.concatenate([[0], np.cumsum(widths)])
        total = int(start[-1])
        D = np.full(total, np.inf)
        BP = np.full(total, -2, np.int8)
        SIM = np.full(total, np.nan, np.float32)
        return cls(lo, widths, start, D, BP, SIM)

    @property
    def total(self) -> int:
        """Number of cells."""
        return int(self.start[-1])


@dataclass
class _Costs:
    """The terms of the link costs of one DP (see the module docstring), per link type.

    Attributes:
        types: the link types ``(a, b)``.
        ta, tb: their source and target sizes.
        scale: ``(a * b) ** size_penalty`` per type.
        extra: ``merge_penalty * (a + b - 2)`` per type.
        ns, nt: the scorer's norms per source size ``a`` and target size ``b``.
        cls, clt: cumulative source lengths and target lengths times the file-level length
            ratio (None: no length term).
        length_weight, length_smooth: as :class:`DPParams`.
    """

    types: list[tuple[int, int]]
    ta: np.ndarray
    tb: np.ndarray
    scale: np.ndarray
    extra: np.ndarray
    ns: dict[int, np.ndarray]
    nt: dict[int, np.ndarray]
    cls: np.ndarray | None
    clt: np.ndarray | None
    length_weight: float
    length_smooth: float


def _cost_terms(
    scorer: Scorer,
    types: list[tuple[int, int]],
    params: DPParams,
    lengths: tuple[np.ndarray, np.ndarray] | None,
) -> _Costs:
    """The per-type cost terms, the scorer's norms and the cumulative lengths of one DP."""
    ta = np.array([a for a, _ in types], np.int64)
    tb = np.array([b for _, b in types], np.int64)
    scale = (ta * tb).astype(np.float64) ** params.size_penalty
    extra = params.merge_penalty * (ta + tb - 2)
    length_weight, length_smooth = params.length_weight, params.length_smooth
    ns = {a: scorer.src_norm(a) for a in set(ta.tolist())}
    nt = {b: scorer.tgt_norm(b) for b in set(tb.tolist())}
    cls = clt = None
    if lengths is not None and length_weight > 0:
        ls, lt = (np.asarray(x, np.float64) for x in lengths)
        ratio = ls.sum() / max(lt.sum(), 1.0)
        cls = np.concatenate([[0.0], np.cumsum(ls)])
        clt = np.concatenate([[0.0], np.cumsum(lt)]) * ratio
    return _Costs(types, ta, tb, scale, extra, ns, nt, cls, clt, length_weight, length_smooth)


def _chunk_end(i: int, n: int, lo: np.ndarray, hi: np.ndarray, chunk_cells: int) -> int:
    """End ``r1`` of a chunk of rows ``[i, r1)`` whose similarity block stays under
    ``chunk_cells`` (always at least row ``i``)."""
    r1 = i + 1
    while r1 <= n and (r1 + 1 - i) * (hi[r1] + 1 - lo[i]) <= chunk_cells:
        r1 += 1
    return r1


def _chunk_costs(cm: _Costs, sims: np.ndarray, i: int, r1: int, c0: int, c1: int) -> np.ndarray:
    """Cost of every link type ending at each node of rows ``[i, r1)``, columns ``[c0, c1)``.

    ``sims`` is the scorer's block for those rows and columns; a link that would start before
    row 0 or column 0 costs inf.
    """
    jj = np.arange(c0, c1)
    costs = np.empty_like(sims)
    for t, (a, b) in enumerate(cm.types):
        den = cm.ns[a][i:r1, None] + cm.nt[b][None, c0:c1] + 1e-6
        costs[t] = 2 * cm.scale[t] * (1 - sims[t]) / den + cm.extra[t]
        if cm.cls is not None:
            len_s = cm.cls[i:r1] - cm.cls[np.maximum(np.arange(i, r1) - a, 0)]
            len_t = cm.clt[c0:c1] - cm.clt[np.maximum(jj - b, 0)]
            costs[t] += cm.length_weight * np.abs(
                np.log((len_s[:, None] + cm.length_smooth) / (len_t[None, :] + cm.length_smooth))
            )
        costs[t][:, jj < b] = np.inf
        if i < a:
            costs[t][: a - i] = np.inf
    return costs


def _fill_row(
    tab: _Table,
    cm: _Costs,
    r: int,
    i: int,
    c0: int,
    costs: np.ndarray,
    sims: np.ndarray,
    del_pen: float,
) -> None:
    """Best path to every node of row ``r``, from the rows above it and then along the row.

    ``costs`` and ``sims`` are the blocks of the chunk that starts at row ``i``, column ``c0``.
    """
    D, start, lo, widths = tab.D, tab.start, tab.lo, tab.widths
    T = len(cm.types)
    L, W = int(lo[r]), int(widths[r])
    cand = np.full((T + 1, W), np.inf)
    for t in range(T):
        a, b = int(cm.ta[t]), int(cm.tb[t])
        p = r - a
        if p < 0:
            continue
        s = L - b - int(lo[p])  # position of column L - b in row p's window
        k0 = max(0, -s)
        k1 = min(W, int(widths[p]) - s)
        if k1 > k0:
            off = L - c0
            np.add(
                D[start[p] + s + k0 : start[p] + s + k1],
                costs[t, r - i, off + k0 : off + k1],
                out=cand[t, k0:k1],
            )
    # 1:0 deletion from row r-1, same column
    p = r - 1
    s = L - int(lo[p])
    k0, k1 = max(0, -s), min(W, int(widths[p]) - s)
    if k1 > k0:
        cand[T, k0:k1] = D[start[p] + s + k0 : start[p] + s + k1] + del_pen
    bt = np.argmin(cand, axis=0)
    best = cand[bt, np.arange(W)]
    # 0:1 insertions within the row: D[j] = min(best[j], D[j-1] + pen)
    cols = (L + np.arange(W)) * del_pen
    v = best - cols
    cmin = np.minimum.accumulate(v)
    ins = v > cmin
    D[start[r] : start[r] + W] = cmin + cols
    bp = bt.astype(np.int8)
    bp[ins] = _INS
    tab.BP[start[r] : start[r] + W] = bp
    ok = (bt < T) & ~ins
    if ok.any():
        kk = np.nonzero(ok)[0]
        tab.SIM[start[r] + kk] = sims[bt[kk], r - i, L - c0 + kk]


def _traceback(
    tab: _Table, types: list[tuple[int, int]], n: int, m: int
) -> tuple[list[Link], np.ndarray]:
    """The links and similarities of the best path, followed back from node ``(n, m)``."""
    D, BP, SIM, start, lo, widths = tab.D, tab.BP, tab.SIM, tab.start, tab.lo, tab.widths
    T = len(types)
    links: list[Link] = []
    lsims: list[float] = []
    r, j = n, m
    while r > 0 or j > 0:
        k = start[r] + j - lo[r]
        if not (0 <= j - lo[r] < widths[r]) or not np.isfinite(D[k]):
            raise RuntimeError(f"alignment search lost the path at ({r}, {j})")
        t = int(BP[k])
        if t == _INS:
            links.append(((), (j - 1,)))
            lsims.append(np.nan)
            j -= 1
        elif t == T:
            links.append(((r - 1,), ()))
            lsims.append(np.nan)
            r -= 1
        else:
            a, b = types[t]
            links.append((tuple(range(r - a, r)), tuple(range(j - b, j))))
            lsims.append(float(SIM[k]))
            r, j = r - a, j - b
    links.reverse()
    lsims.reverse()
    return links, np.array(lsims, dtype=np.float64)


def _dp(
    scorer: Scorer,
    types: list[tuple[int, int]],
    lo: np.ndarray,
    hi: np.ndarray,
    del_pen: float,
    params: DPParams,
    lengths: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[list[Link], np.ndarray, int]:
    """Banded DP over nodes (i, j), ``lo[i] <= j <= hi[i]``; returns links, sims, cells.

    Steps: lay out the band (:class:`_Table`), compute the per-type cost terms
    (:func:`_cost_terms`), fill row 0 with insertions, then for each chunk of rows
    (:func:`_chunk_end`) score the block, turn it into costs (:func:`_chunk_costs`) and fill
    its rows (:func:`_fill_row`); finally follow the path back (:func:`_traceback`).
    """
    n, m = scorer.n_src, scorer.n_tgt
    tab = _Table.empty(lo, hi)
    cm = _cost_terms(scorer, types, params, lengths)

    # row 0: only insertions
    w0 = tab.widths[0]
    tab.D[:w0] = (lo[0] + np.arange(w0)) * del_pen
    tab.BP[:w0] = _INS

    i = 1
    while i <= n:
        r1 = _chunk_end(i, n, lo, hi, params.chunk_cells)
        c0, c1 = int(lo[i]), int(hi[r1 - 1]) + 1
        sims = scorer.block_sims(types, i, r1, c0, c1)
        costs = _chunk_costs(cm, sims, i, r1, c0, c1)
        for r in range(i, r1):
            _fill_row(tab, cm, r, i, c0, costs, sims, del_pen)
        i = r1

    links, sims = _traceback(tab, types, n, m)
    return links, sims, tab.total


def align(
    scorer: Scorer,
    params: DPParams | None = None,
    lengths: tuple[np.ndarray, np.ndarray] | None = None,
) -> Alignment:
    """Align two files with the DP search described in the module docstring.

    Args:
        scorer: similarity source (see :mod:`parasim.align.scoring`), built with
            ``max_a, max_b >= params.max_side``.
        params: search parameters.
        lengths: character length of every source and target line, for the length term
            (``params.length_weight``); ignored when None.

    Returns:
        the links covering every line of both sides exactly once, in order.
    """
    params = params or DPParams()
    n, m = scorer.n_src, scorer.n_tgt
    if n == 0 or m == 0:
        links: list[Link] = [((i,), ()) for i in range(n)] + [((), (j,)) for j in range(m)]
        return Alignment(links, np.full(len(links), np.nan))
    types = params.types()
    with _one_blas_thread(getattr(scorer, "uses_blas", False)):
        return _align_rec(scorer, params, types, lengths)


def _one_blas_thread(active: bool):
    """Single-threaded BLAS while the DP runs.

    The DP does many small matrix products; multi-threaded OpenBLAS spends most of their time
    spinning (measured 7x slower wall-clock on Text+Berg dev with embeddings).
    """
    if active:
        return blas_controller().limit(limits=1, user_api="blas")
    return contextlib.nullcontext()


def _halve(x: np.ndarray) -> np.ndarray:
    n = len(x)
    h = x[0 : n - n % 2 : 2] + x[1 : n - n % 2 : 2]
    return np.concatenate([h, x[n - 1 :]]) if n % 2 else h


def _align_rec(
    scorer: Scorer,
    params: DPParams,
    types: list[tuple[int, int]],
    lengths: tuple[np.ndarray, np.ndarray] | None,
) -> Alignment:
    n, m = scorer.n_src, scorer.n_tgt
    pen = deletion_penalty(scorer, params)
    if (n + 1) * (m + 1) <= params.full_dp_cells or min(n, m) < 4:
        lo, hi = _band_full(n, m)
        levels = 1
    else:
        half = None if lengths is None else (_halve(lengths[0]), _halve(lengths[1]))
        coarse = _align_rec(scorer.downsample(), params, [(1, 1)], half)
        lo, hi = band_from_links(coarse.links, n, m, factor=2, width=params.width)
        levels = coarse.levels + 1
    cells = 0
    if params.anchor_width and types != [(1, 1)]:
        # step 1 (Bertalign-style): 1:1 links and deletions only; its path is the anchor
        anchors, _, cells = _dp(scorer, [(1, 1)], lo, hi, pen, params, lengths)
        lo, hi = band_from_links(anchors, n, m, factor=1, width=params.anchor_width)
    # step 2: every n:m link type, within anchor_width cells of the anchor path
    links, sims, c = _dp(scorer, types, lo, hi, pen, params, lengths)
    return Alignment(links, sims, del_penalty=pen, levels=levels, cells=cells + c)


@dataclass
class Trimmed:
    """Result of :func:`trim`.

    Attributes:
        links: the links after trimming, in order; a detached line is a deletion next to the
            link it left (before it for a first line, after it for a last one).
        sims: the scorer's similarity of each link (NaN for deletions).
        detached: how many lines were taken out of n:m links.
    """

    links: list[Link]
    sims: np.ndarray
    detached: int


def _link_sim(scorer: Scorer, src: list[int], tgt: list[int]) -> float:
    """The scorer's similarity of one link (its concatenations)."""
    i, j = src[-1] + 1, tgt[-1] + 1
    return float(scorer.block_sims([(len(src), len(tgt))], i, i + 1, j, j + 1)[0, 0, 0])


def _link_parts(
    scorer: CombinedScorer, src: list[int], tgt: list[int]
) -> tuple[float, float, float]:
    """A combined scorer's similarity of one link, and its word and embedding parts."""
    i, j = src[-1] + 1, tgt[-1] + 1
    t = [(len(src), len(tgt))]
    w = scorer.words.block_sims(t, i, i + 1, j, j + 1)
    e = scorer.emb.block_sims(t, i, i + 1, j, j + 1)
    return float(scorer.mix(w, e)[0, 0, 0]), float(w[0, 0, 0]), float(e[0, 0, 0])


def trim(
    links: list[Link],
    scorer: Scorer,
    margin: float,
    sims: np.ndarray | None = None,
    agree: float | None = None,
) -> Trimmed:
    """Take out of each n:m link a first or last line the link matches better without.

    The DP weighs a merge against a deletion by its costs: a merge costs its lost similarity
    times ``(a * b) ** size_penalty`` plus ``merge_penalty``, a deletion ``del_penalty``. A
    sentence vector (a mean over tokens) moves little when an unrelated sentence joins a long
    one, so the DP often absorbs a line only one side holds into the neighbouring link rather
    than leave it unlinked ("While one experimental vaccine appears able to reduce Ebola
    mortality…" | "Ring también llegó a un acuerdo… ADT Corporation. Al día de hoy no se ha
    demostrado…"). Here, for each link with more than one line on a side, the similarity of
    the link without its first or last line of that side is compared with the link's own; where
    it is higher by more than ``margin``, the line that gains most is detached (it becomes a
    deletion), and the link is looked at again. A line that belongs to the link adds to its
    similarity, or takes little from it: a true 2:1 link loses its match without either half.

    ``agree`` (a :class:`~parasim.align.scoring.CombinedScorer` only; None: off): a line is
    also detached where the word cosine and the sentence-vector cosine each rise by more than
    this without it. The two are independent evidence: each alone is noisy on merges (the
    word cosine of a sentence's short second half is often near 0, and a mean over tokens
    barely moves when a sentence of the same article joins), so their agreement is trusted at
    a smaller margin than their mix.

    ``sims``: the links' similarities as the DP gave them (computed where missing). The work
    is a few cells per n:m link, on one BLAS thread as the DP's.
    """
    if not isinstance(scorer, CombinedScorer):
        agree = None  # one kind of evidence: nothing to agree
    with _one_blas_thread(getattr(scorer, "uses_blas", False)):
        return _trim(links, scorer, margin, sims, agree)


def _trim(
    links: list[Link], scorer: Scorer, margin: float, sims: np.ndarray | None, agree: float | None
) -> Trimmed:
    out: list[Link] = []
    out_sims: list[float] = []
    detached = 0
    for k, (src0, tgt0) in enumerate(links):
        own = float(sims[k]) if sims is not None and k < len(sims) else float("nan")
        if not src0 or not tgt0 or len(src0) + len(tgt0) <= 2:
            if src0 and tgt0 and not np.isfinite(own):
                own = _link_sim(scorer, list(src0), list(tgt0))
            out.append((src0, tgt0))
            out_sims.append(own if src0 and tgt0 else float("nan"))
            continue
        src, tgt = list(src0), list(tgt0)
        cur = own if np.isfinite(own) else _link_sim(scorer, src, tgt)
        cur_w = cur_e = float("nan")  # the link's word and embedding parts, with agree
        if agree is not None:
            _, cur_w, cur_e = _link_parts(scorer, src, tgt)
        before: list[Link] = []
        after: list[Link] = []
        while len(src) + len(tgt) > 2:
            best = None
            for side, first in ((0, True), (0, False), (1, True), (1, False)):
                lines = src if side == 0 else tgt
                if len(lines) < 2:
                    continue
                rest = lines[1:] if first else lines[:-1]
                s2, t2 = (rest, tgt) if side == 0 else (src, rest)
                if agree is None:
                    v, w, e = _link_sim(scorer, s2, t2), float("nan"), float("nan")
                    ok = False
                else:
                    v, w, e = _link_parts(scorer, s2, t2)
                    ok = w - cur_w > agree and e - cur_e > agree
                if (ok or v - cur > margin) and (best is None or v > best[0]):
                    best = (v, side, first, w, e)
            if best is None:
                break
            cur, side, first, cur_w, cur_e = best
            lines = src if side == 0 else tgt
            line = lines.pop(0 if first else -1)
            dele: Link = ((line,), ()) if side == 0 else ((), (line,))
            if first:
                before.append(dele)
            else:
                after.insert(0, dele)
            detached += 1
        for d in before:
            out.append(d)
            out_sims.append(float("nan"))
        out.append((tuple(src), tuple(tgt)))
        out_sims.append(cur)
        for d in after:
            out.append(d)
            out_sims.append(float("nan"))
    return Trimmed(out, np.array(out_sims, dtype=np.float64), detached)


@dataclass
class Reordered:
    """Result of :func:`reorder`.

    Attributes:
        links: the links after the repair, in the DP's order; a new link stands just after the
            place of its source line's old link.
        moved: per link, whether :func:`reorder` made it (a pair of lines out of order).
        broken: how many of the DP's links (not deletions) it took apart.
    """

    links: list[Link]
    moved: list[bool]
    broken: int


def _top2_cols(block: np.ndarray, r0: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per column of a block of rows: the best value, its row (offset by ``r0``), the second."""
    best_i = block.argmax(0)
    best = block[best_i, np.arange(block.shape[1])]
    if block.shape[0] > 1:
        second = np.partition(block, -2, axis=0)[-2]
    else:
        second = np.full(block.shape[1], -np.inf)
    return best, best_i + r0, second


def _expected_targets(links: list[Link], n: int) -> np.ndarray:
    """Per source line, the target position the alignment puts it at: the first target line
    of its link, or for a deleted line the position after the last target line before it."""
    out = np.zeros(n)
    at = 0.0
    for src, tgt in links:
        if tgt:
            at = float(tgt[0])
        for i in src:
            out[i] = at
        if tgt:
            at = float(tgt[-1]) + 1.0
    return out


def _finite(sims: np.ndarray, k: int | None) -> float:
    if k is None or not np.isfinite(sims[k]):
        return 0.0
    return float(sims[k])


def reorder(
    links: list[Link],
    scorer: Scorer,
    margin: float,
    max_jump: int | None = None,
    sims: np.ndarray | None = None,
    block_cells: int = 1 << 20,
) -> Reordered:
    """Repair a monotonic alignment where one page lists the same items in another order.

    A DP aligns in order, so two lists sorted by name in each language ("Amusement and
    Recreation" under A in English, "Divertissement et loisirs" under D in French) come out as
    neighbouring items linked to each other. This pass compares each source line with the target
    lines within ``max_jump`` lines of where the alignment puts it (every target line when
    ``max_jump`` is None), by the scorer's 1:1 similarity, and looks for pairs that are each
    other's best match there by at least ``margin`` over their second best in both directions (a
    mutual best with a margin, as in bitext mining; a line repeated nearby has no clear best and
    is never moved). Where such a pair ``(i, j)`` is not linked by the alignment, and it beats by
    at least ``margin`` what ``i`` and ``j`` get in their own links (their best 1:1 similarity
    there, or the link's own score in ``sims`` when higher: a merge may match better than any
    of its lines; a deletion gets 0), those links are taken apart and ``(i, j)`` becomes a link;
    a freed line that is in no such pair stays unlinked.

    Similarities are computed in blocks of rows of about ``block_cells`` cells, so memory stays
    bounded; the work is ``O(n_src * max_jump)`` (``O(n_src * n_tgt)`` without a limit), on one
    BLAS thread as the DP's.
    """
    with _one_blas_thread(getattr(scorer, "uses_blas", False)):
        return _reorder(links, scorer, margin, max_jump, sims, block_cells)


def _reorder(
    links: list[Link],
    scorer: Scorer,
    margin: float,
    max_jump: int | None,
    sims: np.ndarray | None,
    block_cells: int,
) -> Reordered:
    n, m = scorer.n_src, scorer.n_tgt
    if n < 2 or m < 2:
        return Reordered(list(links), [False] * len(links), 0)
    # each source line is compared with the target lines within max_jump of where the DP put
    # it (all of them without a limit); the windows move forward with the lines, so a block of
    # rows needs one run of columns, and the work is linear in the page with a limit
    if max_jump is None:
        lo, hi = np.zeros(n, np.int64), np.full(n, m - 1, np.int64)
        step = max(1, block_cells // m)
    else:
        expected = _expected_targets(links, n)
        lo = np.clip(np.ceil(expected - max_jump), 0, m - 1).astype(np.int64)
        hi = np.clip(np.floor(expected + max_jump), 0, m - 1).astype(np.int64)
        width = 2 * max_jump + 1  # rows per block: a block then spans about two windows
        step = max(1, min(width, block_cells // width))
    row_best = np.zeros(n, np.int64)
    row_val = np.full(n, -np.inf)
    row_second = np.full(n, -np.inf)
    col_val = np.full(m, -np.inf)
    col_best = np.zeros(m, np.int64)
    col_second = np.full(m, -np.inf)
    for r0 in range(0, n, step):
        r1 = min(n, r0 + step)
        c0, c1 = int(lo[r0:r1].min()), int(hi[r0:r1].max()) + 1
        cols = np.arange(c0, c1)
        blk = np.asarray(scorer.sample_sims(np.arange(r0, r1), cols), np.float64)
        outside = (cols[None, :] < lo[r0:r1, None]) | (cols[None, :] > hi[r0:r1, None])
        blk[outside] = -np.inf
        rows = np.arange(r1 - r0)
        row_best[r0:r1] = blk.argmax(1) + c0
        row_val[r0:r1] = blk[rows, row_best[r0:r1] - c0]
        if c1 - c0 > 1:
            row_second[r0:r1] = np.partition(blk, -2, axis=1)[:, -2]
        b_val, b_idx, b_second = _top2_cols(blk, r0)
        cv, cb, cs = col_val[c0:c1], col_best[c0:c1], col_second[c0:c1]
        keep = cv >= b_val  # ties: the earlier row stays the best
        col_second[c0:c1] = np.where(keep, np.maximum(cs, b_val), np.maximum(b_second, cv))
        col_best[c0:c1] = np.where(keep, cb, b_idx)
        col_val[c0:c1] = np.where(keep, cv, b_val)

    src_link: dict[int, int] = {}
    tgt_link: dict[int, int] = {}
    for k, (src, tgt) in enumerate(links):
        for i in src:
            src_link[i] = k
        for j in tgt:
            tgt_link[j] = k

    def own(line: int, others: tuple[int, ...], source: bool) -> float:
        if not others:
            return 0.0
        one, many = np.array([line]), np.array(others)
        vals = scorer.sample_sims(one, many) if source else scorer.sample_sims(many, one)
        return float(np.max(vals))

    pairs: list[tuple[int, int]] = []
    broken: set[int] = set()
    for i in range(n):
        j = int(row_best[i])
        v = row_val[i]
        if not np.isfinite(v) or col_best[j] != i:
            continue
        if v - row_second[i] < margin or v - col_second[j] < margin:
            continue
        li, lj = src_link.get(i), tgt_link.get(j)
        if li is not None and li == lj:
            continue  # the DP linked them already
        own_i = own(i, links[li][1], True) if li is not None else 0.0
        own_j = own(j, links[lj][0], False) if lj is not None else 0.0
        if sims is not None:  # a link's lines together may match better than any one of them
            own_i = max(own_i, _finite(sims, li))
            own_j = max(own_j, _finite(sims, lj))
        if v - own_i < margin or v - own_j < margin:
            continue
        pairs.append((i, j))
        for k in (li, lj):
            if k is not None and links[k][0] and links[k][1]:
                broken.add(k)
    if not pairs:
        return Reordered(list(links), [False] * len(links), 0)
    keyed: list[tuple[float, Link, bool]] = [
        (float(k), link, False) for k, link in enumerate(links) if k not in broken
    ]
    keyed += [(src_link.get(i, -1) + 0.5, ((i,), (j,)), True) for i, j in pairs]
    keyed.sort(key=lambda t: t[0])
    # a deletion whose line a new link took leaves the alignment
    taken = {i for i, _ in pairs}, {j for _, j in pairs}

    def stays(link: Link, moved: bool) -> bool:
        if moved or (link[0] and link[1]):
            return True
        return not (set(link[0]) & taken[0] or set(link[1]) & taken[1])

    out = [(link, moved) for _, link, moved in keyed if stays(link, moved)]
    return Reordered([x[0] for x in out], [x[1] for x in out], len(broken))
