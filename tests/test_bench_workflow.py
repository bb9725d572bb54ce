"""The whole-workflow benchmark's config builder (the runs themselves are benchmarks, not tests)."""

from pathlib import Path

import pytest

from parasim.bench.workflow import make_config
from parasim.config import validate_config

ROOT = Path(__file__).resolve().parents[1]

BASE = {
    "sites": [
        {
            "name": "gov",
            "domain": "government",
            "languages": ["en", "fr"],
            "start_urls": ["https://gov.example/index-en.html"],
            "serve_dir": "demo/sites/gov",
        }
    ]
}


def test_copies_get_new_names_shards_and_overrides_apply():
    cfg = make_config(BASE, ROOT, 4, 2, ["divergences.lm=none", "negatives.topics.passes=5"])
    assert [s["name"] for s in cfg["sites"]] == ["gov", "gov-c2"]
    assert (
        cfg["sites"][0]["serve_dir"] == cfg["sites"][1]["serve_dir"] == str(ROOT / "demo/sites/gov")
    )
    assert cfg["shards"] == 4
    assert cfg["divergences"]["lm"] == "none" and cfg["negatives"]["topics"]["passes"] == 5
    validate_config(cfg)  # still a valid config
    assert BASE["sites"][0]["serve_dir"] == "demo/sites/gov"  # the base is not modified


def test_bad_override_is_named():
    with pytest.raises(SystemExit, match="key.path=value"):
        make_config(BASE, Path("."), 1, 1, ["divergences.lm"])
