"""Content evidence for page pairing (``pairing.evidence: content``): pages paired by what they say.

A site whose links a crawler cannot read (web components, language links in attributes, slugs
that differ by language) gives link evidence nothing to go on. As bitextor does, the pages are
then compared by their content, and links become one kind of evidence among others.

Every page of a definite language (declared, or named by the evidence) is described by:

- **a sentence vector**: its main-text lines (:func:`parasim.pair.language.main_text_lines`)
  embedded by the cross-lingual encoder ``content_pairing.encoder`` names (by default the static
  encoder the aligner has, distilled from multilingual e5: no transformer, no translation), the
  page the mean of its lines, each language's mean over the site subtracted (a mean-pooled static
  vector sits near its language's centroid: the shared template would make every page look alike);
- **the tokens both languages share**: numbers, names, code, file names of links and images,
  cognates and (``url_tokens``) the words of the page's own URL path, as a TF-IDF vector over
  the site's pages of the two languages (tokens in more than ``max_token_share`` of them are
  template and left out);
- **its length**: the ratio of the two pages' line counts.

The score of a page pair is ``vector_weight * cosine + tokens_weight * TF-IDF cosine +
length_weight * line-count ratio``. Small sites are scored exactly (every English page against
every page of the language); larger ones are blocked: each page's ``neighbours`` nearest pages
of the other side by the concatenated vectors (the TF-IDF reduced by a truncated SVD), through
faiss (:func:`parasim.knn.nearest`), then scored exactly.

Pairing takes **mutual best matches with a margin**: an English page and a page of the other
language pair when each is the other's best, the score is at least ``min_score`` and it beats the
runner-up of either page by ``margin``. Paired pages leave, and the rest are matched again, for
``rounds`` rounds. Content pairs only the pages that link evidence left unpaired; it also checks
the link pairs: a link pair that content confidently contradicts (both pages have another best
match, each better by ``check_margin``) is kept, counted and flagged in the pair's evidence
(``content_disagrees``); a link pair that content confirms (a mutual best) gets ``content`` among
its evidence kinds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from parasim.config import Settings
from parasim.knn import unit_rows as _unit
from parasim.stats import Recorder

#: texts -> one vector per text.
Encoder = Callable[[list[str]], Any]

#: Tokens for the shared-token vector: words and numbers of two or more characters, with inner
#: dots, hyphens and underscores kept (``os.path``, ``dsa-4000``, ``2017``, ``wb-lng``).
TOKEN_PATTERN = r"(?u)\b\w[\w.\-]*\w\b"
_CODE_TAGS = ("pre", "code", "kbd", "samp", "var", "tt")


@dataclass(frozen=True)
class ContentPairingSettings(Settings, section="content_pairing"):
    """The ``content_pairing`` config section: how the pair stage scores and matches pages by
    their content, for the sites whose ``pairing.evidence`` holds ``content``."""

    encoder: str
    vector_weight: float
    tokens_weight: float
    length_weight: float
    max_token_share: float
    url_tokens: bool
    min_score: float
    margin: float
    check_margin: float
    rounds: int
    exact_max_pairs: int
    neighbours: int
    svd_dims: int
    exact_search_max: int
    hnsw_m: int
    hnsw_ef: int


@dataclass
class PageContent:
    """What the content score reads of one page."""

    lines: list[str]
    tokens: str  # the main text, code and link/image targets, for the shared-token vector


def page_content(html: str | None, selector=None, url: str | None = None) -> PageContent:
    """The main-text lines of a page and the text its shared tokens come from.

    The lines are those of :func:`parasim.pair.language.main_text_lines`. The token text adds
    what those lines leave out but both languages of a page share: code (``<pre>``, ``<code>``),
    the last path segment of the links and images of the main content and, given ``url``, the
    words of the page's own path (``/fr/3.13/c-api/iter.html``: ``fr 3.13 c api iter html``).
    """
    from .language import lines_of, main_roots, parse_page

    root = parse_page(html)
    lines: list[str] = []
    extra: list[str] = []
    if root is not None:
        roots = main_roots(root, selector)
        lines = lines_of(roots)
        for r in roots:
            for el in r.iter(*_CODE_TAGS):
                extra.append(el.text_content())
            for el in r.iter("a", "img", "source"):
                target = el.get("href") or el.get("src") or ""
                name = target.split("?", 1)[0].split("#", 1)[0].rstrip("/").rsplit("/", 1)
                if name[-1] and not target.startswith(("javascript:", "mailto:")):
                    extra.append(name[-1])
    if url:  # the words of the page's own path: a version, a module name, an untranslated slug
        path = urlsplit(url).path
        extra.append(" ".join(w for w in re.split(r"[^\w.]+|(?<=\D)\.|\.(?=\D)", path) if w))
    return PageContent(lines, "\n".join(lines + extra))


def page_vectors(contents: Sequence[PageContent], encoder: Encoder) -> np.ndarray:
    """One vector per page: the mean of its lines' vectors (zeros for a page without lines)."""
    texts, owner = [], []
    for i, c in enumerate(contents):
        for line in c.lines:
            texts.append(line)
            owner.append(i)
    if not texts:
        return np.zeros((len(contents), 1), dtype=np.float32)
    vecs = np.asarray(encoder(texts), dtype=np.float32)
    out = np.zeros((len(contents), vecs.shape[1]), dtype=np.float32)
    np.add.at(out, np.asarray(owner), _unit(vecs))
    counts = np.bincount(np.asarray(owner), minlength=len(contents)).astype(np.float32)
    return out / np.maximum(counts, 1.0)[:, None]


