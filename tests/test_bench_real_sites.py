"""configs/real-sites.yaml and its builder (`parasim bench real_sites`, issue 51)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from parasim.bench.real_sites import CONFIG, build, main
from parasim.config import validate_config


def _cfg() -> dict:
    return yaml.safe_load(CONFIG.read_text(encoding="utf-8"))


def _folders(site: dict) -> list[str]:
    return [site["serve_dir"]] if "serve_dir" in site else list(site["serve"].values())


def test_every_site_falls_in_one_partition_per_language_pair():
    cfg = _cfg()
    parts = cfg["corpus"]["partitions"]
    used = set()
    for site in cfg["sites"]:
        for lang in site["languages"]:
            if lang == "en":
                continue
            hits = [
                name
                for name, p in parts.items()
                if p["lang_pair"] == f"en-{lang}" and site["domain"] in p["domains"]
            ]
            assert len(hits) == 1, (site["name"], lang, hits)
            used.update(hits)
    assert used == set(parts)  # no partition without a site
    names = [s["name"] for s in cfg["sites"]]
    assert len(names) == len(set(names))
    # the seed's setting: five distinct websites (the demo's two count as one), two language pairs
    assert {p["lang_pair"] for p in parts.values()} == {"en-fr", "en-es"}


def test_the_sites_are_served_from_the_data_the_build_or_the_demo():
    for site in _cfg()["sites"]:
        for folder in _folders(site):
            assert folder.startswith(("../shared/data/sites/", "build/real-sites/", "demo/sites/"))


def test_the_config_validates_where_its_folders_exist(tmp_path, monkeypatch):
    """The folders are checked relative to the working folder (a checkout beside ../shared)."""
    cfg = _cfg()
    repo = tmp_path / "repo"
    repo.mkdir()
    for site in cfg["sites"]:
        for folder in _folders(site):
            (repo / folder).mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(repo)
    validate_config(cfg)
    # a build not made yet is named
    (repo / "build" / "real-sites" / "debian-www" / "site").rmdir()
    with pytest.raises(Exception, match="debian-www/site"):
        validate_config(cfg)


def test_the_build_names_the_data_it_misses(tmp_path):
    with pytest.raises(SystemExit, match="debian-www-2018.tar.xz"):
        build(tmp_path / "out", tmp_path / "no-data")
    with pytest.raises(SystemExit):
        main(["nothing"])


@pytest.mark.shared_data
@pytest.mark.slow
def test_the_build_makes_the_folders_the_config_serves(shared_data, tmp_path, monkeypatch):
    out = tmp_path / "build" / "real-sites"
    figures = build(out, Path(shared_data))
    assert figures["python-docs"]["fr"]["pages"] == 481 and figures["debian-www"]["html_files"]
    for site in _cfg()["sites"]:
        for folder in _folders(site):
            if folder.startswith("build/real-sites/"):
                assert (tmp_path / folder).is_dir(), folder
    start = tmp_path / "build/real-sites/debian-www/site/index.en.html"
    assert start.is_file()


def test_pairs_scores_each_site_against_its_gold_and_says_what_it_skips(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parasim.bench.real_sites import markdown, pairs

    o = "https://wet-boew.parasim.example/"
    (tmp_path / "results" / "pairs" / "wet-boew").mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "en_url": [o + "a-en.html", o + "b-en.html"],
                "other_url": [o + "a-fr.html", o + "x-fr.html"],
            }
        ),  # noqa: E501
        tmp_path / "results" / "pairs" / "wet-boew" / "000.parquet",
    )
    gold = tmp_path / "data" / "sites" / "wet-boew" / "pairs_en_fr.tsv"
    gold.parent.mkdir(parents=True)
    gold.write_text("a-en.html\ta-fr.html\nb-en.html\tb-fr.html\nc/\tc-fr/\n", encoding="utf-8")
    config = tmp_path / "c.yaml"
    sites = [
        {"name": "wet-boew", "start_urls": [o + "index-en.html"]},
        {"name": "demo-gov", "start_urls": ["https://gov.example/"]},
        {"name": "python-docs-fr", "start_urls": ["https://docs.example/"]},
        {"name": "canada-design", "start_urls": ["https://design.canada.ca/"]},
    ]
    config.write_text(yaml.safe_dump({"sites": sites}), encoding="utf-8")
    (tmp_path / "data" / "sites" / "canada-design").mkdir(parents=True)
    (tmp_path / "data" / "sites" / "canada-design" / "gold_en_fr.tsv").write_text("x\ty\n")
    got = pairs(tmp_path / "results", config, tmp_path / "data", tmp_path / "build")
    wet = got["wet-boew"]
    assert (wet["tp"], wet["n_pred"], wet["n_gold"]) == (1, 2, 3)
    assert wet["precision"] == 0.5 and wet["recall"] == pytest.approx(1 / 3)
    assert wet["false_positives"] == [(o + "b-en.html", o + "x-fr.html")]
    assert got["demo-gov"] == {"skipped": "no gold page pairs"}
    assert got["python-docs-fr"]["skipped"].startswith("gold not found")
    assert got["canada-design"]["skipped"].startswith("no pairs in")
    table = markdown(got)
    assert "| wet-boew | 2 | 3 | 0.500 |" in table and "no gold page pairs" in table
