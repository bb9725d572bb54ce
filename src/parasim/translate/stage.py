"""The TRANSLATE stage: the non-English side of every page pair into English, line by line (§2.1.3).

What happens to each line, in order:

1. Whitespace is normalised (newlines, tabs and control characters inside a line become one
   space). An empty line stays empty; a line without a letter (numbers, prices, symbols) is
   copied as it is: there is nothing to translate.
2. A line longer than ``max_line_chars`` is not translated (reason ``too_long``: on a web page that
   is a data blob, not prose); a line longer than ``max_chars`` is split on sentence boundaries
   (or spaces) into chunks that are translated separately and joined with a space.
3. Identical lines (chunks) are translated once: first the cache, then the backend, in batches,
   the cache committed after every batch, so a killed job loses at most one batch.
4. A failed call (exception, time-out, wrong count) is retried ``retries`` times with exponential
   back-off; a batch still failing is halved (once per half, no back-off) to isolate a bad line.
   After ``give_up_after`` batches in a row of which nothing could be translated, the backend is
   taken as down and the remaining lines are marked (``backend_unavailable``) without more
   calls. An empty output for a non-empty line is a
   failure too.
5. A line that could not be translated is null in ``other_en_lines`` and counted by reason in
   the stats and in the row's ``n_untranslated``; failures are never cached, so a rerun retries
   them. A backend that cannot work at all here (:class:`BackendUnavailable`: model, package
   or binary missing) stops the stage with its message instead; the cache keeps what was done.
"""

from __future__ import annotations

import logging
import os
import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from parasim import explain
from parasim.io import LINES_SCHEMA, TRANSLATED_SCHEMA, read_table, write_table
from parasim.spec import Stage
from parasim.stats import Recorder
from parasim.translate.base import (
    BackendUnavailable,
    TranslateSettings,
    Translator,
    make_translator,
)
from parasim.translate.cache import TranslationCache

#: Why a line has no translation (keys of the count ``untranslated_by_reason``).
REASONS = ("too_long", "unsupported_lang", "backend_error", "empty_output", "backend_unavailable")

#: The counts the stage always writes (0 or not), besides ``untranslated_by_reason``.
COUNTS = (
    "rows_identity",
    "lines",
    "lines_identity",
    "lines_empty",
    "lines_passthrough",
    "lines_chunked",
    "lines_translated",
    "units_unique",
    "cache_hits",
    "translated",
    "retries",
    "backend_calls",
    "untranslated",
    "resplits",
)

_LOG = logging.getLogger("parasim.translate")
_sleep = time.sleep  # replaced in tests to observe the back-off without waiting

# BOM, zero-width space, soft hyphen: invisible, and they split words for MT.
_INVISIBLE = dict.fromkeys(map(ord, "\ufeff\u200b\u00ad"), None)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_SENTENCE_END = re.compile(r"(?<=[.!?…;:。！？])\s+")


def normalize_line(text: str | None) -> str:
    """One line of clean text: control characters, tabs and line breaks become single spaces."""
    if not text:
        return ""
    # str.split() also splits on Unicode spaces and line separators (U+00A0, U+2028, ...).
    return " ".join(_CONTROL.sub(" ", text.translate(_INVISIBLE)).split())


def split_long(text: str, max_chars: int) -> list[str]:
    """Chunks of at most ``max_chars``, cut after sentence ends, else at spaces, else hard."""
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    for sent in _SENTENCE_END.split(text):
        while len(sent) > max_chars:
            cut = sent.rfind(" ", 0, max_chars + 1)
            cut = cut if cut > 0 else max_chars
            pieces.append(sent[:cut].strip())
            sent = sent[cut:].strip()
        if sent:
            pieces.append(sent)
    chunks: list[str] = []
    for p in pieces:
        if chunks and len(chunks[-1]) + 1 + len(p) <= max_chars:
            chunks[-1] += " " + p
        else:
            chunks.append(p)
    return chunks


