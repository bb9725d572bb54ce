"""Parquet schemas and shard read/write, in one place.

Every Parquet output of the workflow has its schema here, in the order the stages write them:
pages, pairs, lines, translated, aligned, positives, dropped, LDA document topics, negatives, the
corpus, divergences and scores (the training families' own outputs excepted). Every stage writes
through :func:`write_table`, which writes to a temporary file and renames it, so a killed job
never leaves a half-written shard that looks finished.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

#: Bump when a stage's output schema changes incompatibly.
SCHEMA_VERSION = "1"

PAGES_SCHEMA = pa.schema(
    [
        pa.field(
            "url", pa.string(), nullable=False
        ),  # as requested (canonical origin, no fragment)
        pa.field("final_url", pa.string()),  # after redirects
        pa.field("status", pa.int32()),  # HTTP status; null when no response
        pa.field("content_type", pa.string()),
        pa.field("declared_lang", pa.string()),  # <html lang> / Content-Language, primary subtag
        pa.field("fetched_at", pa.timestamp("ms", tz="UTC")),
        pa.field("content_hash", pa.string()),  # sha256 of the raw body
        pa.field("encoding", pa.string()),  # encoding used to decode html
        pa.field("html", pa.large_string()),  # decoded HTML; null for skipped pages
        pa.field("depth", pa.int32()),
        pa.field("referer", pa.string()),
        pa.field("skip_reason", pa.string()),  # null: a usable HTML page
        pa.field("error", pa.string()),
    ],
    metadata={"parasim.schema": "pages", "parasim.schema_version": SCHEMA_VERSION},
)

PAIRS_SCHEMA = pa.schema(
    [
        pa.field("pair_id", pa.string(), nullable=False),
        pa.field("site", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("lang_pair", pa.string(), nullable=False),  # "en-fr"
        pa.field("en_url", pa.string(), nullable=False),
        pa.field("other_url", pa.string(), nullable=False),
        pa.field("other_lang", pa.string(), nullable=False),
        # e.g. ["hreflang", "toggle"], plus "en_alias:<X/>" / "other_alias:<X/>" where a side's
        # canonical URL X/index.html also answered as its directory URL X/ (parasim.pair)
        pa.field("evidence", pa.list_(pa.string()), nullable=False),
        pa.field("shard", pa.int32(), nullable=False),
        # the measured language of each page's main text (heliport's ISO 639-3 code, "und" when
        # none) and its share of the identified letters; null when the pair stage did not
        # measure (clean.untranslated_pages.enabled: false)
        pa.field("en_page_lang", pa.string()),
        pa.field("en_page_share", pa.float64()),
        pa.field("other_page_lang", pa.string()),
        pa.field("other_page_share", pa.float64()),
    ],
    metadata={"parasim.schema": "pairs", "parasim.schema_version": SCHEMA_VERSION},
)

LINES_SCHEMA = pa.schema(
    [
        pa.field("pair_id", pa.string(), nullable=False),
        pa.field("site", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("lang_pair", pa.string(), nullable=False),
        pa.field("en_url", pa.string(), nullable=False),
        pa.field("other_url", pa.string(), nullable=False),
        pa.field("other_lang", pa.string(), nullable=False),
        pa.field("en_lines", pa.list_(pa.string()), nullable=False),
        pa.field("other_lines", pa.list_(pa.string()), nullable=False),
        pa.field("n_en", pa.int32(), nullable=False),
        pa.field("n_other", pa.int32(), nullable=False),
        pa.field("equal_lines", pa.bool_(), nullable=False),
        pa.field("selector_used", pa.bool_(), nullable=False),  # main_selector matched both sides
    ],
    metadata={"parasim.schema": "lines", "parasim.schema_version": SCHEMA_VERSION},
)


TRANSLATED_SCHEMA = pa.schema(
    list(LINES_SCHEMA)
    + [
        # English translation of each other-language line; null where translation failed.
        pa.field("other_en_lines", pa.list_(pa.string()), nullable=False),
        pa.field("n_untranslated", pa.int32(), nullable=False),
        pa.field("mt_backend", pa.string(), nullable=False),  # "apertium", "marian:<model>", ...
    ],
    metadata={"parasim.schema": "translated", "parasim.schema_version": SCHEMA_VERSION},
)

_ALIGNED_FIELDS = [
    pa.field("id", pa.string(), nullable=False),  # stable_id(pair_id, en_idx, other_idx)
    pa.field("pair_id", pa.string(), nullable=False),
    pa.field("site", pa.string(), nullable=False),
    pa.field("domain", pa.string(), nullable=False),
    pa.field("lang_pair", pa.string(), nullable=False),
    pa.field("other_lang", pa.string(), nullable=False),
    pa.field("en_text", pa.string(), nullable=False),
    pa.field("other_text", pa.string(), nullable=False),
    pa.field("other_en", pa.string()),  # English translation of other_text
    pa.field("method", pa.string(), nullable=False),  # "paper", "dp", "review"
    pa.field("en_idx", pa.list_(pa.int32()), nullable=False),  # line indices (n:m links)
    pa.field("other_idx", pa.list_(pa.int32()), nullable=False),
    pa.field("score", pa.float32()),  # word-frequency cosine similarity
    pa.field("score_emb", pa.float32()),  # sentence-vector cosine, when computed
    pa.field("en_url", pa.string(), nullable=False),
    pa.field("other_url", pa.string(), nullable=False),
]

#: The align stage's sentence pairs, before cleaning (``results/aligned/``).
ALIGNED_SCHEMA = pa.schema(
    _ALIGNED_FIELDS,
    metadata={"parasim.schema": "aligned", "parasim.schema_version": SCHEMA_VERSION},
)

#: The positives: the aligned pairs the clean stage kept (``results/positives/``).
POSITIVES_SCHEMA = pa.schema(
    [
        *_ALIGNED_FIELDS,
        pa.field("n_seen", pa.int32()),  # times the pair was seen on the site (after cleaning)
        pa.field("n_pages", pa.int32()),  # page pairs it was seen on
        pa.field("furniture", pa.bool_()),  # seen on >= clean.furniture_share of the page pairs
        # rules and language checks that flagged the pair but that the decision overruled
        # (clean.decision: the translation itself is the evidence), e.g. ["code_markup"]
        pa.field("overruled", pa.list_(pa.string())),
    ],
    metadata={"parasim.schema": "positives", "parasim.schema_version": SCHEMA_VERSION},
)

#: The aligned pairs the clean stage dropped, with the reason (``results/dropped/``).
DROPPED_SCHEMA = pa.schema(
    [
        *_ALIGNED_FIELDS,
        pa.field("reason", pa.string(), nullable=False),  # a rule, wrong_language_*, duplicate
        pa.field("duplicate_of", pa.string()),  # for duplicates: the id of the kept row
    ],
    metadata={"parasim.schema": "dropped", "parasim.schema_version": SCHEMA_VERSION},
)


#: The dominant LDA topic of each page pair (``results/topics/doc_topics.parquet``).
DOC_TOPICS_SCHEMA = pa.schema(
    [
        pa.field("partition", pa.string(), nullable=False),
        pa.field("pair_id", pa.string(), nullable=False),
        pa.field("topic", pa.int32(), nullable=False),  # dominant topic
        pa.field("topic_prob", pa.float32(), nullable=False),
        pa.field("n_tokens", pa.int32(), nullable=False),  # tokens after preprocessing
    ],
    metadata={"parasim.schema": "doc_topics", "parasim.schema_version": "1"},
)

#: The hard negatives of Algorithm 1 (``results/negatives/negatives.parquet``).
NEGATIVES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # stable_id("neg", source_id, cand_id)
        pa.field("partition", pa.string(), nullable=False),
        pa.field("pair_id", pa.string(), nullable=False),  # page pair of S
        pa.field("cand_pair_id", pa.string(), nullable=False),  # page pair of the candidate
        pa.field("site", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("lang_pair", pa.string(), nullable=False),
        pa.field("other_lang", pa.string(), nullable=False),
        pa.field("en_text", pa.string(), nullable=False),  # S
        pa.field("other_text", pa.string(), nullable=False),  # counterpart of the candidate
        pa.field("other_en", pa.string()),  # its English translation
        pa.field("cand_en_text", pa.string(), nullable=False),  # the candidate English sentence
        pa.field("source_id", pa.string(), nullable=False),  # positive id of S
        pa.field("cand_id", pa.string(), nullable=False),  # positive id of the candidate
        pa.field("cosine", pa.float32(), nullable=False),  # cos(M(S), M(candidate))
        pa.field("topic", pa.int32(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),  # 0..n-1 among S's negatives
        pa.field("en_url", pa.string(), nullable=False),
        pa.field("other_url", pa.string(), nullable=False),
        pa.field("en_idx", pa.list_(pa.int32()), nullable=False),
        pa.field("other_idx", pa.list_(pa.int32()), nullable=False),
    ],
    metadata={"parasim.schema": "negatives", "parasim.schema_version": SCHEMA_VERSION},
)

_SPAN = pa.struct([pa.field("start", pa.int32()), pa.field("end", pa.int32())])

#: Version of :data:`CORPUS_SCHEMA`; bump on incompatible change.
CORPUS_SCHEMA_VERSION = "2"  # 2: grades and the divergent tier (issue 49)

#: The labelled corpus, positives and negatives alike (``results/corpus/data/<partition>/``).
CORPUS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # positive id, or the negative's id
        pa.field("sentence1", pa.string(), nullable=False),  # English
        pa.field("sentence2", pa.string(), nullable=False),  # other language
        pa.field("label", pa.int8(), nullable=False),  # 1 similar, 0 dissimilar
        pa.field("lang_pair", pa.string(), nullable=False),  # "en-fr"
        pa.field("partition", pa.string(), nullable=False),  # "EN-FR-G"
        pa.field("domain", pa.string(), nullable=False),
        pa.field("site", pa.string(), nullable=False),
        # "aligned", "lda-negative", "synthetic-divergence", "mined-divergence"
        pa.field("source", pa.string(), nullable=False),
        pa.field("align_score", pa.float32()),  # positives: word-frequency cosine of alignment
        pa.field("cosine", pa.float32()),  # negatives: encoder cosine of the two English sides
        pa.field("topic", pa.int32()),  # dominant LDA topic of sentence1's page
        pa.field("pair_id", pa.string(), nullable=False),  # page pair of sentence1
        pa.field("pair_id2", pa.string(), nullable=False),  # page pair of sentence2
        pa.field("url1", pa.string(), nullable=False),  # page of sentence1
        pa.field("url2", pa.string(), nullable=False),  # page of sentence2
        pa.field("idx1", pa.list_(pa.int32()), nullable=False),  # line indices in url1
        pa.field("idx2", pa.list_(pa.int32()), nullable=False),  # line indices in url2
        pa.field("split", pa.string(), nullable=False),  # "train" / "test"
        pa.field("fold", pa.int8()),  # validation fold in train; null in test
        # "equivalent" (label 1), "divergent" / "unrelated" (label 0): REFreSD's three classes
        pa.field("grade", pa.string(), nullable=False),
        pa.field("negative_kind", pa.string()),  # "lda", "synthetic", "mined"; null: positive
        pa.field("parent_id", pa.string()),  # divergent rows: the positive they diverge from
        pa.field("divergence_type", pa.string()),  # synthetic rows: seed 000's type
        pa.field("diff_side", pa.string()),  # divergent rows: the edited side, "en" / "other"
        pa.field("diff_spans", pa.list_(_SPAN)),  # ... what differs (characters of that side)
        pa.field("diff_kind", pa.string()),  # ... date, version, number, name, other
        pa.field("mined_similarity", pa.float32()),  # mined rows: encoder cosine of the two
    ],
    metadata={"parasim.schema": "corpus", "parasim.schema_version": CORPUS_SCHEMA_VERSION},
)

_LINK = pa.struct([pa.field("en", pa.int32()), pa.field("other", pa.int32())])

#: Natural divergences mined from a site (``results/mined/<site>.parquet``): a positive's English
#: side with another line of the site that is close to it but not its translation.
MINED_SCHEMA = pa.schema(
    [
        pa.field(
            "id", pa.string(), nullable=False
        ),  # stable_id("mined", positive_id, candidate_id)
        pa.field("positive_id", pa.string(), nullable=False),  # the positive (its English side)
        pa.field("candidate_id", pa.string(), nullable=False),  # the positive the line is from
        pa.field("site", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("lang_pair", pa.string(), nullable=False),
        pa.field("other_lang", pa.string(), nullable=False),
        pa.field("pair_id", pa.string(), nullable=False),  # page pair of the positive
        pa.field("cand_pair_id", pa.string(), nullable=False),  # page pair of the mined line
        pa.field("en_text", pa.string(), nullable=False),  # the positive's English side
        pa.field("other_text", pa.string(), nullable=False),  # the mined line
        pa.field("partner_text", pa.string(), nullable=False),  # the positive's translation
        pa.field("cand_en_text", pa.string(), nullable=False),  # the mined line's own English
        pa.field("en_url", pa.string(), nullable=False),
        pa.field("other_url", pa.string(), nullable=False),
        pa.field("en_idx", pa.list_(pa.int32()), nullable=False),
        pa.field("other_idx", pa.list_(pa.int32()), nullable=False),
        pa.field("rank", pa.int8(), nullable=False),  # 0: the positive's nearest kept candidate
        pa.field("similarity", pa.float32(), nullable=False),  # cosine(English side, mined line)
        pa.field("partner_similarity", pa.float32(), nullable=False),  # cosine(English, partner)
        pa.field("kind", pa.string(), nullable=False),  # date, version, number, name, other
        pa.field("spans", pa.list_(_SPAN), nullable=False),  # what differs, on other_text
        pa.field("partner_spans", pa.list_(_SPAN), nullable=False),  # ... on partner_text
    ],
    metadata={"parasim.schema": "mined", "parasim.schema_version": SCHEMA_VERSION},
)

#: Synthetic divergences in ranking groups, with EQ/DIV token tags (``results/divergences/``).
DIVERGENCES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # stable_id(seed_id, type, side, variant)
        pa.field("group_id", pa.string(), nullable=False),  # one ranking group per seed pair
        pa.field("seed_id", pa.string(), nullable=False),  # positives.id
        pa.field("pair_id", pa.string()),
        pa.field("site", pa.string()),
        pa.field("lang_pair", pa.string()),
        pa.field("other_lang", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),  # one of parasim.divergences.TYPES
        pa.field("rank", pa.int8(), nullable=False),  # 0 equivalent ... 3 subtree deletion
        pa.field("side", pa.string(), nullable=False),  # edited side: "en", "other", "none"
        pa.field("variant", pa.int32(), nullable=False),  # index among the group's rows of type
        pa.field("en_text", pa.string(), nullable=False),
        pa.field("other_text", pa.string(), nullable=False),
        pa.field("en_tokens", pa.list_(pa.string()), nullable=False),
        pa.field("other_tokens", pa.list_(pa.string()), nullable=False),
        pa.field("en_tags", pa.list_(pa.string()), nullable=False),  # "EQ"/"DIV" per token
        pa.field("other_tags", pa.list_(pa.string()), nullable=False),
        # Edited side: seed-token spans removed/replaced, variant-token spans inserted.
        pa.field("src_spans", pa.list_(_SPAN), nullable=False),
        pa.field("new_spans", pa.list_(_SPAN), nullable=False),
        pa.field("orig_word", pa.string()),  # lexical substitution: the replaced word
        pa.field("new_word", pa.string()),  # ... the substitute (inflected)
        pa.field("wn_relation", pa.string()),  # "hypernym" (generalization) / "hyponym"
        pa.field("wn_synset", pa.string()),  # synset the substitute was taken from
        pa.field("lm_score", pa.float32()),  # LM score of the chosen substitute
        pa.field("source_id", pa.string()),  # phrase replacement: seed id the phrase came from
        pa.field("alignment", pa.list_(_LINK)),  # seed links (equivalent rows only)
        pa.field("checks_failed", pa.list_(pa.string()), nullable=False),  # empty: valid
    ],
    metadata={"parasim.schema": "divergences", "parasim.schema_version": SCHEMA_VERSION},
)

#: The 15 AMR aspects, in the order of seed 002's section 4 (:data:`parasim.amr.ASPECTS` is this
#: tuple: the scores schema needs the names without loading any AMR code).
AMR_ASPECTS = (
    "smatch",
    "wlk",
    "wwlk",
    "frames",
    "unlabeled",
    "named_entity",
    "negation",
    "concepts",
    "coreference",
    "srl",
    "quant",
    "max_indegree",
    "max_outdegree",
    "max_degree",
    "root",
)
#: Their score columns.
AMR_COLUMNS = tuple(f"amr_{a}" for a in AMR_ASPECTS)
#: Seed 004's entity cosines, one per group of :data:`parasim.amr.ENTITY_GROUPS`.
ENTITY_COLUMNS = ("ent_geo", "ent_org", "ent_date", "ent_qty")
#: Every score column of :data:`SCORES_SCHEMA`, in its order.
SCORE_COLUMNS = (*AMR_COLUMNS, *ENTITY_COLUMNS, "bm25", "bm25_norm", "chrf", "bleu", "emb_cosine")

#: Graphs and metric scores of every positive, hard negative and divergence
#: (``results/scores/<site>/<shard>.parquet``).
SCORES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # the row's id in its source table
        pa.field("source", pa.string(), nullable=False),  # positive / negative / divergence
        pa.field("site", pa.string()),
        pa.field("pair_id", pa.string()),  # page pair of the English side
        pa.field("label", pa.int8()),  # 1 positive, 0 hard negative, null divergence
        pa.field("type", pa.string()),  # divergence type (equivalent, ...); null otherwise
        pa.field("en_text", pa.string(), nullable=False),
        pa.field("other_text", pa.string(), nullable=False),
        pa.field("other_en", pa.string()),  # English translation of other_text, as scored
        pa.field("skip_reason", pa.string()),  # null: scored; else parasim.scores.SKIP_REASONS
        pa.field("graph_en", pa.string()),  # AMR of en_text, Penman notation
        pa.field("graph_other", pa.string()),  # AMR of other_en
        *(pa.field(c, pa.float32()) for c in SCORE_COLUMNS),
    ],
    metadata={"parasim.schema": "scores", "parasim.schema_version": SCHEMA_VERSION},
)


def stable_id(*parts: str, n: int = 16) -> str:
    """A short, stable hex id from text parts (same input, same id, on every machine)."""
    h = hashlib.sha1("\x1f".join(parts).encode("utf-8"))
    return h.hexdigest()[:n]


def shard_of(key: str, n_shards: int) -> int:
    """Deterministic shard index of a key."""
    return int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:8], 16) % n_shards


def write_table(table: pa.Table, path: str | os.PathLike, row_group_size: int = 10_000) -> None:
    """Write ``table`` as zstd Parquet, atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp, compression="zstd", row_group_size=row_group_size)
    os.replace(tmp, path)


