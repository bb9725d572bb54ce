"""Tests for `parasim divergences` (parasim.divergences.commands) and the divergences' `.done`:
`parasim summarize --stage divergences --extra card=PATH` (the site's dataset card)."""

from __future__ import annotations

import json
import os

import pyarrow.parquet as pq
import pytest
from test_divergences import HAND, positives

from parasim.cli import main
from parasim.divergences import DIVERGENCES_SCHEMA, RANK, TYPES
from parasim.divergences.stage import site_counts
from parasim.io import write_table
from parasim.stats import Stats

PAIRS = [*HAND[1:], ("Too short.", "Trop court.")]

SETTINGS = json.dumps({"lm": "none", "eflomal_samplers": 1})


def run_shard(tmp_path, name, pairs, settings=SETTINGS):
    src, out, stats = (tmp_path / f"{name}{ext}" for ext in (".pos.parquet", ".parquet", ".json"))
    write_table(positives(pairs, prefix="cli"), src)
    argv = ["divergences", "--input", str(src), "--output", str(out)]
    assert main([*argv, "--settings-json", settings, "--stats", str(stats)]) == 0
    return out, stats


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """An empty shard and a real one (one CLI run: loading spaCy and WordNet is the slow part)."""
    for mod in ("spacy", "wn", "eflomal"):
        pytest.importorskip(mod)
    import spacy

    from parasim.divergences.tags import DEFAULT_SPACY

    for lang in ("en", "fr"):
        if not any(spacy.util.is_package(n) for n in DEFAULT_SPACY[lang]):
            pytest.skip(f"no spaCy {lang} model installed")
    tmp = tmp_path_factory.mktemp("div")
    return [run_shard(tmp, "000", []), run_shard(tmp, "001", PAIRS)], tmp


@pytest.mark.slow
def test_divergences_command_writes_schema_and_stats(shards):
    (_, (out, stats_path)), _ = shards
    table = pq.read_table(out)
    assert table.schema.equals(DIVERGENCES_SCHEMA, check_metadata=False)
    stats = Stats.read(stats_path)
    assert stats.stage == "divergences"
    assert stats.rows_in == 6 and stats.rows_out == table.num_rows > 5
    assert stats.figures["lm"] == "wordnet-frequency"
    rows = table.to_pylist()
    assert {r["type"] for r in rows} <= set(TYPES)
    assert sum(r["type"] == "equivalent" for r in rows) == stats.counts["n_groups"] == 5
    # every positive gives a ranking group or is dropped with its reason
    assert stats.counts["n_groups"] + stats.n_dropped == stats.rows_in
    assert all(len(r["en_tags"]) == len(r["en_tokens"]) for r in rows)
    assert stats.counts["rows_by_type"] == {t: sum(r["type"] == t for r in rows) for t in TYPES}


def test_short_pair_is_counted_not_dropped_silently(shards):
    (_, (_, stats_path)), _ = shards
    stats = Stats.read(stats_path)
    assert stats.counts["n_seeds"] == 5 and stats.dropped == {"too_short": 1}


def summarize(shards, stats, done, card=None, site="test"):
    """`parasim summarize` of the divergences (with the card as its extra when given)."""
    argv = ["summarize", "--stage", "divergences", "--site", site, "--shards", *map(str, shards)]
    argv += ["--stats", *map(str, stats), "--out", str(done)]
    return main([*argv, *(["--extra", f"card={card}"] if card else []), "--allow-empty"])


def test_card_sums_shards(shards):
    (a, b), tmp = shards
    card, done = tmp / "site" / "README.md", tmp / "site.done"
    assert summarize([a[0], b[0]], [a[1], b[1]], done, card) == 0
    per = [Stats.read(p) for p in (a[1], b[1])]
    summary = json.loads(done.read_text())
    n_rows = sum(pq.ParquetFile(p).metadata.num_rows for p in (a[0], b[0]))
    assert summary["rows"] == summary["stats"]["divergences"]["rows_out"] == n_rows
    assert summary["shards"] == 2 and summary["stats"]["divergences"]["rows_in"] == 6
    text = card.read_text()
    card_stats = json.loads(text.split("```json")[1].split("```")[0])
    # settings come from the shard that loaded models, not from the empty one
    assert card_stats["lm"] == per[1].figures["lm"] and card_stats["spacy"]["fr"]
    assert card_stats["site"] == "test" and card_stats["shards"] == 2
    assert card_stats["n_rows"] == n_rows and card_stats["n_positives"] == 6
    for t in TYPES:
        n = sum(s.counts["rows_by_type"][t] for s in per)
        assert f"| {t} | {RANK[t]} | {n} | " in text
    checks = card_stats["checks"]["subtree_deletion"]
    assert checks["valid_share"] == round(checks["valid"] / checks["rows"], 4) <= 1