class _Run:
    """Cache access and the circuit breaker of one stage run, across languages; its counts go
    to ``rec`` (every name of :data:`COUNTS` and each reason of :data:`REASONS`, 0 or not)."""

    def __init__(
        self, backend: Translator, cache: TranslationCache | None, log, rec: Recorder
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.log = log or _LOG
        self.rec = rec
        for name in COUNTS:
            rec.count(name, 0)
        rec.count("untranslated_by_reason", dict.fromkeys(REASONS, 0))
        self.failed_in_a_row = 0
        self.mt_seconds = 0.0
        self.resplits_before = int(getattr(backend, "n_resplit", 0))

    @property
    def down(self) -> bool:
        return self.failed_in_a_row >= self.backend.give_up_after

    # ------------------------------------------------------------ one batch, with retries

    def _attempts(
        self, units: list[str], lang: str, retries: int
    ) -> tuple[dict[str, str], list[str], bool]:
        """Call the backend up to 1 + ``retries`` times with back-off.

        Returns (translations, units still without one, whether the last call raised).
        """
        be = self.backend
        done: dict[str, str] = {}
        pending = list(units)
        raised: BaseException | None = None
        for attempt in range(retries + 1):
            if attempt:
                delay = be.backoff_s * 2 ** (attempt - 1)
                self.rec.count("retries")
                self.log.warning(
                    "translate %s: retry %d/%d of %d lines in %.1f s (%s)",
                    lang, attempt, retries, len(pending), delay, raised or "empty output",
                )  # fmt: skip
                _sleep(delay)
            self.rec.count("backend_calls")
            t0 = time.perf_counter()
            try:
                out = be.translate_batch(pending, lang)
                if len(out) != len(pending):
                    raise RuntimeError(f"{len(out)} translations for {len(pending)} lines")
            except BackendUnavailable:
                raise  # misconfigured (model or binary missing): stop with its message
            except Exception as exc:
                raised = exc
                continue
            finally:
                self.mt_seconds += time.perf_counter() - t0
            raised = None
            for u, o in zip(pending, out, strict=True):
                if isinstance(o, str) and o.strip():
                    done[u] = o.strip()
            pending = [u for u in pending if u not in done]
            if not pending or be.deterministic:
                break
        if raised is not None:
            self.log.error("translate %s: %d lines failed: %r", lang, len(pending), raised)
        return done, pending, raised is not None

    def _bisect(self, units: list[str], lang: str) -> tuple[dict[str, str], dict[str, str]]:
        """Find the line(s) that make a batch fail: halve, once each, without back-off.

        When both halves fail, the cause is not one bad line (the backend is down, or several
        lines are bad): stop there rather than make a call per line.
        """
        mid = len(units) // 2
        halves = [units[:mid], units[mid:]]
        results = [self._attempts(h, lang, 0) for h in halves]
        ok = {**results[0][0], **results[1][0]}
        if results[0][2] and results[1][2]:
            return ok, dict.fromkeys(results[0][1] + results[1][1], "backend_error")
        bad: dict[str, str] = {}
        for _, pending, raised in results:
            if raised and len(pending) > 1:
                ok2, bad2 = self._bisect(pending, lang)
                ok.update(ok2)
                bad.update(bad2)
            else:
                bad.update(dict.fromkeys(pending, "backend_error" if raised else "empty_output"))
        return ok, bad

    def _call(self, units: list[str], lang: str) -> tuple[dict[str, str], dict[str, str]]:
        """Translate one batch; returns ({unit: translation}, {unit: failure reason})."""
        if self.down:
            return {}, dict.fromkeys(units, "backend_unavailable")
        ok, pending, raised = self._attempts(units, lang, self.backend.retries)
        if not raised:
            self.failed_in_a_row = 0
            return ok, dict.fromkeys(pending, "empty_output")
        if len(pending) > 1:
            ok2, bad = self._bisect(pending, lang)
            ok.update(ok2)
        else:
            bad = dict.fromkeys(pending, "backend_error")
        # The circuit breaker counts batches of which nothing at all could be translated.
        self.failed_in_a_row = 0 if ok else self.failed_in_a_row + 1
        if self.down:
            self.log.error(
                "translate %s: %d batches in a row failed; taking %s as down",
                lang, self.failed_in_a_row, self.backend.label(lang),
            )  # fmt: skip
        return ok, bad

    # ------------------------------------------------------------ many lines of one language

    def translate(self, texts: Sequence[str | None], lang: str) -> list[str | None]:
        be = self.backend
        c: Counter[str] = Counter()  # lines by kind, recorded at the end
        out: list[str | None] = [None] * len(texts)
        plans: list[tuple[int, list[str]]] = []  # (index, chunks to translate)
        fail: dict[int, str] = {}
        supported = be.supports(lang)
        for i, raw in enumerate(texts):
            c["lines"] += 1
            text = normalize_line(raw)
            if not text:
                out[i] = ""
                c["lines_empty"] += 1
            elif not any(ch.isalpha() for ch in text):
                out[i] = text
                c["lines_passthrough"] += 1
            elif len(text) > be.max_line_chars:
                fail[i] = "too_long"
            elif not supported:
                fail[i] = "unsupported_lang"
            else:
                chunks = split_long(text, be.max_chars)
                c["lines_chunked"] += len(chunks) > 1
                plans.append((i, chunks))
        if not supported and fail:
            self.log.warning("translate: %s cannot translate %r", be.label(lang), lang)

        for name in ("lines", "lines_empty", "lines_passthrough", "lines_chunked"):
            self.rec.count(name, c[name])
        units = list(dict.fromkeys(u for _, chunks in plans for u in chunks))
        self.rec.count("units_unique", len(units))
        results, reasons = self._translate_units(units, lang)
        for i, chunks in plans:
            bad = next((reasons[u] for u in chunks if u not in results), None)
            if bad is None:
                out[i] = " ".join(results[u] for u in chunks)
            else:
                fail[i] = bad
        self.rec.count("lines_translated", len(plans) - sum(i in fail for i, _ in plans))
        self.rec.count("untranslated", len(fail))
        self.rec.count("untranslated_by_reason", Counter(fail.values()))
        return out

    def _translate_units(self, units: list[str], lang: str) -> tuple[dict[str, str], dict]:
        be = self.backend
        use_cache = self.cache is not None and be.name != "identity"
        model = be.model_id(lang)
        results: dict[str, str] = {}
        if use_cache and units:
            results = self.cache.get_many(be.name, model, lang, units)
        self.rec.count("cache_hits", len(results))
        todo = [u for u in units if u not in results]
        reasons: dict[str, str] = {}
        if not todo:
            return results, reasons
        self.log.info(
            "translate %s with %s: %d unique lines, %d from the cache, %d to translate",
            lang, be.label(lang), len(units), len(results), len(todo),
        )  # fmt: skip
        t0 = time.perf_counter()
        done = 0
        for batch in _batches(todo, be.batch_size, be.batch_chars):
            if self.down:
                reasons.update(dict.fromkeys(batch, "backend_unavailable"))
                continue
            ok, bad = self._call(batch, lang)
            if use_cache and ok:
                self.cache.put_many(be.name, model, lang, ok)
            results.update(ok)
            reasons.update(bad)
            self.rec.count("translated", len(ok))
            done += len(batch)
            rate = done / max(time.perf_counter() - t0, 1e-9)
            self.log.info(
                "translate %s: %d/%d lines (%.0f lines/s), %d failed so far",
                lang, done, len(todo), rate, len(reasons),
            )  # fmt: skip
        return results, reasons

    def finish(self, seconds: float) -> tuple[float, float | None]:
        """Record the run's timings (``total``: ``seconds``; ``mt``: the backend's calls), the
        backend's resplits and the figures ``cache_hit_rate`` and ``lines_per_s`` (new
        translations per second of backend time); return those two figures."""
        rec = self.rec
        rec.count("resplits", int(getattr(self.backend, "n_resplit", 0)) - self.resplits_before)
        rec.seconds("total", round(seconds, 3))
        rec.seconds("mt", round(self.mt_seconds, 3))
        units, hits = rec.counted("units_unique"), rec.counted("cache_hits")
        hit_rate = round(hits / units, 4) if units else 1.0
        rate = rec.counted("translated") / self.mt_seconds if self.mt_seconds else None
        lines_per_s = round(rate, 1) if rate is not None else None
        rec.figure("cache_hit_rate", hit_rate)
        rec.figure("lines_per_s", lines_per_s)
        return hit_rate, lines_per_s


def _batches(units: list[str], size: int, max_chars: int):
    batch: list[str] = []
    chars = 0
    for u in units:
        if batch and (len(batch) >= size or chars + len(u) > max_chars):
            yield batch
            batch, chars = [], 0
        batch.append(u)
        chars += len(u)
    if batch:
        yield batch


def translate_texts(
    texts: Sequence[str | None],
    src_lang: str,
    backend: Translator,
    cache: TranslationCache | None = None,
    log: logging.Logger | None = None,
    *,
    rec: Recorder | None = None,
) -> list[str | None]:
    """Translate a list of lines of one language into English (deduplicated, cached, retried).

    Args:
        texts: The lines (None or "" give "").
        src_lang: Their language (ISO 639-1, e.g. "fr").
        backend: The translator.
        cache: Where translations are looked up and stored; None: no cache.
        log: Logger for progress and failures (default ``parasim.translate``).
        rec: Records the counts, as :func:`translate_lines` does (rows aside); None: not kept.

    Returns:
        One English line per input line (None where it failed).
    """
    t0 = time.perf_counter()
    run = _Run(backend, cache, log, Recorder("translate") if rec is None else rec)
    out = run.translate(texts, src_lang)
    run.finish(time.perf_counter() - t0)
    return out


def translate_lines(
    lines: pa.Table,
    backend: Translator,
    cache: TranslationCache | None,
    log: logging.Logger | None = None,
    *,
    rec: Recorder,
) -> pa.Table:
    """Add the English translation of every ``other_lines`` entry to a lines table.

    Rows whose ``other_lang`` is ``en`` are copied (``mt_backend`` "identity"). All lines of one
    language, across rows, are translated together, so a line repeated on many pages (menus,
    footers) costs one translation.

    Args:
        lines: A table with the columns of :data:`parasim.io.LINES_SCHEMA`.
        backend: The translator (see :func:`parasim.translate.make_translator`).
        cache: The translation cache (None: no cache).
        log: Logger for progress, failures and the final counts.
        rec: Records the counts. Rows (page pairs) pass through, none is dropped: a line
            without a translation keeps its row. Counts: rows_identity and lines_identity
            (``en`` rows, copied), lines, lines_empty, lines_passthrough (no letter: copied),
            lines_chunked, lines_translated (lines given a translation, by the backend or from
            the cache: the same on a rerun), units_unique (distinct lines or chunks sent to MT
            or cache), cache_hits, translated (new translations, units sent to the backend; 0
            on a rerun), untranslated and untranslated_by_reason, retries, backend_calls,
            resplits; seconds ``total`` and ``mt``; figures cache_hit_rate, lines_per_s (new
            translations per second of backend time), mt_backend.

    Returns:
        The table in :data:`parasim.io.TRANSLATED_SCHEMA` (same rows, same order).

    Raises:
        ValueError: ``lines`` lacks columns of LINES_SCHEMA.
    """
    log = log or _LOG
    t0 = time.perf_counter()
    missing = [f.name for f in LINES_SCHEMA if f.name not in lines.column_names]
    if missing:
        raise ValueError(f"translate_lines: input table lacks column(s) {missing}")
    langs = [str(x) for x in lines.column("other_lang").to_pylist()]
    other = [x or [] for x in lines.column("other_lines").to_pylist()]

    run = _Run(backend, cache, log, rec)
    translated: list[list[str | None]] = [[] for _ in other]
    labels = [""] * len(other)
    for lang in sorted(set(langs)):
        rows = [i for i, lg in enumerate(langs) if lg == lang]
        flat = [t for i in rows for t in other[i]]
        if lang == "en":
            rec.count("rows_identity", len(rows))
            rec.count("lines_identity", len(flat))
            out = ["" if t is None else t for t in flat]
            label = "identity"
        else:
            out = run.translate(flat, lang)
            label = backend.label(lang)
        pos = 0
        for i in rows:
            n = len(other[i])
            translated[i] = out[pos : pos + n]
            labels[i] = label
            pos += n
    rec.rows_in += len(other)
    rec.rows_out += len(other)

    cols = {f.name: lines.column(f.name).cast(f.type) for f in LINES_SCHEMA}
    cols["other_en_lines"] = pa.array(translated, type=pa.list_(pa.string()))
    cols["n_untranslated"] = pa.array(
        [sum(t is None for t in row) for row in translated], type=pa.int32()
    )
    cols["mt_backend"] = pa.array(labels, type=pa.string())
    table = pa.table(cols, schema=TRANSLATED_SCHEMA)

    hit_rate, lines_per_s = run.finish(time.perf_counter() - t0)
    rec.figure("mt_backend", backend.name)
    by_reason = rec.counted("untranslated_by_reason")
    log.info(
        "translate: %d rows, %d lines: %d translated, %d from the cache (%.0f%%), "
        "%d untranslated %s, %s lines/s",
        len(other), rec.counted("lines"), rec.counted("translated"), rec.counted("cache_hits"),
        100 * hit_rate, rec.counted("untranslated"),
        {k: v for k, v in by_reason.items() if v}, lines_per_s,
    )  # fmt: skip
    return table


def translate_file(
    input_path: str | os.PathLike,
    output_path: str | os.PathLike,
    settings: TranslateSettings | Mapping[str, Any],
    cache_path: str | os.PathLike | None,
    log: logging.Logger | None = None,
    threads: int | None = None,
    *,
    rec: Recorder,
) -> None:
    """Read a lines shard, translate it, write the translated shard atomically.

    Args:
        input_path: ``results/lines/{site}/{shard}.parquet``.
        output_path: ``results/translated/{site}/{shard}.parquet``.
        settings: The ``translate`` settings (or the section as in the config).
        cache_path: The shared SQLite cache (e.g. ``results/cache/translations.sqlite``); None:
            no cache (``settings.cache`` is not read here).
        log: Logger.
        threads: CPU threads the backend may use (apertium processes, torch threads).
        rec: Records the counts (see :func:`translate_lines`).
    """
    table = read_table(input_path)
    backend = make_translator(settings, threads)
    try:
        with TranslationCache(Path(cache_path) if cache_path else None) as cache:
            out = translate_lines(table, backend, cache, log, rec=rec)
    finally:
        backend.close()
    write_table(out, output_path)


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "translate",
    rules=("translate_lines",),
    results=("translated",),
    upstream="parse",
    per="shard",
    done="translated",
    metric="lines_translated",
    label="lines translated",
    explain=explain.translate,
    is_empty=explain.translate_is_empty,
    one_to_one=True,
    aliases={"translate-lines": ("translate",)},
    # sent to the backend or read from the shared translation cache: which job translated a
    # line first, and what earlier runs cached, decide (``lines_translated`` does not)
    cache_counts=("cache_hits", "translated", "retries", "backend_calls", "resplits"),
    settings=TranslateSettings,
    inputs={"input": LINES_SCHEMA},
    outputs={"output": TRANSLATED_SCHEMA},
    run=translate_file,
)
