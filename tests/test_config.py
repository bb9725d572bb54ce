"""Config validation: defaults from the schema, one clear message per problem."""

import dataclasses
import importlib
from pathlib import Path

import pytest
import yaml

from parasim.config import (
    SETTINGS,
    ConfigError,
    SiteConfig,
    load_config,
    schema_default,
    section_schema,
    validate_config,
    validate_section,
)

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


# ------------------------------------------------------------------------ the stages' settings

#: The config sections of the pipeline stages (the training families keep their own settings).
STAGE_SECTIONS = ("crawl", "parse", "translate", "align", "clean", "negatives", "corpus")
STAGE_SECTIONS += ("divergences", "scores")
#: The modules that define them (importing one registers its settings).
STAGE_MODULES = (
    "parasim.crawl.stage",
    "parasim.pair.stage",
    "parasim.parse.stage",
    "parasim.translate",
    "parasim.align",
    "parasim.clean",
    "parasim.negatives",
    "parasim.partition",
    "parasim.divergences",
    "parasim.scores",
)


def _sections(name: str):
    """``name`` and every section nested in it (an object with properties of its own)."""
    yield name
    for key, sub in section_schema(name)["properties"].items():
        if "properties" in sub:
            yield from _sections(f"{name}.{key}")


@pytest.fixture(scope="module")
def settings_classes():
    for module in STAGE_MODULES:
        importlib.import_module(module)
    return dict(SETTINGS)


def test_every_stage_section_has_one_settings_class(settings_classes):
    wanted = {s for top in STAGE_SECTIONS for s in _sections(top)}
    assert set(settings_classes) == wanted


def test_settings_are_the_schema_keys_in_order_with_the_schema_defaults(settings_classes):
    for section, cls in settings_classes.items():
        props = section_schema(section)["properties"]
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, section
        fields = dataclasses.fields(cls)
        assert [f.name for f in fields] == list(props), section  # so that they cannot drift
        for f in fields:  # a default lives in the schema alone
            assert f.default is dataclasses.MISSING, f"{section}.{f.name}"
            assert f.default_factory is dataclasses.MISSING, f"{section}.{f.name}"
        built = cls.from_config()
        for key, sub in props.items():
            value = getattr(built, key)
            if "properties" in sub:
                assert type(value) is settings_classes[f"{section}.{key}"], f"{section}.{key}"
            else:
                want = sub["default"]
                assert value == (tuple(want) if isinstance(want, list) else want), key


def test_settings_validate_fill_nest_and_freeze(settings_classes):
    from parasim.align import AlignSettings, DPSettings

    s = AlignSettings.from_config({"scorer": "both", "dp": {"width": 4}})
    assert s.scorer == "both" and s.threshold == schema_default("align.threshold")
    assert isinstance(s.dp, DPSettings) and s.dp.width == 4 and s.dp.max_size == 6
    assert AlignSettings.from_config(s) is s
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.scorer = "words"
    with pytest.raises(ConfigError, match=r"align\.scorer: 'vectors' is not one of"):
        AlignSettings.from_config({"scorer": "vectors"})
    with pytest.raises(ConfigError, match=r"align\.dp\.width: 0 is less than"):
        AlignSettings.from_config({"dp": {"width": 0}})
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['thresold'\]"):
        AlignSettings.from_config({"thresold": 0.5})


def test_dotted_sections_and_schema_defaults():
    assert validate_section("negatives.encoder", {"max_length": 64})["max_length"] == 64
    assert schema_default("corpus.partitions")["EN-FR-G"]["lang_pair"] == "en-fr"
    with pytest.raises(ConfigError, match="negatives.encoders: not a config section"):
        validate_section("negatives.encoders")