class TableWriter:
    """Write a table block by block as zstd Parquet, atomically: the file appears (temp file +
    rename) only when the ``with`` block ends without an error; on one, the temp file goes.

    Row groups are of ``row_group_size`` rows whatever the blocks' sizes (the last one shorter),
    so the file is byte-identical to :func:`write_table` of the whole table.
    """

    def __init__(
        self, path: str | os.PathLike, schema: pa.Schema, row_group_size: int = 10_000
    ) -> None:
        self.path = Path(path)
        self.schema = schema
        self.row_group_size = row_group_size
        self.rows = 0
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{os.getpid()}")
        self._held: list[pa.Table] = []
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> TableWriter:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = pq.ParquetWriter(self._tmp, self.schema, compression="zstd")
        return self

    def write(self, table: pa.Table) -> None:
        """Add ``table``'s rows (written out a full row group at a time)."""
        assert self._writer is not None, "TableWriter.write outside its with block"
        self._held.append(table)
        self.rows += table.num_rows
        held = sum(t.num_rows for t in self._held)
        if held >= self.row_group_size:
            rows = pa.concat_tables(self._held)
            full = held - held % self.row_group_size
            self._writer.write_table(rows.slice(0, full), row_group_size=self.row_group_size)
            self._held = [rows.slice(full)] if full < held else []

    def __exit__(self, kind, exc, tb) -> None:
        assert self._writer is not None
        try:
            if kind is None and (self._held or self.rows == 0):
                rows = pa.concat_tables(self._held) if self._held else self.schema.empty_table()
                self._writer.write_table(rows, row_group_size=self.row_group_size)
        finally:
            self._writer.close()
        if kind is None:
            os.replace(self._tmp, self.path)
        else:
            self._tmp.unlink(missing_ok=True)


