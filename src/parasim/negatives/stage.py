"""The topics and negatives stages: a partition at a time, then the gather of the partitions.

The workflow runs a job per partition (`parasim fit-topics-partition`,
`parasim select-negatives-partition`: :func:`topics_partitions` and
:func:`negatives_partitions` with ``only``), then a gather (:func:`topics_gather`,
:func:`negatives_gather`). One job over every partition (`fit-topics --positives`,
`select-negatives --positives`) runs the same per-partition functions and the same gather: the
same files. A partition's job hands its counts to the gather in its own files (the topics
folder's ``<partition>/partition.json``; a negatives part's schema metadata, :data:`PART_KEY`);
the gather records the stage's stats (:class:`~parasim.stats.Recorder`).

The negatives file carries, in its Parquet schema metadata (key :data:`SELECTION_KEY`), the
encoder and the cosine band used per partition; ``build-corpus`` writes them into the dataset
card with the LDA topic count, coherence and passes of every partition.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parasim.io import DOC_TOPICS_SCHEMA, NEGATIVES_SCHEMA, POSITIVES_SCHEMA
from parasim.negatives import (
    NegativesSettings,
    calibrate_band,
    calibration_rows,
    encode,
    select_negatives,
)
from parasim.negatives.calibrate import BandResult
from parasim.negatives.select import SelectConfig
from parasim.negatives.topics import (
    TopicsConfig,
    TopicsResult,
    documents,
    fit_partition,
    gather_topics,
)
from parasim.negatives.vectors import EncoderConfig, model_key, resolve_model
from parasim.partition import CorpusConfig, partition_column
from parasim.spec import Stage
from parasim.stats import Recorder

log = logging.getLogger("parasim.negatives")

#: Schema-metadata key of the selection summary in the negatives file.
SELECTION_KEY = b"parasim.selection"

#: Schema-metadata key of a partition's selection counts in its negatives part.
PART_KEY = b"parasim.select_partition"

#: Why a positive got no hard negative (``sentences_<reason>`` in the selection's counts; the
#: stage's drops by reason).
NO_NEGATIVE = ("without_topic", "alone_in_topic", "without_in_band_candidate",
               "all_candidates_rejected")  # fmt: skip


def _with_threads(settings: Any, key: str, threads: int | None) -> Any:
    """``settings`` with ``key`` set to the command's ``--threads`` (when given)."""
    return dataclasses.replace(settings, **{key: threads}) if threads else settings


@dataclasses.dataclass(frozen=True)
class NegativesJob:
    """What a topics or negatives job runs with: the config sections and the command's overrides.

    Attributes:
        neg: the ``negatives`` section.
        corpus: the ``corpus`` section (the partitions, the split used by ``within``).
        threads: the command's ``--threads`` (None: the config's ``topics.workers``,
            ``encoder.threads`` and ``select.threads``).
        cache: the sentence-vector cache folder (None: no cache).
    """

    neg: NegativesSettings
    corpus: CorpusConfig
    threads: int | None = None
    cache: Path | None = None

    @property
    def topics(self) -> TopicsConfig:
        """The ``negatives.topics`` section, ``workers`` from ``threads`` when given."""
        return _with_threads(self.neg.topics, "workers", self.threads)

    @property
    def encoder(self) -> EncoderConfig:
        """The ``negatives.encoder`` section, ``threads`` from ``threads`` when given."""
        return _with_threads(self.neg.encoder, "threads", self.threads)

    @property
    def select(self) -> SelectConfig:
        """The ``negatives.select`` section, ``threads`` from ``threads`` when given."""
        return _with_threads(self.neg.select, "threads", self.threads)


def encoder_label(cfg: EncoderConfig) -> str:
    """The encoder as one line for the dataset card."""
    try:
        _, gguf = resolve_model(cfg)
    except FileNotFoundError:
        gguf = cfg.gguf_file
    pooling = ", mean-pooled last hidden states" if cfg.kind == "causal-lm" else ""
    file = f" ({gguf})" if gguf else ""
    return f"{cfg.kind} {cfg.model}{file}{pooling}, max_length {cfg.max_length}"


def encoder_info(cfg: EncoderConfig) -> dict[str, str]:
    """The encoder as the selection summary names it: its label and its cache key."""
    return {"encoder": encoder_label(cfg), "encoder_key": model_key(cfg)}