def test_card_rejects_stale_stats(shards, capsys):
    (a, b), tmp = shards
    assert summarize([a[0]], [b[1]], tmp / "x.done", tmp / "x.md") == 2
    assert "(stale stats?)" in capsys.readouterr().err
    assert not (tmp / "x.md").exists() and not (tmp / "x.done").exists()


def test_an_unknown_extra_is_one_line_naming_the_known_ones(shards, capsys):
    (a, _), tmp = shards
    argv = ["summarize", "--stage", "divergences", "--site", "s", "--shards", str(a[0])]
    argv += ["--stats", str(a[1]), "--out", str(tmp / "y.done"), "--extra", "png=x.png"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--extra png: stage divergences has no such extra (card)")
    assert main([*argv[:-2], "--extra", "card"]) == 2
    assert "--extra: NAME=PATH, not 'card'" in capsys.readouterr().err


def test_empty_shard_gives_empty_table_and_counts(shards):
    ((out, stats_path), _), tmp = shards
    table = pq.read_table(out)
    assert table.num_rows == 0
    assert table.schema.equals(DIVERGENCES_SCHEMA, check_metadata=False)
    stats = Stats.read(stats_path)
    assert stats.rows_in == 0 and stats.counts["rows_by_type"]["equivalent"] == 0
    card = tmp / "empty" / "README.md"
    assert summarize([out], [stats_path], tmp / "empty.done", card) == 0
    assert "| equivalent | 0 | 0 |" in card.read_text()


def test_missing_input_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "nope.parquet"
    argv = ["divergences", "--input", str(missing), "--output", str(tmp_path / "o.parquet")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "positives shard not found" in err and str(missing) in err
    assert not (tmp_path / "o.parquet").exists()


def test_bad_settings_exit_2(tmp_path, capsys):
    src = tmp_path / "p.parquet"
    write_table(positives(PAIRS[:1]), src)
    argv = ["divergences", "--input", str(src), "--output", str(tmp_path / "o.parquet")]
    assert main([*argv, "--settings-json", json.dumps({"types": ["shuffle"]})]) == 2
    assert "divergences.types" in capsys.readouterr().err


def test_site_counts_recompute_ratios_from_the_sums():
    def shard(rows, valid, links, seconds, **figures):
        return Stats(
            "divergences",
            rows_in=3,
            rows_out=rows,
            counts={
                "rows_by_type": {"lexical_substitution": rows},
                "checks": {"lexical_substitution": {"rows": rows, "valid": valid, "failed": {}}},
                "alignment": {"links": links, "en_tokens": 10, "pairs_without_links": 0},
            },
            seconds={"lexical_substitution": seconds},
            figures={
                "alignment": {"extra_pairs": {"fr": rows}, "aligner": "eflomal"},
                "checks": {"lexical_substitution": {"valid_share": valid / rows}},
                **figures,
            },
        )

    a = shard(4, 4, 10, 1.0, lm=None, config=None, lm_prescore_misses=2)
    b = shard(2, 0, 0, 1.0, lm="none", config={"types": ["lexical_substitution"], "seed": 13})
    m = site_counts([a, b], "s")
    assert m["n_rows"] == 6 and m["n_positives"] == 6 and m["shards"] == 2 and m["site"] == "s"
    assert m["lm"] == "none" and m["config"]["seed"] == 13 and m["spacy"] is None
    assert m["checks"]["lexical_substitution"] == {
        "rows": 6, "valid": 4, "failed": {}, "valid_share": 0.6667,
    }  # fmt: skip
    assert m["alignment"]["links_per_en_token"] == 0.5 and m["alignment"]["links"] == 10
    assert m["alignment"]["extra_pairs"] == {"fr": 4}  # the same extra corpus: not summed
    assert m["variants_per_second"] == {"lexical_substitution": 3.0}
    assert m["lm_prescore_misses"] == 2


@pytest.mark.slow
def test_fastalign_reruns_are_byte_identical(shards):
    _, tmp = shards
    settings = json.dumps({"lm": "none", "word_aligner": "fastalign"})
    a, _ = run_shard(tmp, "fa1", PAIRS, settings)
    b, _ = run_shard(tmp, "fa2", PAIRS, settings)
    assert a.read_bytes() == b.read_bytes()
    rows = pq.read_table(a).to_pylist()
    assert any(r["alignment"] for r in rows if r["type"] == "equivalent")


@pytest.mark.slow
def test_eflomal_reruns_with_the_seed_are_byte_identical(shards):
    _, tmp = shards
    settings = json.dumps({"lm": "none", "word_aligner": "eflomal", "seed": 21})
    a, stats = run_shard(tmp, "ef1", PAIRS, settings)
    b, _ = run_shard(tmp, "ef2", PAIRS, settings)
    assert a.read_bytes() == b.read_bytes()
    alignment = Stats.read(stats).figures["alignment"]
    assert alignment["aligner"] == "eflomal" and alignment["reproducible"] is True
    rows = pq.read_table(a).to_pylist()
    assert any(r["alignment"] for r in rows if r["type"] == "equivalent")


def _urandom_via_fopen(env: dict) -> bytes:
    """8 bytes a C program reading /dev/urandom with fopen would get, in a fresh process."""
    import os
    import subprocess
    import sys

    code = (
        "import ctypes, sys; c = ctypes.CDLL(None); c.fopen.restype = ctypes.c_void_p;"
        "f = c.fopen(b'/dev/urandom', b'rb'); b = ctypes.create_string_buffer(8);"
        "c.fread(b, 1, 8, ctypes.c_void_p(f)); sys.stdout.write(b.raw.hex())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    return bytes.fromhex(proc.stdout)


def test_urandom_shim_gives_fopen_a_fixed_stream_only_when_asked():
    import sys

    from parasim.divergences.wordalign import urandom_shim

    if not sys.platform.startswith("linux"):
        pytest.skip("LD_PRELOAD is Linux-only")
    shim = urandom_shim()
    assert shim is not None, "no C compiler: eflomal would run unseeded"
    seeded = {"LD_PRELOAD": shim, "PARASIM_URANDOM_SEED": "13"}
    a, b = _urandom_via_fopen(seeded), _urandom_via_fopen(seeded)
    assert a == b and a != bytes(8)
    assert _urandom_via_fopen({**seeded, "PARASIM_URANDOM_SEED": "14"}) != a
    # loaded but not asked: the real /dev/urandom
    plain = {"LD_PRELOAD": shim}
    assert _urandom_via_fopen(plain) != _urandom_via_fopen(plain)


def test_seeded_eflomal_gives_the_same_links_on_one_and_two_cores(monkeypatch):
    """Two cores run the two directions side by side; the links must not depend on it."""
    import sys

    from parasim.divergences import wordalign

    if not sys.platform.startswith("linux") or wordalign.urandom_shim() is None:
        pytest.skip("seeded eflomal needs LD_PRELOAD and a C compiler")
    en = [s.split() for s in ["the red house", "a red car", "the house is big", "my car"] * 12]
    fr = [s.split() for s in ["la maison rouge", "une voiture rouge", "la maison est grande",
                              "ma voiture"] * 12]  # fmt: skip
    got = {}
    for cores in ("1", "2"):
        monkeypatch.setenv("OMP_NUM_THREADS", cores)
        with wordalign._seeded_env(21):
            assert os.environ["OMP_NUM_THREADS"] == ("2,1" if cores == "2" else "1")
        got[cores] = wordalign.align_intersection(en, fr, n_samplers=2, seed=21)
    assert got["1"] == got["2"]
    assert any(got["1"])
