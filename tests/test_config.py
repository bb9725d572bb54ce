"""Config validation: defaults from the schema, one clear message per problem."""

from pathlib import Path

import pytest
import yaml

from parasim.config import ConfigError, SiteConfig, load_config, validate_config, validate_section

ROOT = Path(__file__).resolve().parents[1]


def _site(**kw):
    base = {
        "name": "s1",
        "domain": "government",
        "languages": ["en", "fr"],
        "start_urls": ["https://example.org/index-en.html"],
    }
    base.update(kw)
    return base


def test_shipped_config_is_valid_and_gets_defaults(monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = load_config(ROOT / "config.yaml")
    assert cfg["shards"] >= 1
    assert cfg["crawl"]["obey_robots"] is True
    site = SiteConfig.from_dict(cfg["sites"][0])
    assert "en" in site.languages and site.other_languages
    langs = {lang for s in cfg["sites"] for lang in s["languages"]}
    assert {"fr", "es"} <= langs


def test_defaults_fill_nested_sections():
    cfg = validate_config({"sites": [_site()]})
    s = cfg["sites"][0]
    assert s["pairing"]["evidence"] == ["hreflang", "toggle", "rewrite"]
    assert s["limits"]["max_pages"] == 5000
    assert s["main_selector"] is None
    assert cfg["parse"] == {"strict": False, "min_words": 2}
    assert SiteConfig.from_dict(s).allowed_domains == ("example.org",)


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        ({"colour": "blue"}, "sites[0]: unknown key(s) ['colour']"),
        ({"languages": ["fr", "de"]}, "sites[0].languages: must include the pivot language 'en'"),
        ({"start_urls": ["ftp://x/y"]}, "sites[0].start_urls[0]: 'ftp://x/y' is not an absolute"),
        ({"start_urls": ["not a url"]}, "sites[0].start_urls[0]"),
        ({"limits": {"max_pages": "many"}}, "sites[0].limits.max_pages: 'many' is not of type"),
        ({"name": "Bad Name"}, "sites[0].name"),
        ({"pairing": {"evidence": ["psychic"]}}, "sites[0].pairing.evidence[0]"),
    ],
)
def test_bad_values_name_the_key_path(change, needle):
    with pytest.raises(ConfigError) as err:
        validate_config({"sites": [_site(**change)]})
    assert needle in str(err.value)


def test_missing_required_key_and_unknown_top_level():
    bad = _site()
    del bad["domain"]
    with pytest.raises(ConfigError, match=r"sites\[0\]: 'domain' is a required property"):
        validate_config({"sites": [bad]})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['sitez'\]"):
        validate_config({"sites": [_site()], "sitez": []})
    with pytest.raises(ConfigError, match="'sites' is a required property"):
        validate_config({})


def test_cross_field_checks(tmp_path):
    with pytest.raises(ConfigError, match="the name 's1' is used more than once"):
        validate_config({"sites": [_site(), _site()]})
    with pytest.raises(ConfigError, match=r"sites\[0\].serve_dir: .* is not a folder"):
        validate_config({"sites": [_site(serve_dir=str(tmp_path / "nope"))]})
    rw = {"rewrites": [{"en": "-en.html", "es": "-es.html"}]}
    with pytest.raises(ConfigError, match=r"rewrites\[0\]: language\(s\) \['es'\]"):
        validate_config({"sites": [_site(pairing=rw)]})


def test_validate_section_and_file_errors(tmp_path):
    assert validate_section("crawl", {"concurrency": 4})["concurrency"] == 4
    with pytest.raises(ConfigError, match="crawl.concurrency"):
        validate_section("crawl", {"concurrency": 0})
    p = tmp_path / "c.yaml"
    p.write_text(yaml.safe_dump({"sites": [_site(domain=3)]}))
    with pytest.raises(ConfigError, match=str(p)):
        load_config(p)