# ---------------------------------------------------------------- topics


def topics_partitions(
    positives: pa.Table, job: NegativesJob, out: str | Path, only: str | None = None
) -> list[str]:
    """LDA of every partition of ``positives`` (or of ``only``), each in its folder of ``out``.

    Args:
        positives: the positives (id order).
        job: the settings.
        out: the topics folder (gets ``<partition>/``, :func:`~parasim.negatives.topics.
            fit_partition`).
        only: fit this partition only (a job of its own), even without positives (its folder
            says so and the gather leaves it out).

    Returns:
        the partitions fitted (for :func:`topics_gather`).
    """
    rows_in = Counter(partition_column(positives, job.corpus.partitions))
    docs = documents(positives, job.corpus.partitions)
    if only is not None:
        docs = {only: docs.get(only, [])}
        log.info("partition %s: %d positives, %d page pairs", only, rows_in[only], len(docs[only]))
    for part, pdocs in docs.items():
        fit_partition(part, pdocs, job.topics, out, rows_in=rows_in[part])
    return list(docs)


def topics_gather(
    out: str | Path, parts: Sequence[str], job: NegativesJob, rec: Recorder
) -> TopicsResult:
    """The partitions' topics gathered (``doc_topics.parquet``, ``topics.json`` in ``out``).

    Records rows in (the positives of the partitions gathered), rows out (page pairs, each with
    its dominant topic), the counts by reason, the partitions' fitting seconds and, as the
    figure ``topics``, each partition's documents, topic count, coherence, passes and reason.
    """
    res = gather_topics(out, parts, job.neg.topics)
    fitted = 0.0
    for p in sorted(set(parts)):
        part = json.loads((Path(out) / p / "partition.json").read_text())
        rec.rows_in += part["rows_in"]
        fitted += part["info"].get("seconds", 0.0)
    rec.rows_out += res.stats.get("documents", 0)
    rec.seconds("partitions", fitted)
    for k, v in res.stats.items():
        if k != "documents":
            rec.count(k, v)
    keys = ("n_documents", "num_topics", "coherence", "passes", "reason")
    rec.figure("topics", {p: {k: v.get(k) for k in keys} for p, v in res.partitions.items()})
    return res


# ---------------------------------------------------------------- negatives


@dataclasses.dataclass
class NegativesPart:
    """One partition's negatives, and what the gather needs of its selection.

    Attributes:
        name: the partition.
        table: its negatives (rows of ``NEGATIVES_SCHEMA``).
        record: ``{"empty", "stats", "band_detail", "seconds"}``: whether it had no positives,
            :func:`~parasim.negatives.select_negatives`' counts, its calibration, its seconds;
            in its part file (:meth:`to_table`) also ``encoder`` (:func:`encoder_info`).
    """

    name: str
    table: pa.Table
    record: dict[str, Any]

    def to_table(self, encoder: Mapping[str, str]) -> pa.Table:
        """The part file's table: the negatives, the record (with ``encoder``) in its
        schema metadata (:data:`PART_KEY`)."""
        self.record["encoder"] = dict(encoder)
        meta = {PART_KEY: json.dumps(self.record, sort_keys=True, default=str).encode()}
        return self.table.replace_schema_metadata(meta)

    @classmethod
    def from_table(cls, name: str, table: pa.Table) -> NegativesPart:
        """Read back :meth:`to_table`."""
        return cls(name, table, json.loads(table.schema.metadata[PART_KEY]))


def encode_by_shard(
    positives: pa.Table, shard: np.ndarray, enc: EncoderConfig, cache: Path | None
) -> np.ndarray:
    """M(en_text) of every row of ``positives``, encoded and cached one positives shard at a
    time (``shard``: the file index per row, from ``read_positives(..., with_shards=True)``): a
    rerun after one shard changed re-encodes that shard only (the cache key is the encoder and
    the shard's texts, in id order)."""
    texts = positives.column("en_text").to_pylist()
    out = None
    for k in np.unique(shard).tolist():
        idx = np.nonzero(shard == k)[0]
        vec = encode([texts[i] for i in idx], enc, cache)
        if out is None:
            out = np.zeros((len(texts), vec.shape[1]), dtype=np.float32)
        out[idx] = vec
    return out if out is not None else encode([], enc, cache)