def sub_schema(schema: pa.Schema, columns: Iterable[str]) -> pa.Schema:
    """The fields of ``schema`` named by ``columns``, in that order (a reader's projection)."""
    return pa.schema([schema.field(c) for c in columns])


def rows_to_table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Build a table of ``schema`` from dict rows (missing keys become null)."""
    rows = list(rows)
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.table(cols, schema=schema)


def _parts(path: Path) -> list[Path]:
    """The Parquet parts of a folder (sorted, so the order is stable), or the file itself."""
    if not path.is_dir():
        return [path]
    parts = sorted(p for p in path.glob("*.parquet") if not p.name.startswith("."))
    if not parts:
        raise FileNotFoundError(f"no Parquet parts in {path}")
    return parts


def read_table(path: str | os.PathLike, columns: list[str] | None = None, filters=None) -> pa.Table:
    """Read a Parquet file or a folder of Parquet parts (sorted, so the order is stable).

    Args:
        path: The file or folder.
        columns: Read only these.
        filters: Keep only the rows this ``pyarrow.compute`` expression is true of, filtered
            while reading (a batch at a time: the whole file is never in memory).
    """
    tables = [pq.read_table(p, columns=columns, filters=filters) for p in _parts(Path(path))]
    return tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")


def column_names(path: str | os.PathLike) -> list[str]:
    """The columns of a Parquet file (or of a folder's first part), read from its footer."""
    return pq.read_schema(_parts(Path(path))[0]).names


#: The aligned encoder's word pairs (`align_encoder_wordpairs`, parasim.train.align_encoder).
WORDPAIRS_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # positives.id: the sentence pair
        pa.field("pair_id", pa.string()),  # the page pair (splits are by page pair)
        pa.field("site", pa.string()),
        pa.field("lang_pair", pa.string()),
        pa.field("other_lang", pa.string(), nullable=False),
        pa.field("split", pa.string(), nullable=False),  # train / dev / test
        pa.field("en_words", pa.list_(pa.string()), nullable=False),
        pa.field("other_words", pa.list_(pa.string()), nullable=False),
        pa.field("en_index", pa.list_(pa.int32()), nullable=False),  # word pair k: en word
        pa.field("other_index", pa.list_(pa.int32()), nullable=False),  # ... and other word
    ]
)
