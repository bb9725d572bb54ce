"""`parasim fit-topics` -> `select-negatives` -> `build-corpus` on a tiny positives set."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parasim.cli import main
from parasim.io import POSITIVES_SCHEMA, stable_id, write_table
from parasim.stats import Stats

TOPIC_WORDS = [
    "tax income return deduction credit payroll employer refund filing benefit",
    "insurance policy premium claim coverage accident vehicle damage deductible",
    "park trail camping lake forest visitor wildlife hiking canoe season",
]


def _rows(site: str, domain: str, lang: str, n_docs: int, per_doc: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n_docs):
        words = TOPIC_WORDS[k % 3].split()
        pair_id = f"{site}-p{k:03d}"
        for i in range(per_doc):
            en = " ".join(rng.choice(words, size=8))
            rows.append(
                {
                    "id": stable_id(pair_id, str(i), str(i)),
                    "pair_id": pair_id,
                    "site": site,
                    "domain": domain,
                    "lang_pair": f"en-{lang}",
                    "other_lang": lang,
                    "en_text": en,
                    "other_text": f"{lang} {en}",
                    "other_en": en,
                    "method": "paper",
                    "en_idx": [i],
                    "other_idx": [i],
                    "score": 0.9,
                    "score_emb": None,
                    "en_url": f"https://{site}/{pair_id}-en",
                    "other_url": f"https://{site}/{pair_id}-{lang}",
                }
            )
    return rows


def _tiny_gpt2(path) -> None:
    """A randomly-initialised 2-layer GPT-2 with a word-level tokenizer over the topic words."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    import torch

    words = ["[UNK]", *sorted({w for t in TOPIC_WORDS for w in t.split()})]
    tk = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]")
    )
    tk.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]").save_pretrained(
        path
    )
    cfg = transformers.GPT2Config(
        vocab_size=len(words), n_positions=32, n_embd=16, n_layer=2, n_head=2
    )
    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(path)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Two sites in three shards: en-fr government (18 page pairs), en-es insurance (1 pair)."""
    tmp = tmp_path_factory.mktemp("negcli")
    _tiny_gpt2(tmp / "gpt")
    gov = _rows("gov", "government", "fr", n_docs=18, per_doc=5, seed=1)
    shards = [
        tmp / "positives" / "gov" / "000.parquet",
        tmp / "positives" / "gov" / "001.parquet",
        tmp / "positives" / "ins" / "000.parquet",
    ]
    write_table(pa.Table.from_pylist(gov[::2], schema=POSITIVES_SCHEMA), shards[0])
    write_table(pa.Table.from_pylist(gov[1::2], schema=POSITIVES_SCHEMA), shards[1])
    ins = _rows("ins", "insurance", "es", n_docs=1, per_doc=4, seed=2)
    write_table(pa.Table.from_pylist(ins, schema=POSITIVES_SCHEMA), shards[2])
    negatives = {
        "topics": {"num_topics": [2, 3], "passes": 2, "iterations": 20},
        "encoder": {"kind": "causal-lm", "model": str(tmp / "gpt"), "batch_size": 16},
        "select": {"n_per_sentence": 3},
    }
    corpus = {"folds": 2, "test_fraction": 0.2, "hardness": {"encoder": None}}
    common = ["--negatives-json", json.dumps(negatives), "--corpus-json", json.dumps(corpus)]
    pos = [str(s) for s in shards]
    assert (
        main(
            [
                "fit-topics",
                "--positives",
                *pos,
                "--out",
                str(tmp / "topics"),
                *common,
                "--stats",
                str(tmp / "fit.json"),
            ]
        )
        == 0
    )
    neg_args = ["--topics", str(tmp / "topics"), "--cache-dir", str(tmp / "cache"), *common]
    assert (
        main(
            [
                "select-negatives",
                "--positives",
                *pos,
                "--out",
                str(tmp / "neg.parquet"),
                *neg_args,
                "--stats",
                str(tmp / "sel.json"),
            ]
        )
        == 0
    )
    assert (
        main(
            [
                "build-corpus",
                "--positives",
                *pos,
                "--negatives",
                str(tmp / "neg.parquet"),
                "--topics",
                str(tmp / "topics"),
                "--out",
                str(tmp / "corpus"),
                *common,
                "--stats",
                str(tmp / "corpus.json"),
            ]
        )
        == 0
    )
    return {"tmp": tmp, "pos": pos, "neg_args": neg_args, "common": common}


def test_topics_cover_every_partition(setup):
    st = Stats.read(setup["tmp"] / "fit.json")
    assert st.stage == "topics" and st.rows_in == 94
    assert st.counts["partitions"] == 2
    parts = st.figures["topics"]
    assert parts["EN-FR-G"]["num_topics"] in (2, 3) and parts["EN-FR-G"]["coherence"] is not None
    assert parts["EN-ES-IB"]["reason"]  # one page pair: LDA skipped, said why
    assert (setup["tmp"] / "topics" / "doc_topics.parquet").exists()


def test_negatives_carry_band_and_encoder(setup):
    tmp = setup["tmp"]
    table = pq.read_table(tmp / "neg.parquet")
    assert table.num_rows > 0
    sel = json.loads(table.schema.metadata[b"parasim.selection"])
    assert sel["band_method"]["EN-FR-G"].startswith("calibrated")
    assert len(sel["band"]["EN-FR-G"]) == 2 and str(tmp / "gpt") in sel["encoder"]
    st = Stats.read(tmp / "sel.json")
    assert st.figures["partitions"]["EN-ES-IB"]["kept"] == 0  # alone in its topic: no candidates
    assert st.dropped["alone_in_topic"] > 0 and st.rows_in == 94
    assert st.rows_out == table.num_rows
    assert any((tmp / "cache").glob("*.npy"))  # vectors cached for the next run


def test_corpus_loads_and_card_has_the_figures(setup):
    pd = pytest.importorskip("pandas")
    tmp = setup["tmp"]
    df = pd.read_parquet(tmp / "corpus" / "data" / "EN-FR-G")
    assert set(df["label"]) == {0, 1}
    assert set(df["split"]) == {"train", "test"}
    st = Stats.read(tmp / "corpus.json")
    assert st.rows_out == len(df)
    assert st.figures["empty_partitions"] == ["EN-ES-IB"]  # logged and counted; run completed
    # every positive and negative in is a corpus row or a drop with its reason
    assert st.rows_in == st.rows_out + st.n_dropped
    card = (tmp / "corpus" / "README.md").read_text()
    for needle in (
        "Sentence encoder: causal-lm",
        "Cosine band (EN-FR-G)",
        "(calibrated",
        "LDA (EN-FR-G)",
        "passes 2",
        "LDA (EN-ES-IB): 1 topics",
    ):
        assert needle in card, needle


def test_positives_order_does_not_matter(setup):
    tmp = setup["tmp"]
    out = tmp / "neg-reversed.parquet"
    assert (
        main(
            [
                "select-negatives",
                "--positives",
                *setup["pos"][::-1],
                "--out",
                str(out),
                *setup["neg_args"],
            ]
        )
        == 0
    )
    assert pq.read_table(out).equals(pq.read_table(tmp / "neg.parquet"))


def test_missing_positives_file_is_named(setup, capsys):
    missing = str(setup["tmp"] / "positives" / "nope" / "000.parquet")
    rc = main(
        [
            "fit-topics",
            "--positives",
            setup["pos"][0],
            missing,
            "--out",
            str(setup["tmp"] / "t2"),
            *setup["common"],
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "parasim fit-topics: error" in err and missing in err


def test_empty_corpus_fails_naming_the_stage(setup, capsys):
    tmp = setup["tmp"]
    from parasim.negatives import NEGATIVES_SCHEMA

    write_table(NEGATIVES_SCHEMA.empty_table(), tmp / "no-neg.parquet")
    rc = main(
        [
            "build-corpus",
            "--positives",
            *setup["pos"],
            "--negatives",
            str(tmp / "no-neg.parquet"),
            "--topics",
            str(tmp / "topics"),
            "--out",
            str(tmp / "corpus-empty"),
            *setup["common"],
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("parasim build-corpus: error: 0 corpus rows from ")
    assert "balancing emptied every partition" in err and "allow_empty: true" in err


def test_bad_settings_are_named(setup, capsys):
    rc = main(
        [
            "fit-topics",
            "--positives",
            *setup["pos"],
            "--out",
            str(setup["tmp"] / "t3"),
            "--negatives-json",
            '{"topics": {"passes": 0}}',
        ]
    )
    assert rc == 2
    assert "negatives.topics.passes" in capsys.readouterr().err


def test_vectors_are_cached_per_shard(setup, tmp_path):
    """A changed positives shard is re-encoded; the cached vectors of the others are reused."""
    import pyarrow.compute as pc

    from parasim.negatives.vectors import EncoderConfig, model_key, texts_hash

    tmp = setup["tmp"]
    enc = json.loads(setup["common"][1])["encoder"]
    key = model_key(EncoderConfig.from_config(enc))

    def cache_file(path) -> Path:
        t = pq.read_table(path)
        t = t.take(pc.sort_indices(t, sort_keys=[("id", "ascending")]))
        return tmp / "cache" / f"{key}-{texts_hash(t.column('en_text').to_pylist())}.npy"

    kept = [cache_file(p) for p in setup["pos"][1:]]
    assert all(f.exists() for f in kept)  # one file per shard from the first run
    mtimes = [f.stat().st_mtime_ns for f in kept]
    changed = pq.read_table(setup["pos"][0]).to_pylist()
    changed[0]["en_text"] = "a sentence that was edited between two runs"
    new_shard = tmp_path / "000.parquet"
    write_table(pa.Table.from_pylist(changed, schema=POSITIVES_SCHEMA), new_shard)
    pos = [str(new_shard), *setup["pos"][1:]]
    argv = ["select-negatives", "--positives", *pos, "--out", str(tmp_path / "neg.parquet")]
    assert main([*argv, *setup["neg_args"]]) == 0
    assert cache_file(new_shard).exists()
    assert [f.stat().st_mtime_ns for f in kept] == mtimes  # read back, not written again


def test_cuda_asked_for_without_a_gpu_is_named(setup, tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    negatives = json.loads(setup["common"][1])
    negatives["encoder"]["device"] = "cuda"
    argv = ["select-negatives", "--positives", *setup["pos"], "--out", str(tmp_path / "n.parquet")]
    argv += ["--topics", str(setup["tmp"] / "topics"), "--negatives-json", json.dumps(negatives)]
    argv += ["--corpus-json", setup["common"][3]]
    assert main(argv) == 2
    assert "negatives.encoder.device" in capsys.readouterr().err