def calibrate_partition(
    positives: pa.Table, vectors: np.ndarray, part: str, job: NegativesJob
) -> dict[str, BandResult]:
    """:func:`~parasim.negatives.calibrate_band` of one partition, with M(other_en) encoded for
    its calibration sample only (:func:`~parasim.negatives.calibration_rows`).

    The other_en vectors are a zero array of the shape of ``vectors`` with the sample's rows
    set; ``np.zeros`` leaves the pages of the other rows unwritten (no memory), and the array
    is gone when the band is (before the selection).
    """
    neg = job.neg
    rows = calibration_rows(positives, neg.calibrate, job.corpus).get(part, np.zeros(0, int))
    voe = np.zeros(vectors.shape, dtype=vectors.dtype) if vectors.size else None
    if len(rows) and voe is not None:
        oe = positives.column("other_en").take(pa.array(rows, type=pa.int64())).to_pylist()
        voe[rows] = encode(oe, job.encoder, job.cache)
    return calibrate_band(positives, vectors, voe, neg.calibrate, job.corpus)


def _log_partitions(st: Mapping[str, Any]) -> None:
    """A line per partition of a selection: its negatives, or a warning that it has none."""
    for p, info in sorted(st["partitions"].items()):
        if info["kept"] == 0:
            log.warning(
                "partition %s: no negatives (%d positives; band %s): it will have no corpus "
                "rows (see the stats' drops by reason for why)",
                p,
                info["positives"],
                info["band"],
            )
        else:
            log.info(
                "partition %s: %d negatives for %d positives", p, info["kept"], info["positives"]
            )


def select_partition(
    positives: pa.Table, vectors: np.ndarray, part: str, topics: TopicsResult, job: NegativesJob
) -> tuple[pa.Table, dict[str, Any], dict[str, Any]]:
    """The band (calibrated or from the config) and Algorithm 1 for one partition.

    Args:
        positives: the partition's positives (id order).
        vectors: their M(en_text).
        part: the partition.
        topics: the topics (of this partition at least).
        job: the settings.

    Returns:
        (its negatives, :func:`~parasim.negatives.select_negatives`' counts, its calibration as
        a dict or {}).
    """
    band_info: dict[str, dict[str, Any]] = {}
    band: Any = None
    if job.neg.select.band == "auto":
        band = calibrate_partition(positives, vectors, part, job)
        band_info = {p: b.as_dict() for p, b in band.items()}
    table, st = select_negatives(positives, topics, vectors, job.select, job.corpus, band=band)
    _log_partitions(st)
    return table, st, band_info


def negatives_partitions(
    positives: pa.Table,
    shard: np.ndarray,
    topics: TopicsResult,
    job: NegativesJob,
    only: str | None = None,
) -> list[NegativesPart]:
    """Vectors of the positives given (encoded a whole shard at a time, as one job does), then
    :func:`select_partition` for every partition of them, or for ``only``.

    Args:
        positives: the positives (id order).
        shard: the positives file index of every row (:func:`encode_by_shard`).
        topics: the topics of the partitions.
        job: the settings.
        only: select in this partition only (a job of its own), even without positives.

    Returns:
        the partitions' negatives, in partition order.
    """
    t0 = time.perf_counter()
    ven = encode_by_shard(positives, shard, job.encoder, job.cache)
    t_vec = time.perf_counter() - t0
    parts = np.array(partition_column(positives, job.corpus.partitions), dtype=object)
    names = [only] if only else sorted(set(parts.tolist()))
    out = []
    for name in names:
        mask = parts == name
        all_rows = bool(mask.all())  # one partition: its rows and vectors as they are
        sub = positives if all_rows else positives.filter(pa.array(mask))
        t1 = time.perf_counter()
        record: dict[str, Any] = {"empty": sub.num_rows == 0, "stats": {}, "band_detail": {}}
        if sub.num_rows:
            vec = ven if all_rows else ven[mask]
            table, st, band_info = select_partition(sub, vec, name, topics, job)
            record.update(stats=st, band_detail=band_info)
        else:
            table = NEGATIVES_SCHEMA.empty_table()
            log.warning("partition %s: no positives; no negatives", name)
        record["seconds"] = {
            "vectors": round(t_vec / len(names), 3),
            "calibrate_select": round(time.perf_counter() - t1, 3),
        }
        out.append(NegativesPart(name, table, record))
    return out


