"""`parasim fit-topics`, `parasim select-negatives`: the topics and negatives stages as commands.

Both (and `parasim build-corpus`, :mod:`parasim.corpus.commands`) read the positives of every
site (several shard files), concatenated and sorted by ``id`` so that the result does not depend
on the order the files are given in. Settings come from the ``negatives`` and ``corpus`` config
sections as JSON (Snakemake passes them); absent sections take the schema's defaults.

The workflow runs them a partition at a time: `parasim fit-topics-partition` and
`parasim select-negatives-partition` (one job per partition, reading the positives of its sites),
then `fit-topics --from-partitions` and `select-negatives --from-partitions` gather the parts.
Given ``--positives``, `fit-topics` and `select-negatives` do every partition in one job, through
the same per-partition functions and the same gather: the same files.

The negatives file carries, in its Parquet schema metadata (key ``parasim.selection``), the
encoder and the cosine band used per partition; ``build-corpus`` writes them into the dataset
card with the LDA topic count, coherence and passes of every partition.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from parasim.stats import Stats

if TYPE_CHECKING:
    from parasim.negatives import NegativesSettings
    from parasim.negatives.select import SelectConfig
    from parasim.negatives.vectors import EncoderConfig
    from parasim.partition import CorpusConfig

log = logging.getLogger("parasim.negatives")

#: Schema-metadata key of the selection summary in the negatives file.
SELECTION_KEY = b"parasim.selection"


def config_sections(args: argparse.Namespace) -> tuple[NegativesSettings, CorpusConfig]:
    """The ``negatives`` and ``corpus`` settings (the schema's defaults where not given)."""
    from parasim.negatives import NegativesSettings
    from parasim.partition import CorpusConfig

    neg = NegativesSettings.from_config(json.loads(args.negatives_json or "{}"))
    corpus = CorpusConfig.from_config(json.loads(args.corpus_json or "{}"))
    return neg, corpus


def read_positives(paths: Sequence[str], with_shards: bool = False) -> Any:
    """All positives shards as one table, sorted by ``id`` (independent of the file order).

    Args:
        paths: the positives shard files.
        with_shards: also return, per row, the index in ``paths`` of the file it came from.

    Returns:
        the table, or ``(table, shard index per row)`` with ``with_shards``.

    Raises:
        UsageError: naming the first missing file.
    """
    import numpy as np
    import pyarrow.compute as pc

    from parasim.io import POSITIVES_SCHEMA, read_table
    from parasim.stagecli import UsageError, need

    if not paths:
        raise UsageError("--positives: no files given")
    tables = []
    for p in paths:
        t = read_table(need(p, "positives shard"))
        missing = sorted(set(POSITIVES_SCHEMA.names) - set(t.column_names))
        if missing:
            raise UsageError(f"positives shard {p}: missing column(s) {missing}")
        tables.append(t.select(POSITIVES_SCHEMA.names).cast(POSITIVES_SCHEMA))
    table = pa.concat_tables(tables)
    order = pc.sort_indices(table, sort_keys=[("id", "ascending")])
    table = table.take(order)
    log.info("positives: %d rows from %d file(s)", table.num_rows, len(paths))
    if table.num_rows == 0:
        log.warning("positives: all %d file(s) are empty", len(paths))
    if with_shards:
        shard = np.repeat(np.arange(len(tables)), [t.num_rows for t in tables])
        return table, shard[order.to_numpy()]
    return table


def _with_threads(settings: Any, key: str, threads: int | None) -> Any:
    """``settings`` with ``key`` set to the command's ``--threads`` (when given)."""
    return dataclasses.replace(settings, **{key: threads}) if threads else settings


def encoder_label(cfg: EncoderConfig) -> str:
    """The encoder as one line for the dataset card."""
    from parasim.negatives.vectors import resolve_model

    try:
        _, gguf = resolve_model(cfg)
    except FileNotFoundError:
        gguf = cfg.gguf_file
    pooling = ", mean-pooled last hidden states" if cfg.kind == "causal-lm" else ""
    file = f" ({gguf})" if gguf else ""
    return f"{cfg.kind} {cfg.model}{file}{pooling}, max_length {cfg.max_length}"


def cmd_fit_topics(args: argparse.Namespace) -> None:
    """LDA per partition over the topic counts; the most coherent model kept.

    With ``--positives``: every partition in this one job. With ``--from-partitions``: only the
    gather, from the folders ``fit-topics-partition`` wrote (the same files as one job).
    """
    from parasim.negatives.topics import fit_partition, gather_topics
    from parasim.partition import partition_column
    from parasim.stagecli import UsageError

    neg, corpus = config_sections(args)
    if bool(args.positives) == bool(args.from_partitions):
        raise UsageError("fit-topics: give --positives (one job) or --from-partitions (gather)")
    t0 = time.perf_counter()
    if args.positives:
        from parasim.negatives.topics import documents

        positives = read_positives(args.positives)
        topics_cfg = _with_threads(neg.topics, "workers", args.threads)
        rows_in = Counter(partition_column(positives, corpus.partitions))
        docs = documents(positives, corpus.partitions)
        for part, pdocs in docs.items():
            fit_partition(part, pdocs, topics_cfg, args.out, rows_in=rows_in[part])
        parts = list(docs)
    else:
        parts = args.from_partitions
    res = gather_topics(args.out, parts, neg.topics)
    write_topics_stats(args.stats, args.out, parts, res, time.perf_counter() - t0)


def cmd_fit_topics_partition(args: argparse.Namespace) -> None:
    """LDA of one partition (a job of its own; ``fit-topics --from-partitions`` gathers)."""
    from parasim.negatives.topics import documents, fit_partition
    from parasim.partition import partition_column

    neg, corpus = config_sections(args)
    positives = read_positives(args.positives)
    topics_cfg = _with_threads(neg.topics, "workers", args.threads)
    rows_in = sum(1 for p in partition_column(positives, corpus.partitions) if p == args.partition)
    docs = documents(positives, corpus.partitions).get(args.partition, [])
    log.info("partition %s: %d positives, %d page pairs", args.partition, rows_in, len(docs))
    fit_partition(args.partition, docs, topics_cfg, args.out, rows_in=rows_in)


def write_topics_stats(
    path: str | None, out: str, parts: Sequence[str], res: Any, seconds: float
) -> None:
    """The topics stage's stats (rows in: the positives of the partitions gathered)."""
    from parasim.stagecli import write_stats

    recs = [json.loads((Path(out) / p / "partition.json").read_text()) for p in sorted(set(parts))]
    partitions = {
        p: {k: v.get(k) for k in ("n_documents", "num_topics", "coherence", "passes", "reason")}
        for p, v in res.partitions.items()
    }
    fitted = sum(r["info"].get("seconds", 0.0) for r in recs)
    write_stats(
        path,
        Stats(
            "topics",
            rows_in=sum(r["rows_in"] for r in recs),
            rows_out=res.stats.get("documents", 0),  # page pairs, each with its dominant topic
            seconds={"total": round(seconds, 3), "partitions": round(fitted, 3)},
            figures={"topics": partitions},
            counts={k: v for k, v in res.stats.items() if k != "documents"},
        ),
    )


def encode_by_shard(positives: pa.Table, shard: Any, enc: EncoderConfig, cache: Path | None) -> Any:
    """M(en_text) of every row of ``positives``, encoded and cached one positives shard at a
    time (``shard``: the file index per row, from ``read_positives(..., with_shards=True)``): a
    rerun after one shard changed re-encodes that shard only (the cache key is the encoder and
    the shard's texts, in id order)."""
    import numpy as np

    from parasim.negatives import encode

    texts = positives.column("en_text").to_pylist()
    out = None
    for k in np.unique(shard).tolist():
        idx = np.nonzero(shard == k)[0]
        vec = encode([texts[i] for i in idx], enc, cache)
        if out is None:
            out = np.zeros((len(texts), vec.shape[1]), dtype=np.float32)
        out[idx] = vec
    return out if out is not None else encode([], enc, cache)


def select_partition(
    positives: pa.Table,
    vectors: Any,
    part: str,
    topics: Any,
    neg: NegativesSettings,
    corpus: CorpusConfig,
    enc: EncoderConfig,
    cache: Path | None,
    threads: int | None,
) -> tuple[pa.Table, dict[str, Any], dict[str, Any]]:
    """The band (calibrated or from the config) and Algorithm 1 for one partition.

    Args:
        positives: the partition's positives (id order); vectors: their M(en_text).

    Returns:
        (its negatives, :func:`select_negatives`' stats, its calibration as a dict or {}).
    """
    band_info: dict[str, dict[str, Any]] = {}
    band: Any = None
    if neg.select.band == "auto":
        band = calibrate_partition(positives, vectors, part, neg, corpus, enc, cache)
        band_info = {p: b.as_dict() for p, b in band.items()}
    sel = _with_threads(neg.select, "threads", threads)
    table, st = select_negatives_table(positives, topics, vectors, sel, corpus, band)
    return table, st, band_info


def calibrate_partition(
    positives: pa.Table,
    vectors: Any,
    part: str,
    neg: NegativesSettings,
    corpus: CorpusConfig,
    enc: EncoderConfig,
    cache: Path | None,
) -> dict[str, Any]:
    """:func:`~parasim.negatives.calibrate_band` of one partition, with M(other_en) encoded for
    its calibration sample only (:func:`~parasim.negatives.calibration_rows`).

    The other_en vectors are a zero array of the shape of ``vectors`` with the sample's rows
    set; ``np.zeros`` leaves the pages of the other rows unwritten (no memory), and the array
    is gone when the band is (before the selection).
    """
    import numpy as np

    from parasim.negatives import calibrate_band, calibration_rows, encode

    rows = calibration_rows(positives, neg.calibrate, corpus).get(part, np.zeros(0, int))
    voe = np.zeros(vectors.shape, dtype=vectors.dtype) if vectors.size else None
    if len(rows) and voe is not None:
        oe = positives.column("other_en").take(pa.array(rows, type=pa.int64())).to_pylist()
        voe[rows] = encode(oe, enc, cache)
    return calibrate_band(positives, vectors, voe, neg.calibrate, corpus)


#: Schema-metadata key of a partition's selection counts in its negatives part.
PART_KEY = b"parasim.select_partition"


def _select_parts(
    args: argparse.Namespace, only: str | None
) -> tuple[list[tuple[str, pa.Table, dict[str, Any]]], EncoderConfig]:
    """Vectors of the positives given (encoded a whole shard at a time, as one job does), then
    :func:`select_partition` for every partition of them, or for ``only``: (partition, its
    negatives, {"stats", "band_detail", "seconds", "empty"}) in partition order."""
    import numpy as np

    from parasim.negatives import load_topics
    from parasim.partition import partition_column
    from parasim.stagecli import need

    neg, corpus = config_sections(args)
    positives, shard = read_positives(args.positives, with_shards=True)
    topics_dir = need(args.topics, "topics folder")
    if only:
        topics = load_partition_topics(topics_dir, only)
    else:
        need(str(topics_dir / "topics.json"), "topics summary")
        topics = load_topics(topics_dir)
    enc = _with_threads(neg.encoder, "threads", args.threads)
    cache = Path(args.cache_dir) if args.cache_dir else None
    t0 = time.perf_counter()
    ven = encode_by_shard(positives, shard, enc, cache)
    t_vec = time.perf_counter() - t0
    parts = np.array(partition_column(positives, corpus.partitions), dtype=object)
    names = [only] if only else sorted(set(parts.tolist()))
    out = []
    for name in names:
        mask = parts == name
        all_rows = bool(mask.all())  # one partition: its rows and vectors as they are
        sub = positives if all_rows else positives.filter(pa.array(mask))
        t1 = time.perf_counter()
        rec: dict[str, Any] = {"empty": sub.num_rows == 0, "stats": {}, "band_detail": {}}
        if sub.num_rows:
            vec = ven if all_rows else ven[mask]
            table, st, band_info = select_partition(
                sub, vec, name, topics, neg, corpus, enc, cache, args.threads
            )
            rec.update(stats=st, band_detail=band_info)
        else:
            from parasim.io import NEGATIVES_SCHEMA

            table = NEGATIVES_SCHEMA.empty_table()
            log.warning("partition %s: no positives; no negatives", name)
        rec["seconds"] = {
            "vectors": round(t_vec / len(names), 3),
            "calibrate_select": round(time.perf_counter() - t1, 3),
        }
        out.append((name, table, rec))
    return out, enc


def gather_negatives(
    parts: list[tuple[str, pa.Table, dict[str, Any]]], enc: EncoderConfig | dict[str, str]
) -> tuple[pa.Table, dict[str, Any], dict[str, Any], dict[str, float], int]:
    """The negatives file's table (sorted by id, the selection in its metadata), the merged
    selection counts, the selection summary, seconds and positives in, from the partitions'."""
    import pyarrow.compute as pc

    from parasim.io import NEGATIVES_SCHEMA
    from parasim.negatives.vectors import model_key

    kept = [(n, t, r) for n, t, r in parts if not r["empty"]]
    tables = [t.select(NEGATIVES_SCHEMA.names).cast(NEGATIVES_SCHEMA) for _, t, _ in kept]
    table = pa.concat_tables([NEGATIVES_SCHEMA.empty_table(), *tables])
    table = table.take(pc.sort_indices(table, sort_keys=[("id", "ascending")])).combine_chunks()
    st: dict[str, Any] = {"partitions": {}, "method": "vectorized"}
    counts: Counter = Counter()
    band_detail: dict[str, Any] = {}
    seconds: Counter = Counter()
    for _, _, rec in kept:
        raw = dict(rec["stats"])
        st["partitions"].update(raw.pop("partitions"))
        st["method"] = raw.pop("method")
        counts.update(raw)
        band_detail.update(rec["band_detail"])
        seconds.update(rec["seconds"])
    st.update(counts)
    for k in ("negatives_kept", "seconds_prepare", "seconds_select"):
        st.setdefault(k, 0)
    if isinstance(enc, dict):
        label, key = enc["encoder"], enc["encoder_key"]
    else:
        label, key = encoder_label(enc), model_key(enc)
    selection = {
        "encoder": label,
        "encoder_key": key,
        "band": {p: v["band"] for p, v in st["partitions"].items()},
        "band_method": {
            p: band_detail.get(p, {}).get("method", "config") for p in st["partitions"]
        },
        "band_detail": band_detail,
    }
    meta = {SELECTION_KEY: json.dumps(selection, sort_keys=True, default=str).encode()}
    n_pos = sum(v["positives"] for v in st["partitions"].values())
    secs = {k: round(v, 3) for k, v in seconds.items()}
    return table.replace_schema_metadata(meta), st, selection, secs, n_pos


def cmd_select_negatives(args: argparse.Namespace) -> None:
    """Sentence vectors, the cosine band per partition, and Algorithm 1.

    With ``--positives``: every partition in this one job. With ``--from-partitions``: only the
    gather of the parts ``select-negatives-partition`` wrote (the same file as one job).
    """
    from parasim.io import read_table, write_table
    from parasim.stagecli import UsageError, need, write_stats

    if bool(args.positives) == bool(args.from_partitions):
        raise UsageError(
            "select-negatives: give --positives (one job) or --from-partitions (gather)"
        )
    if args.positives:
        if not args.topics:
            raise UsageError("select-negatives: --topics is needed with --positives")
        parts, enc = _select_parts(args, None)
    else:
        parts, enc = [], None
        for name in args.from_partitions:
            t = read_table(need(str(Path(args.parts) / f"{name}.parquet"), "negatives part"))
            rec = json.loads(t.schema.metadata[PART_KEY])
            enc = enc or rec["encoder"]
            parts.append((name, t, rec))
        parts.sort(key=lambda p: p[0])
    table, st, selection, seconds, n_pos = gather_negatives(parts, enc)
    write_table(table, args.out)
    write_stats(args.stats, negatives_stats(st, n_pos, selection, seconds))


def cmd_select_negatives_partition(args: argparse.Namespace) -> None:
    """One partition's negatives (a job of its own; ``select-negatives --from-partitions``
    gathers)."""
    from parasim.io import write_table
    from parasim.negatives.vectors import model_key

    [(name, table, rec)], enc = _select_parts(args, args.partition)
    rec["encoder"] = {"encoder": encoder_label(enc), "encoder_key": model_key(enc)}
    meta = {PART_KEY: json.dumps(rec, sort_keys=True, default=str).encode()}
    write_table(table.replace_schema_metadata(meta), args.out)


def load_partition_topics(topics_dir: Path, part: str) -> Any:
    """One partition's topics, from its folder (``fit-topics-partition``), as
    :func:`~parasim.negatives.topics.load_topics` gives them."""
    from parasim.io import read_table
    from parasim.negatives.topics import TopicsResult
    from parasim.stagecli import need

    rec = json.loads(need(str(topics_dir / part / "partition.json"), "topics").read_text())
    return TopicsResult(
        doc_topics=read_table(topics_dir / part / "doc_topics.parquet"),
        partitions={} if rec["empty"] else {part: rec["info"]},
        stats=rec["stats"],
    )


#: Why a positive got no hard negative (``sentences_<reason>`` in the selection's counts).
NO_NEGATIVE = ("without_topic", "alone_in_topic", "without_in_band_candidate",
               "all_candidates_rejected")  # fmt: skip


def negatives_stats(
    raw: dict[str, Any], positives: int, selection: dict[str, Any], seconds: dict[str, float]
) -> Stats:
    """:func:`~parasim.negatives.select_negatives`' counts as the stage's stats.

    Rows in: positives; out: the hard negatives kept; dropped: the positives that got no
    negative, by reason.
    """
    c = dict(raw)
    dropped = {r: c.pop(f"sentences_{r}") for r in NO_NEGATIVE if f"sentences_{r}" in c}
    return Stats(
        "negatives",
        rows_in=positives,
        rows_out=c.pop("negatives_kept"),
        dropped=dropped,
        seconds={**seconds, "prepare": c.pop("seconds_prepare"), "select": c.pop("seconds_select")},
        figures={
            "partitions": c.pop("partitions"),
            "method": c.pop("method"),
            "selection": selection,
        },
        counts=c,  # candidates, rejections, negatives selected before balancing, ...
    )


def select_negatives_table(
    positives: pa.Table,
    topics: Any,
    vectors: Any,
    select: SelectConfig,
    corpus: CorpusConfig,
    band: Any,
) -> tuple[pa.Table, dict[str, Any]]:
    """:func:`parasim.negatives.select_negatives`, with a logged line per partition."""
    from parasim.negatives import select_negatives

    table, st = select_negatives(positives, topics, vectors, select, corpus, band=band)
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
    return table, st


def common_options(sp: argparse.ArgumentParser, positives_required: bool = True) -> None:
    """The options of every command over the positives of all sites (here and build-corpus)."""
    sp.add_argument(
        "--positives", nargs="+", required=positives_required, help="positives shards (all sites)"
    )
    sp.add_argument("--negatives-json", help="the `negatives` config section as JSON")
    sp.add_argument("--corpus-json", help="the `corpus` config section as JSON")
    sp.add_argument("--stats", help="write counts as JSON here")


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""

    sp = add("fit-topics", cmd_fit_topics, "LDA topics per partition (most coherent model kept).")
    common_options(sp, positives_required=False)
    sp.add_argument("--out", required=True, help="topics folder to write")
    sp.add_argument(
        "--from-partitions",
        nargs="+",
        help="gather these partitions' folders under --out (from fit-topics-partition) "
        "instead of fitting",
    )
    sp.add_argument(
        "--threads", type=int, help="processes across topic counts (overrides topics.workers)"
    )

    sp = add("fit-topics-partition", cmd_fit_topics_partition, "LDA topics of one partition.")
    common_options(sp)
    sp.add_argument("--partition", required=True, help="the partition to fit")
    sp.add_argument("--out", required=True, help="topics folder (gets <partition>/)")
    sp.add_argument(
        "--threads", type=int, help="processes across topic counts (overrides topics.workers)"
    )

    sp = add("select-negatives", cmd_select_negatives, "Hard negatives (Algorithm 1).")
    common_options(sp, positives_required=False)
    sp.add_argument("--topics", help="topics folder (from fit-topics), with --positives")
    sp.add_argument("--out", required=True, help="negatives file to write (.parquet)")
    sp.add_argument("--cache-dir", help="sentence-vector cache folder")
    sp.add_argument(
        "--from-partitions",
        nargs="+",
        help="gather these partitions' parts (from select-negatives-partition) from --parts "
        "instead of selecting",
    )
    sp.add_argument("--parts", help="folder of the partitions' parts (<partition>.parquet)")
    sp.add_argument(
        "--threads",
        type=int,
        help="torch threads and topic blocks at once (overrides encoder.threads, select.threads)",
    )

    sp = add(
        "select-negatives-partition",
        cmd_select_negatives_partition,
        "Hard negatives (Algorithm 1) of one partition.",
    )
    common_options(sp)
    sp.add_argument("--partition", required=True, help="the partition to select in")
    sp.add_argument("--topics", required=True, help="topics folder (gets <partition>/)")
    sp.add_argument("--out", required=True, help="the partition's part to write (.parquet)")
    sp.add_argument("--cache-dir", help="sentence-vector cache folder")
    sp.add_argument(
        "--threads",
        type=int,
        help="torch threads and topic blocks at once (overrides encoder.threads, select.threads)",
    )
