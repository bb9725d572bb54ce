"""Config validation: defaults from the schema, one clear message per problem."""

import dataclasses
from pathlib import Path

import pytest
import yaml

from parasim import stages
from parasim.config import (
    SETTINGS,
    ConfigError,
    Settings,
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
    assert cfg["parse"] == {"strict": False, "min_words": 1}
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


def _stage_sections() -> set[str]:
    """The config sections of the stages, from their records (``Stage.settings``); the training
    families hold some keys of ``train:`` each (``PartialSettings``), checked in tests/train."""
    return {
        s.settings.section.split(".")[0]
        for s in stages.STAGES
        if s.settings is not None and issubclass(s.settings, Settings)
    }


def _sections(name: str):
    """``name`` and every section nested in it (an object with properties of its own)."""
    yield name
    for key, sub in section_schema(name)["properties"].items():
        if "properties" in sub:
            yield from _sections(f"{name}.{key}")


@pytest.fixture(scope="module")
def settings_classes():
    assert stages.STAGES  # gathering the stages imports every stage's module: their settings
    return dict(SETTINGS)


def test_every_stage_section_has_one_settings_class(settings_classes):
    tops = _stage_sections()
    assert tops, "no stage names a settings class"
    wanted = {s for top in tops for s in _sections(top)}
    assert set(settings_classes) == wanted
    for stage in stages.STAGES:  # a record names the class that reads its section
        if stage.settings is not None and issubclass(stage.settings, Settings):
            assert settings_classes[stage.settings.section] is stage.settings, stage.name


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


@pytest.fixture(scope="module")
def train_classes():
    from parasim.config import PARTIAL_SETTINGS

    # gathering the stages imports every model family's record, and so its settings classes
    families = [s for s in stages.STAGES if s.module.startswith("parasim.train.") and s.settings]
    assert families, "no model family gathered"
    assert all(PARTIAL_SETTINGS[s.settings.section] is s.settings for s in families)
    return dict(PARTIAL_SETTINGS)


def _no_default(cls, name):
    f = {f.name: f for f in dataclasses.fields(cls)}[name]
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


def test_every_train_subsection_has_one_settings_class_of_its_keys_without_defaults(
    train_classes,
):
    """A family's own settings hold its subsection's keys besides the loop's, and take their
    defaults from the schema alone."""
    from parasim.train.core.loop import TrainingArguments

    loop_keys = {f.name for f in dataclasses.fields(TrainingArguments)}
    assert set(train_classes) == set(_sections("train")) - {"train"}
    for section, cls in train_classes.items():
        props = section_schema(section)["properties"]
        nested = {k for k, sub in props.items() if "properties" in sub}
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, section
        names = [f.name for f in dataclasses.fields(cls)]
        assert set(names) == set(props) - loop_keys - nested, section
        assert all(_no_default(cls, n) for n in names), section
        built = cls.from_config()
        for n in names:
            want = props[n]["default"]
            assert getattr(built, n) == (tuple(want) if isinstance(want, list) else want), n


def test_the_loop_settings_default_only_the_keys_a_model_cannot_set(train_classes):
    """TrainingArguments has a default only for a loop key that some model's subsection and the
    shared section both lack (FIXED_LOOP_KEYS); every other one comes from the schema, and a
    model's effective loop settings of an empty ``train:`` are its subsection's defaults over the
    shared ones."""
    from parasim.train.core.loop import FIXED_LOOP_KEYS, TrainingArguments, model_settings

    shared = section_schema("train")["properties"]
    loop_keys = [f.name for f in dataclasses.fields(TrainingArguments)]
    models = {s: c for s, c in train_classes.items() if s != "train.similarity"}
    fixed = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
    unset = set()
    for section, cls in models.items():
        own = section_schema(section)["properties"]
        unset |= {k for k in loop_keys if k not in own and k not in shared}
        args, cfg = model_settings({}, cls)
        assert type(cfg) is cls
        for k in loop_keys:
            node = own.get(k) or shared.get(k)
            want = node["default"] if node else fixed[k]
            assert getattr(args, k) == want, f"{section}: {k}"
    assert unset == set(FIXED_LOOP_KEYS)
    assert {k for k in loop_keys if not _no_default(TrainingArguments, k)} == unset
    assert TrainingArguments.__dataclass_params__.frozen


def test_word_pair_settings_take_the_schema_defaults():
    from parasim.train.align_encoder.wordpairs import WordPairConfig

    names = [f.name for f in dataclasses.fields(WordPairConfig)]
    assert set(names) - {"seed"} <= set(section_schema("train.align_encoder")["properties"])
    assert all(_no_default(WordPairConfig, n) for n in names)
    built = WordPairConfig.from_config({"min_pairs": 3})
    assert built.min_pairs == 3 and built.seed == schema_default("train.seed")
    assert built.links == schema_default("train.align_encoder.links")
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['reg_weight'\]"):
        WordPairConfig.from_config({"reg_weight": 1.0})