def _record_selection(st: Mapping[str, Any], rec: Recorder, partitions: dict[str, Any]) -> str:
    """Record one partition's :func:`~parasim.negatives.select_negatives` counts: the
    negatives kept as rows out, the positives without a negative as drops by reason, the
    timings, the rest as counts; its ``partitions`` go into ``partitions``. Returns its method."""
    reasons = {f"sentences_{r}": r for r in NO_NEGATIVE}
    for k, v in st.items():
        if k == "partitions":
            partitions.update(v)
        elif k == "negatives_kept":
            rec.rows_out += v
        elif k in ("seconds_prepare", "seconds_select"):
            rec.seconds(k.removeprefix("seconds_"), v)
        elif k in reasons:
            rec.drop(reasons[k], v)
        elif k != "method":
            rec.count(k, v)  # candidates, rejections, negatives selected before balancing, ...
    return st["method"]


def negatives_gather(
    parts: Sequence[NegativesPart], encoder: Mapping[str, str], rec: Recorder
) -> pa.Table:
    """The negatives file's table from the partitions' negatives: sorted by id, the selection
    summary in its schema metadata (:data:`SELECTION_KEY`).

    Records rows in (the positives), rows out (the hard negatives kept), the positives that got
    no negative by reason (dropped), the selection's counts and seconds, and as figures the
    partitions' selection, the method and the selection summary.

    Args:
        parts: the partitions' negatives (:func:`negatives_partitions`, or their part files).
        encoder: :func:`encoder_info` of the encoder used.
        rec: the stage's recorder.
    """
    kept = [p for p in parts if not p.record["empty"]]
    tables = [p.table.select(NEGATIVES_SCHEMA.names).cast(NEGATIVES_SCHEMA) for p in kept]
    table = pa.concat_tables([NEGATIVES_SCHEMA.empty_table(), *tables])
    table = table.take(pc.sort_indices(table, sort_keys=[("id", "ascending")])).combine_chunks()
    partitions: dict[str, Any] = {}
    method = "vectorized"
    band_detail: dict[str, Any] = {}
    rec.seconds("prepare", 0.0)
    rec.seconds("select", 0.0)
    for part in kept:
        method = _record_selection(part.record["stats"], rec, partitions)
        band_detail.update(part.record["band_detail"])
        for k, v in part.record["seconds"].items():
            rec.seconds(k, v)
    rec.rows_in += sum(v["positives"] for v in partitions.values())
    selection = {
        "encoder": encoder["encoder"],
        "encoder_key": encoder["encoder_key"],
        "band": {p: v["band"] for p, v in partitions.items()},
        "band_method": {p: band_detail.get(p, {}).get("method", "config") for p in partitions},
        "band_detail": band_detail,
    }
    rec.figure("partitions", partitions)
    rec.figure("method", method)
    rec.figure("selection", selection)
    meta = {SELECTION_KEY: json.dumps(selection, sort_keys=True, default=str).encode()}
    return table.replace_schema_metadata(meta)


#: The topics stage, as :mod:`parasim.stages` gathers it.
TOPICS = Stage(
    "topics",
    rules=("fit_topics", "fit_topics_partition"),
    results=("topics",),
    upstream="clean",
    per="global",
    settings=NegativesSettings,
    inputs={"positives": POSITIVES_SCHEMA},
    outputs={"out": DOC_TOPICS_SCHEMA},
    run=topics_gather,
)


#: The negatives stage, as :mod:`parasim.stages` gathers it.
NEGATIVES = Stage(
    "negatives",
    rules=("select_negatives", "select_negatives_partition"),
    results=("negatives",),
    upstream="topics",
    per="global",
    settings=NegativesSettings,
    inputs={"positives": POSITIVES_SCHEMA, "topics": None},
    outputs={"out": NEGATIVES_SCHEMA},
    run=negatives_gather,
)

#: The module's stages, as :mod:`parasim.stages` gathers them.
SPECS = (TOPICS, NEGATIVES)
