"""Before any job runs: can this machine translate and parse every site's languages?

`parasim validate-config` and every `snakemake` call (``workflow/rules/common.smk``) run
:func:`check_installed` on the validated config. It checks that the configured
``translate.backend`` takes each site's non-English languages to English (Apertium: the installed
modes and pivots, as ``apertium -l`` lists them; Marian: a model named for the language;
mtranslate: its package; identity: anything), and that a spaCy model is installed for every
language the divergences stage parses (English and each site's other languages). Each problem is
one sentence naming the language, the sites and the config key, with what is supported and how
to get more. It is fast (one ``apertium -l``, no model loaded) and testable: what is installed
comes in as an :class:`Installed`. ``check_installed: false`` in the config skips it (jobs that
run in other environments, e.g. on a cluster).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from parasim.config import ConfigError


def has_package(name: str) -> bool:
    """Whether ``name`` is an importable package here (or, for a spaCy model, a folder)."""
    if "/" in name or name.startswith("."):
        return Path(name).is_dir()
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@dataclass(frozen=True)
class Installed:
    """What this machine offers, as the checks see it.

    Attributes:
        apertium_modes: the modes ``apertium -l`` lists; None when ``apertium`` is not installed.
        has_package: whether a Python package (or a spaCy model folder) is installed.
    """

    apertium_modes: tuple[str, ...] | None = ()
    has_package: Callable[[str], bool] = has_package

    @classmethod
    def here(cls, cfg: Mapping[str, Any]) -> Installed:
        """Probe this machine (``apertium -l`` only when the backend is apertium)."""
        from parasim.translate.apertium import list_modes

        tr = cfg["translate"]
        modes: tuple[str, ...] | None = ()
        if tr["backend"] == "apertium":
            found = list_modes(tr.get("apertium_datadir"))
            modes = None if found is None else tuple(found)
        return cls(apertium_modes=modes)


def site_languages(cfg: Mapping[str, Any]) -> dict[str, list[str]]:
    """Each non-English language of the config's sites -> the names of the sites that use it."""
    out: dict[str, list[str]] = {}
    for site in cfg["sites"]:
        for lang in site["languages"]:
            if lang != "en":
                out.setdefault(lang, []).append(site["name"])
    return dict(sorted(out.items()))


def _who(lang: str, sites: list[str]) -> str:
    return f"{lang!r} (site{'s' if len(sites) > 1 else ''} {', '.join(sites)})"


def _marian(lang: str) -> str:
    return (
        f"set `translate.backend: marian` with `translate.model: "
        f"{{{lang}: Helsinki-NLP/opus-mt-{lang}-en}}`"
    )


def _apertium_problems(
    tr: Mapping[str, Any], langs: Mapping[str, list[str]], modes: tuple[str, ...] | None
) -> list[str]:
    from parasim.translate.apertium import DEBIAN_PACKAGES, find_chain, translatable

    if modes is None:
        wanted = {p for x in langs for p in DEBIAN_PACKAGES.get(x, "").split()}
        packages = " ".join(["apertium", *sorted(wanted)])
        return [
            "translate.backend: apertium is not installed (the `apertium` command is not on "
            f"PATH); install the Debian packages `{packages}` (apt-get install), or "
            f"{_marian(next(iter(langs), 'fr'))}"
        ]
    overrides = tr.get("apertium_modes") or {}
    problems = []
    for lang, sites in langs.items():
        if lang in overrides:
            missing = sorted(set(overrides[lang]) - set(modes))
            if missing:
                problems.append(
                    f"translate.apertium_modes.{lang}: mode(s) {missing} are not installed "
                    f"(`apertium -l` lists {list(modes)})"
                )
            continue
        if find_chain(lang, modes):
            continue
        supported = ", ".join(translatable(modes)) or "nothing"
        package = DEBIAN_PACKAGES.get(lang)
        get = (
            f"install the Debian package(s) `{package}` (apt-get install), or {_marian(lang)}"
            if package
            else f"Debian has no Apertium pair that takes it to English (`apt-cache search "
            f"apertium-` lists them): {_marian(lang)}"
        )
        problems.append(
            f"translate.backend: apertium cannot translate {_who(lang, sites)} to English (the "
            f"installed modes take {supported} to English); {get}"
        )
    return problems


def translation_problems(cfg: Mapping[str, Any], installed: Installed) -> list[str]:
    """One sentence per language the configured backend cannot take to English here."""
    tr = cfg["translate"]
    langs = site_languages(cfg)
    backend = tr["backend"]
    if not langs or backend == "identity":
        return []
    if backend == "apertium":
        return _apertium_problems(tr, langs, installed.apertium_modes)
    if backend == "mtranslate":
        if installed.has_package("mtranslate"):
            return []
        return [
            "translate.backend: mtranslate is not installed; `.venv/bin/pip install mtranslate` "
            "(it needs internet access), or set `translate.backend: apertium` or `marian`"
        ]
    # marian
    missing_pkgs = [p for p in ("torch", "transformers") if not installed.has_package(p)]
    if missing_pkgs:
        return [
            f"translate.backend: marian needs {' and '.join(missing_pkgs)}, not installed; "
            f"`.venv/bin/pip install {' '.join(missing_pkgs)}`, or set `translate.backend: "
            "apertium`"
        ]
    model = tr.get("model")
    if not isinstance(model, Mapping) or not model:
        return []  # one model for all, or Helsinki-NLP/opus-mt-<lang>-en for each
    return [
        f"translate.model names no model for {_who(lang, sites)} (it has {sorted(model)}); add "
        f"`{lang}: Helsinki-NLP/opus-mt-{lang}-en` (or another {lang}-to-English model) to it"
        for lang, sites in langs.items()
        if not model.get(lang)
    ]


def spacy_problems(cfg: Mapping[str, Any], installed: Installed) -> list[str]:
    """One sentence per language the divergences stage parses without an installed spaCy model."""
    from parasim.divergences.tags import DEFAULT_SPACY

    named = cfg.get("divergences", {}).get("spacy") or {}
    problems = []
    for lang, sites in {"en": ["all"], **site_languages(cfg)}.items():
        names = named.get(lang) or DEFAULT_SPACY.get(lang, [])  # as load_spacy reads them
        names = [names] if isinstance(names, str) else list(names)
        if any(installed.has_package(n) for n in names):
            continue
        suggest = "en_core_web_sm" if lang == "en" else f"{lang}_core_news_sm"
        tried = f"tried {names}" if names else "none is named"
        problems.append(
            f"divergences.spacy: no spaCy model for {_who(lang, sites)} is installed ({tried}); "
            f"install one (`.venv/bin/python -m spacy download {suggest}`) and name it in "
            f"`divergences.spacy: {{{lang}: [{suggest}]}}`"
        )
    return problems


def check_installed(cfg: Mapping[str, Any], installed: Installed | None = None) -> None:
    """Check that this machine can translate and parse every site's languages.

    Args:
        cfg: a validated config (:func:`parasim.config.validate_config`).
        installed: what is installed; default :meth:`Installed.here` (probes this machine).

    Raises:
        ConfigError: one line per problem, each naming the language, its sites, what is
            supported and how to get more.
    """
    if not cfg.get("check_installed", True):
        return
    installed = installed or Installed.here(cfg)
    problems = translation_problems(cfg, installed) + spacy_problems(cfg, installed)
    if problems:
        raise ConfigError("this machine cannot run the configuration:\n  " + "\n  ".join(problems))