@dataclass
class Side:
    """The pages of one side (English, or one other language) as the score reads them."""

    pages: list[int]  # page indices of the pairing's page table
    vectors: np.ndarray  # unit, centred
    tokens: Any  # scipy sparse rows, unit (TF-IDF)
    n_lines: np.ndarray


def sides(
    en: Sequence[int],
    other: Sequence[int],
    contents: Mapping[int, PageContent],
    vectors: Mapping[int, np.ndarray],
    s: ContentPairingSettings,
) -> tuple[Side, Side]:
    """The English and other-language pages as :class:`Side` s: vectors centred per side, one
    TF-IDF vocabulary over the pages of both."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    def centred(pages: Sequence[int]) -> np.ndarray:
        x = np.stack([vectors[i] for i in pages]).astype(np.float32)
        if len(pages) > 1:
            x = x - x.mean(axis=0)
        return _unit(x).astype(np.float32)

    docs = [contents[i].tokens for i in (*en, *other)]
    vec = TfidfVectorizer(
        token_pattern=TOKEN_PATTERN,
        lowercase=True,
        sublinear_tf=True,
        max_df=s.max_token_share if len(docs) > 2 else 1.0,
        min_df=1,
        dtype=np.float32,
    )
    try:
        tf = vec.fit_transform(docs).tocsr()
    except ValueError:  # no token left (empty pages, or every token in every page)
        from scipy.sparse import csr_matrix

        tf = csr_matrix((len(docs), 1), dtype=np.float32)
    n_en = len(en)

    def lines(pages: Sequence[int]) -> np.ndarray:
        return np.array([len(contents[i].lines) for i in pages], dtype=np.float32)

    return (
        Side(list(en), centred(en), tf[:n_en], lines(en)),
        Side(list(other), centred(other), tf[n_en:], lines(other)),
    )


def pair_scores(a: Side, b: Side, ia: np.ndarray, ib: np.ndarray, s: ContentPairingSettings):
    """The content score of the page pairs ``(a.pages[ia[k]], b.pages[ib[k]])``."""
    cos = np.einsum("ij,ij->i", a.vectors[ia], b.vectors[ib])
    tok = np.asarray(a.tokens[ia].multiply(b.tokens[ib]).sum(axis=1)).ravel()
    la, lb = a.n_lines[ia], b.n_lines[ib]
    length = np.minimum(la, lb) / np.maximum(np.maximum(la, lb), 1.0)
    return (s.vector_weight * cos + s.tokens_weight * tok + s.length_weight * length).astype(
        np.float64
    )


def candidate_edges(a: Side, b: Side, s: ContentPairingSettings) -> tuple[np.ndarray, ...]:
    """The page pairs to score, as index arrays into ``a`` and ``b`` and their scores: all of
    them up to ``exact_max_pairs``, else each page's ``neighbours`` nearest on the other side
    (both directions)."""
    na, nb = len(a.pages), len(b.pages)
    if na == 0 or nb == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, np.zeros(0)
    if na * nb <= s.exact_max_pairs:
        ia = np.repeat(np.arange(na), nb)
        ib = np.tile(np.arange(nb), na)
    else:
        ia, ib = _blocked(a, b, s)
    return ia, ib, pair_scores(a, b, ia, ib, s)


def _blocked(a: Side, b: Side, s: ContentPairingSettings) -> tuple[np.ndarray, np.ndarray]:
    """Candidate pairs by nearest neighbours on ``[sqrt(w_v) * vector, sqrt(w_t) * SVD(TF-IDF)]``
    both ways, deduplicated."""
    from scipy.sparse import vstack
    from sklearn.decomposition import TruncatedSVD

    from parasim.knn import nearest

    parts_a, parts_b = (
        [np.sqrt(s.vector_weight) * a.vectors],
        [np.sqrt(s.vector_weight) * b.vectors],
    )
    tf = vstack([a.tokens, b.tokens]).tocsr()
    dims = min(s.svd_dims, tf.shape[1] - 1, tf.shape[0] - 1)
    if dims >= 2 and s.tokens_weight > 0:
        z = TruncatedSVD(n_components=dims, random_state=0).fit_transform(tf).astype(np.float32)
        z = _unit(z) * np.float32(np.sqrt(s.tokens_weight))
        parts_a.append(z[: len(a.pages)])
        parts_b.append(z[len(a.pages) :])
    qa = np.ascontiguousarray(np.hstack(parts_a), dtype=np.float32)
    qb = np.ascontiguousarray(np.hstack(parts_b), dtype=np.float32)
    knn = dict(exact_max=s.exact_search_max, hnsw_m=s.hnsw_m, hnsw_ef=s.hnsw_ef)
    _, ab, _ = nearest(qa, qb, s.neighbours, **knn)
    _, ba, _ = nearest(qb, qa, s.neighbours, **knn)
    ia = np.concatenate([np.repeat(np.arange(len(a.pages)), ab.shape[1]), ba.ravel()])
    ib = np.concatenate([ab.ravel(), np.repeat(np.arange(len(b.pages)), ba.shape[1])])
    keep = (ia >= 0) & (ib >= 0)
    pairs = np.unique(np.stack([ia[keep], ib[keep]], axis=1), axis=0)
    return pairs[:, 0], pairs[:, 1]


def _best_two(keys: np.ndarray, score: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    """Per key (0..n-1): the edge of its best score (-1: none), that score and the runner-up's
    (-inf where missing). Ties go to the lower edge index."""
    best = np.full(n, -1, dtype=np.int64)
    top = np.full(n, -np.inf)
    second = np.full(n, -np.inf)
    if len(keys) == 0:
        return best, top, second
    order = np.lexsort((np.arange(len(keys)), -score, keys))
    k_sorted = keys[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = k_sorted[1:] != k_sorted[:-1]
    heads = order[first]
    best[keys[heads]] = heads
    top[keys[heads]] = score[heads]
    nxt = np.flatnonzero(first) + 1
    ok = nxt < len(order)
    ok[ok] &= ~first[nxt[ok]]
    second[keys[heads[ok]]] = score[order[nxt[ok]]]
    return best, top, second


def mutual_best(
    ia: np.ndarray,
    ib: np.ndarray,
    score: np.ndarray,
    na: int,
    nb: int,
    s: ContentPairingSettings,
    taken_a: set[int] = frozenset(),  # type: ignore[assignment]
    taken_b: set[int] = frozenset(),  # type: ignore[assignment]
) -> list[tuple[int, int, float]]:
    """One-to-one pairs ``(a index, b index, score)`` by mutual best match with a margin,
    ``s.rounds`` rounds; the pages in ``taken_a`` / ``taken_b`` take no part."""
    out: list[tuple[int, int, float]] = []
    alive = np.ones(len(ia), dtype=bool)
    if taken_a:
        alive &= ~np.isin(ia, list(taken_a))
    if taken_b:
        alive &= ~np.isin(ib, list(taken_b))
    for _ in range(s.rounds):
        e = np.flatnonzero(alive)
        if len(e) == 0:
            break
        ba, ta, sa = _best_two(ia[e], score[e], na)
        bb, tb, sb = _best_two(ib[e], score[e], nb)
        found = []
        for x in np.flatnonzero(ba >= 0):
            edge = e[ba[x]]
            y = ib[edge]
            if bb[y] < 0 or e[bb[y]] != edge:
                continue
            sc = score[edge]
            if sc < s.min_score or sc - max(sa[x], sb[y]) < s.margin:
                continue
            found.append((int(x), int(y), float(sc)))
        if not found:
            break
        out.extend(found)
        gone_a = np.array([f[0] for f in found])
        gone_b = np.array([f[1] for f in found])
        alive &= ~np.isin(ia, gone_a) & ~np.isin(ib, gone_b)
    return out


@dataclass
class ContentResult:
    """What content pairing found for one language."""

    pairs: list[tuple[int, int, float]]  # (English page, other page, score): new pairs
    confirmed: set[tuple[int, int]]  # link pairs content takes as its mutual best
    disagree: dict[tuple[int, int], int]  # link pair -> the other page content prefers
    scored_pairs: int


def match_language(
    en: Sequence[int],
    other: Sequence[int],
    contents: Mapping[int, PageContent],
    vectors: Mapping[int, np.ndarray],
    link_pairs: Sequence[tuple[int, int]],
    s: ContentPairingSettings,
) -> ContentResult:
    """Content pairs of English pages ``en`` with pages ``other`` of one language; the pages of
    ``link_pairs`` (already paired by links) are checked, not paired again."""
    a, b = sides(en, other, contents, vectors, s)
    pos_a = {p: k for k, p in enumerate(a.pages)}
    pos_b = {p: k for k, p in enumerate(b.pages)}
    ia, ib, score = candidate_edges(a, b, s)
    links = [(pos_a[e], pos_b[o]) for e, o in link_pairs if e in pos_a and o in pos_b]
    # the link pairs' own scores, whether or not the blocking proposed them
    la = np.array([x for x, _ in links], dtype=np.int64)
    lb = np.array([y for _, y in links], dtype=np.int64)
    link_score = pair_scores(a, b, la, lb, s) if links else np.zeros(0)
    ba, ta, _ = _best_two(ia, score, len(a.pages))
    bb, tb, _ = _best_two(ib, score, len(b.pages))
    confirmed, disagree = set(), {}
    for (x, y), sc in zip(links, link_score, strict=True):
        bx = ib[ba[x]] if ba[x] >= 0 else -1
        by = ia[bb[y]] if bb[y] >= 0 else -1
        if bx == y and by == x:
            confirmed.add((a.pages[x], b.pages[y]))
        elif bx not in (-1, y) and by not in (-1, x) and min(ta[x], tb[y]) - sc >= s.check_margin:
            disagree[(a.pages[x], b.pages[y])] = b.pages[bx]
    found = mutual_best(
        ia, ib, score, len(a.pages), len(b.pages), s, {x for x, _ in links}, {y for _, y in links}
    )
    pairs = [(a.pages[x], b.pages[y], sc) for x, y, sc in found]
    return ContentResult(pairs, confirmed, disagree, len(ia))


def load_content_encoder(
    s: ContentPairingSettings, static: Mapping[str, Any] | None = None
) -> Encoder:
    """The encoder ``content_pairing.encoder`` names
    (:func:`parasim.align.scoring.cached_encoder`)."""
    from parasim.align.scoring import cached_encoder

    return cached_encoder(s.encoder, static=static)


def record_content(rec: Recorder, by_lang: Mapping[str, ContentResult], no_language: int) -> None:
    """Counts: ``content_pairs``, ``content_confirmed``, ``content_disagrees`` (per language),
    ``content_scored_pairs`` and ``content_no_language`` (documents content could not place)."""
    langs = sorted(by_lang)
    rec.count("content_pairs", {g: len(by_lang[g].pairs) for g in langs})
    rec.count("content_confirmed", {g: len(by_lang[g].confirmed) for g in langs})
    rec.count("content_disagrees", {g: len(by_lang[g].disagree) for g in langs})
    rec.count("content_scored_pairs", sum(r.scored_pairs for r in by_lang.values()))
    rec.count("content_no_language", no_language)
