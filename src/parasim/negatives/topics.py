"""LDA topics per partition (gensim): the topic count with the best coherence, dominant topics.

Documents are the English side of each aligned page pair: positives grouped by ``pair_id`` (in
line order) and joined. Preprocessing for LDA, in this order:

1. ``gensim.utils.simple_preprocess``: lower-case, tokens of letters only, accents kept,
   ``min_token_len`` <= length <= 30;
2. drop ``gensim.parsing.preprocessing.STOPWORDS``;
3. optionally join frequent bigrams (``gensim.models.Phrases``, ``bigram_min_count``).

One LDA model is trained per topic count in ``num_topics`` (counts above the partition's number
of documents / ``min_docs_per_topic`` are skipped: c_v favours one topic per document on small
partitions, which leaves no candidates); the one with the highest coherence (``c_v`` default,
``u_mass`` option) is kept.

The sweep is bounded (``sweep_documents``): on a partition of more documents than that, the
coherence sweep runs on a seeded sample of that many documents (the lowest
:func:`~parasim.partition.seeded_key` of their ``pair_id`` under ``random_state``, kept in
``pair_id`` order), the counts gated by the sample's size, and only the chosen count is then
trained on all the documents. Without the bound, the sweep costs documents x the sum of the counts
allowed, and the counts allowed grow with the documents (12 counts, 2 to 80, from 240 documents
at 3 per topic): its cost per document grew 3x from a quarter to all of the Python documentation
(BENCHMARKS.md, "Global stages at scale"). With it, the sweep costs a constant and the one model
on all documents a cost per document. A partition of at most ``sweep_documents`` documents is
swept as before, on all of them (the same models and output). The paper (seed 001, 2.2) keeps
"the LDA model with the maximum coherence score" from "a range" of models and reports 17 to 74
topics; it does not say on how many documents the range is scored.

Every model of the sweep logs one line when it is done (count, coherence, seconds, i/n).

One partition is one job (:func:`fit_partition`: its folder ``<out>/<partition>/`` with the
model, the coherence table and plot, its ``doc_topics.parquet`` and ``partition.json``);
:func:`gather_topics` writes ``<out>/doc_topics.parquet`` and ``<out>/topics.json`` from the
partitions' folders. :func:`fit_topics` runs both, so one job and a job per partition write the
same files. LDA settings default to the paper's (random_state=100, update_every=1,
chunksize=100, alpha="auto", per_word_topics=True) except ``passes``: the paper uses 300, the
default here is 50 so that a small site's partition runs in minutes on 2 cores.

gensim's ``LdaMulticore`` cannot learn ``alpha="auto"`` (it raises NotImplementedError), so with
the paper's settings the models are plain ``LdaModel`` and the parallelism is across topic counts
(``workers`` processes, one count each): the same models as a sequential run. ``multicore: true``
switches to ``LdaMulticore`` (only with a fixed alpha; different models from ``LdaModel``).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from parasim.config import Settings, schema_default
from parasim.io import DOC_TOPICS_SCHEMA, read_table, write_table
from parasim.partition import partition_column, seeded_key
from parasim.stats import add

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class TopicsConfig(Settings, section="negatives.topics"):
    """The ``negatives.topics`` config section (the schema: the paper's settings but ``passes``)."""

    num_topics: Sequence[int]
    coherence: str  # "c_v" or "u_mass"
    passes: int  # paper: 300
    iterations: int
    chunksize: int
    update_every: int
    alpha: str | float
    random_state: int
    per_word_topics: bool
    min_token_len: int
    bigrams: bool
    bigram_min_count: int
    min_docs_per_topic: float  # counts k with k * this > documents are skipped
    sweep_documents: int  # the sweep runs on a seeded sample of this many documents (0: all)
    workers: int  # processes across topic counts
    multicore: bool  # LdaMulticore per model (needs a fixed alpha)

    def __post_init__(self) -> None:
        if not self.num_topics or any(int(k) < 1 for k in self.num_topics):
            raise ValueError(f"negatives.topics.num_topics: positive ints, got {self.num_topics}")
        if self.coherence not in ("c_v", "u_mass"):
            raise ValueError(f"negatives.topics.coherence: 'c_v' or 'u_mass', not {self.coherence}")
        if self.sweep_documents < 0:
            raise ValueError(
                f"negatives.topics.sweep_documents: >= 0 (0: no bound), got {self.sweep_documents}"
            )
        if self.multicore and self.alpha == "auto":
            raise ValueError(
                "negatives.topics: multicore=true needs a fixed alpha ('symmetric', "
                "'asymmetric' or a number); gensim's LdaMulticore cannot learn alpha='auto'"
            )


@dataclasses.dataclass
class TopicsResult:
    """What :func:`fit_topics` found.

    Attributes:
        doc_topics: rows of :data:`DOC_TOPICS_SCHEMA`, one per (partition, page pair).
        partitions: partition -> {"num_topics", "coherence", "measure", "passes", "n_documents",
            "table": [{"num_topics", "coherence", "seconds"}], "model": path or None,
            "reason": why LDA was skipped or None, "topic_sizes": {topic: n_documents}}.
        stats: counts by reason.
    """

    doc_topics: pa.Table
    partitions: dict[str, dict[str, Any]]
    stats: dict[str, Any]

    def topic_of(self) -> dict[tuple[str, str], int]:
        """(partition, pair_id) -> dominant topic."""
        d = self.doc_topics.to_pydict()
        return {(p, q): t for p, q, t in zip(d["partition"], d["pair_id"], d["topic"], strict=True)}


def preprocess(text: str, min_token_len: int = 3) -> list[str]:
    """LDA tokens of one document: lower-case, letters only, no gensim STOPWORDS."""
    from gensim.parsing.preprocessing import STOPWORDS
    from gensim.utils import simple_preprocess

    return [
        t
        for t in simple_preprocess(text, deacc=False, min_len=min_token_len, max_len=30)
        if t not in STOPWORDS
    ]


def documents(
    positives: pa.Table, partitions: Mapping[str, Mapping[str, Any]] | None = None
) -> dict[str, list[tuple[str, str]]]:
    """partition -> [(pair_id, English text of the page pair)], sorted by pair_id.

    A page pair's English text is its positives' ``en_text`` in line order (first ``en_idx``).
    """
    parts = partition_column(positives, partitions or schema_default("corpus.partitions"))
    d = positives.select(["pair_id", "en_text", "en_idx", "id"]).to_pydict()
    lines: dict[tuple[str, str], list[tuple[int, str, str]]] = defaultdict(list)
    for i, part in enumerate(parts):
        first = min(d["en_idx"][i]) if d["en_idx"][i] else -1
        lines[(part, d["pair_id"][i])].append((first, d["id"][i], d["en_text"][i]))
    out: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for part, pid in sorted(lines):
        out[part].append((pid, "\n".join(t for _, _, t in sorted(lines[(part, pid)]))))
    return dict(out)


def _train_one(args: tuple) -> tuple[int, float, float, Any]:
    """Train one LDA model and, with ``score``, its coherence (top level: runs in worker
    processes); unscored, the coherence is NaN."""
    k, bow, texts, dictionary, cfg, score = args
    from gensim.models import CoherenceModel, LdaModel, LdaMulticore

    t0 = time.perf_counter()
    common = dict(
        corpus=bow,
        id2word=dictionary,
        num_topics=k,
        random_state=cfg.random_state,
        chunksize=cfg.chunksize,
        passes=cfg.passes,
        iterations=cfg.iterations,
        alpha=cfg.alpha,
        per_word_topics=cfg.per_word_topics,
    )
    if cfg.multicore:
        model = LdaMulticore(workers=max(1, cfg.workers), **common)
    else:
        model = LdaModel(update_every=cfg.update_every, **common)
    if not score:
        return k, math.nan, time.perf_counter() - t0, model
    if cfg.coherence == "c_v":
        cm = CoherenceModel(
            model=model, texts=texts, dictionary=dictionary, coherence="c_v", processes=1
        )
    else:
        cm = CoherenceModel(model=model, corpus=bow, dictionary=dictionary, coherence="u_mass")
    coh = float(cm.get_coherence())
    return k, coh, time.perf_counter() - t0, model


def sweep_sample(pair_ids: Sequence[str], cap: int, seed: int) -> list[int]:
    """Indexes (ascending) of the documents the coherence sweep runs on.

    All of them when ``cap`` is 0 or not below their number; else the ``cap`` whose
    ``seeded_key(seed, "topics-sweep", pair_id)`` is lowest: the same documents whatever the
    order they come in, and a document stays in the sample when others are added unless one of
    them hashes lower.
    """
    if not cap or len(pair_ids) <= cap:
        return list(range(len(pair_ids)))
    order = sorted(
        range(len(pair_ids)), key=lambda i: seeded_key(seed, "topics-sweep", pair_ids[i])
    )
    return sorted(order[:cap])


def _sweep(part: str, jobs: list[tuple], cfg: TopicsConfig) -> list[tuple[int, float, float, Any]]:
    """Train and score every topic count of ``jobs``, one log line per model as it is done."""
    results = []

    def done(i: int, res: tuple[int, float, float, Any]) -> None:
        k, coh, secs, _ = res
        results.append(res)
        log.info(
            "%s: %d topics, coherence %s %.4f (%.1fs) [%d/%d]",
            part, k, cfg.coherence, coh, secs, i, len(jobs),
        )  # fmt: skip

    if cfg.workers > 1 and not cfg.multicore and len(jobs) > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(
            max_workers=min(cfg.workers, len(jobs)), mp_context=mp.get_context("spawn")
        ) as ex:
            for i, res in enumerate(ex.map(_train_one, jobs), 1):  # in order, as they come
                done(i, res)
    else:
        for i, job in enumerate(jobs, 1):
            done(i, _train_one(job))
    return results


def plot_coherence(table: list[dict], chosen: int | None, path: Path, title: str) -> None:
    """Coherence vs number of topics (the paper's Figure 1), as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ks = [r["num_topics"] for r in table]
    cs = [r["coherence"] for r in table]
    fig, ax = plt.subplots(figsize=(5, 3.2), dpi=120)
    ax.plot(ks, cs, marker="o")
    if chosen is not None:
        c = next(r["coherence"] for r in table if r["num_topics"] == chosen)
        ax.axvline(chosen, color="grey", linestyle=":")
        ax.annotate(f"{chosen} topics", (chosen, c), textcoords="offset points", xytext=(5, 5))
    ax.set_xlabel("Number of topics")
    ax.set_ylabel("Coherence score")
    ax.set_title(title)
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    os.replace(tmp, path)


def _write_sweep(pdir: Path, table: list[dict], chosen: int, title: str) -> None:
    """The sweep's ``coherence.tsv`` (a row per topic count, the chosen one marked) and
    ``coherence.png``."""
    with open(pdir / ".coherence.tsv.tmp", "w", encoding="utf-8") as fh:
        fh.write("num_topics\tcoherence\tseconds\tchosen\n")
        for r in table:
            mark = int(r["num_topics"] == chosen)
            fh.write(f"{r['num_topics']}\t{r['coherence']:.6f}\t{r['seconds']}\t{mark}\n")
    os.replace(pdir / ".coherence.tsv.tmp", pdir / "coherence.tsv")
    plot_coherence(table, chosen, pdir / "coherence.png", title)


def _fit_partition(
    part: str, docs: list[tuple[str, str]], cfg: TopicsConfig, out_dir: Path, stats: Counter
) -> tuple[list[dict], dict[str, Any]]:
    from gensim.corpora import Dictionary

    texts = [preprocess(t, cfg.min_token_len) for _, t in docs]
    if cfg.bigrams:
        from gensim.models.phrases import Phrases

        phr = Phrases(texts, min_count=cfg.bigram_min_count, threshold=10).freeze()
        texts = [phr[t] for t in texts]
    n_empty = sum(1 for t in texts if not t)
    if n_empty:
        stats["documents_without_tokens"] += n_empty
        log.warning("%s: %d document(s) have no tokens after preprocessing", part, n_empty)
    dictionary = Dictionary(texts)
    bow = [dictionary.doc2bow(t) for t in texts]
    sample = sweep_sample([pid for pid, _ in docs], cfg.sweep_documents, cfg.random_state)
    sampled = len(sample) < len(docs)
    s_texts = [texts[i] for i in sample] if sampled else texts
    # the sweep's own vocabulary: a word of no sampled document would sit in the top words of a
    # little-used topic, and c_v is undefined (NaN) for a word the texts never show
    s_dict = Dictionary(s_texts) if sampled else dictionary
    s_bow = [s_dict.doc2bow(t) for t in s_texts] if sampled else bow
    wanted = sorted({int(k) for k in cfg.num_topics})
    ks = [k for k in wanted if k * cfg.min_docs_per_topic <= len(sample)]
    if len(ks) < len(wanted):
        stats["topic_counts_skipped_too_few_documents"] += len(wanted) - len(ks)
    pdir = out_dir / part
    pdir.mkdir(parents=True, exist_ok=True)
    info: dict[str, Any] = {
        "n_documents": len(docs),
        "sweep_documents": len(sample),
        "vocabulary": len(dictionary),
        "measure": cfg.coherence,
        "passes": cfg.passes,
        "table": [],
        "model": None,
        "reason": None,
        "num_topics": 1,
        "coherence": None,
    }
    reason = None
    if len(docs) < 2 or not ks:
        reason = (
            f"{len(docs)} document(s): too few for the smallest topic count {wanted[0]} "
            f"(x {cfg.min_docs_per_topic} documents per topic): all documents share topic 0 "
            "(LDA skipped)"
        )
    elif len(dictionary) == 0 or (sampled and len(s_dict) == 0):
        reason = "no tokens left after preprocessing: all documents share topic 0 (LDA skipped)"
    if reason:
        log.warning("partition %s: %s", part, reason)
        stats["partitions_single_topic"] += 1
        info["reason"] = reason
        rows = [
            {"partition": part, "pair_id": pid, "topic": 0, "topic_prob": 1.0, "n_tokens": len(t)}
            for (pid, _), t in zip(docs, texts, strict=True)
        ]
        info["topic_sizes"] = {"0": len(docs)}
        return rows, info

    log.info(
        "%s: sweeping %d topic counts %s on %d of %d documents (%s coherence, %d passes)",
        part, len(ks), ks, len(sample), len(docs), cfg.coherence, cfg.passes,
    )  # fmt: skip
    results = _sweep(part, [(k, s_bow, s_texts, s_dict, cfg, True) for k in ks], cfg)
    table = []
    best = None
    for k, coh, secs, model in results:
        table.append({"num_topics": k, "coherence": coh, "seconds": round(secs, 3)})
        if math.isnan(coh):
            stats["coherence_nan"] += 1
            continue
        if best is None or coh > best[1]:
            best = (k, coh, model)
    if best is None:  # every coherence NaN: the smallest count, reported as such
        k, coh, _, model = results[0]
        best = (k, coh, model)
        info["reason"] = "coherence undefined (NaN) for every topic count; kept the smallest"
    k, coh, model = best
    if sampled:  # the chosen count on every document (its coherence: the sample's)
        log.info("%s: training %d topics on all %d documents", part, k, len(docs))
        _, _, secs, model = _train_one((k, bow, texts, dictionary, cfg, False))
        info["final_seconds"] = round(secs, 3)
        log.info("%s: %d topics on all %d documents in %.1fs", part, k, len(docs), secs)
    model_path = pdir / "lda.model"
    model.save(str(model_path))
    _write_sweep(pdir, table, k, f"{part}: {cfg.coherence} coherence")
    rows = []
    for (pid, _), t, b in zip(docs, texts, bow, strict=True):
        dist = model.get_document_topics(b, minimum_probability=0.0, per_word_topics=False)
        topic, prob = max(dist, key=lambda tp: (tp[1], -tp[0]))
        rows.append(
            {
                "partition": part,
                "pair_id": pid,
                "topic": int(topic),
                "topic_prob": float(prob),
                "n_tokens": len(t),
            }
        )
    sizes = Counter(r["topic"] for r in rows)
    singletons = sum(1 for v in sizes.values() if v == 1)
    stats["topics_with_one_document"] += singletons
    info.update(
        {
            "num_topics": k,
            "coherence": coh,
            "table": table,
            "model": str(model_path),
            "topic_sizes": {str(t): sizes[t] for t in sorted(sizes)},
        }
    )
    return rows, info


def _write_json(path: Path, obj: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=list), encoding="utf-8")
    os.replace(tmp, path)


def fit_partition(
    part: str,
    docs: list[tuple[str, str]],
    cfg: TopicsConfig | Mapping[str, Any] | None,
    out_dir: str | os.PathLike,
    rows_in: int = 0,
) -> dict[str, Any]:
    """Topics of one partition (one job), written to ``<out_dir>/<part>/``.

    Args:
        part: the partition's name.
        docs: its documents, from :func:`documents` (none: the partition is in the config but
            has no positives; its folder says so and :func:`gather_topics` leaves it out).
        cfg: the ``negatives.topics`` section.
        out_dir: the topics folder; gets ``<part>/`` with the model, ``coherence.tsv``,
            ``coherence.png``, ``doc_topics.parquet`` (its page pairs) and ``partition.json``.
        rows_in: the partition's positives (for the stage's stats).

    Returns:
        what ``partition.json`` holds: ``info`` (as :attr:`TopicsResult.partitions`), ``stats``
        (counts by reason), ``rows_in``, ``empty``.
    """
    cfg = TopicsConfig.from_config(cfg)
    pdir = Path(out_dir) / part
    pdir.mkdir(parents=True, exist_ok=True)
    stats: Counter = Counter()
    rec: dict[str, Any] = {"partition": part, "rows_in": rows_in, "empty": not docs}
    if docs:
        t0 = time.perf_counter()
        rows, info = _fit_partition(part, docs, cfg, pdir.parent, stats)
        info["seconds"] = round(time.perf_counter() - t0, 3)
        log.info(
            "%s: %d documents -> %d topics (coherence %s) in %.1fs",
            part, len(docs), info["num_topics"], info["coherence"], info["seconds"],
        )  # fmt: skip
    else:
        rows, info = [], {}
        log.warning("partition %s: no positives; nothing to fit", part)
    write_table(pa.Table.from_pylist(rows, schema=DOC_TOPICS_SCHEMA), pdir / "doc_topics.parquet")
    rec.update(info=info, stats=dict(stats))
    _write_json(pdir / "partition.json", rec)
    return rec


def gather_topics(
    out_dir: str | os.PathLike,
    partitions: Sequence[str],
    cfg: TopicsConfig | Mapping[str, Any] | None = None,
) -> TopicsResult:
    """``<out_dir>/doc_topics.parquet`` and ``topics.json`` from the partitions' folders.

    Args:
        out_dir: the topics folder :func:`fit_partition` wrote each partition's folder in.
        partitions: the partitions to gather (in any order; a folder marked empty is left out).
        cfg: the ``negatives.topics`` section (recorded in ``topics.json``).
    """
    cfg = TopicsConfig.from_config(cfg)
    out_dir = Path(out_dir)
    stats: dict[str, Any] = {}
    infos: dict[str, dict[str, Any]] = {}
    tables = []
    for part in sorted(set(partitions)):
        rec = json.loads((out_dir / part / "partition.json").read_text(encoding="utf-8"))
        if rec["empty"]:
            continue
        stats = add(stats, rec["stats"])
        infos[part] = rec["info"]
        tables.append(read_table(out_dir / part / "doc_topics.parquet"))
    table = pa.concat_tables(tables).combine_chunks() if tables else DOC_TOPICS_SCHEMA.empty_table()
    stats["partitions"] = len(infos)
    stats["documents"] = table.num_rows
    write_table(table, out_dir / "doc_topics.parquet")
    summary = {"partitions": infos, "stats": dict(stats), "config": dataclasses.asdict(cfg)}
    _write_json(out_dir / "topics.json", summary)
    return TopicsResult(doc_topics=table, partitions=infos, stats=dict(stats))


def fit_topics(
    positives: pa.Table,
    cfg: TopicsConfig | Mapping[str, Any] | None,
    out_dir: str | os.PathLike,
    partitions: Mapping[str, Mapping[str, Any]] | None = None,
) -> TopicsResult:
    """Train LDA per partition over the topic counts, keep the most coherent model (one job:
    :func:`fit_partition` for each partition, then :func:`gather_topics`).

    Args:
        positives: rows of ``POSITIVES_SCHEMA`` (all shards of the sites concerned).
        cfg: the ``negatives.topics`` section.
        out_dir: gets ``<partition>/`` (:func:`fit_partition`), ``doc_topics.parquet`` and
            ``topics.json``.
        partitions: the ``corpus.partitions`` mapping (default: the paper's three).

    Returns:
        The dominant topic of every page pair, the chosen model per partition, counts.
    """
    cfg = TopicsConfig.from_config(cfg)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    rows_in = Counter(
        partition_column(positives, partitions or schema_default("corpus.partitions"))
    )
    docs = documents(positives, partitions)
    for part, pdocs in docs.items():
        fit_partition(part, pdocs, cfg, out_dir, rows_in=rows_in[part])
    return gather_topics(out_dir, list(docs), cfg)


def load_topics(out_dir: str | os.PathLike) -> TopicsResult:
    """Read back what :func:`fit_topics` wrote in ``out_dir``."""
    out_dir = Path(out_dir)
    summary = json.loads((out_dir / "topics.json").read_text(encoding="utf-8"))
    return TopicsResult(
        doc_topics=read_table(out_dir / "doc_topics.parquet"),
        partitions=summary["partitions"],
        stats=summary["stats"],
    )


def load_partition_topics(out_dir: str | os.PathLike, part: str) -> TopicsResult:
    """One partition's topics, from its folder (:func:`fit_partition`), as :func:`load_topics`
    gives them."""
    pdir = Path(out_dir) / part
    rec = json.loads((pdir / "partition.json").read_text())
    return TopicsResult(
        doc_topics=read_table(pdir / "doc_topics.parquet"),
        partitions={} if rec["empty"] else {part: rec["info"]},
        stats=rec["stats"],
    )
