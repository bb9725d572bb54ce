"""Configuration: validation against the JSON schema (with its defaults) and typed settings.

The schema in ``workflow/schemas/config.schema.yaml`` is the single source of defaults. Validation
errors become one :class:`ConfigError` whose message names the key path and what is allowed.

Every stage takes its config section as a frozen dataclass, a :class:`Settings` subclass whose
fields are the section's keys, in the schema's order, without defaults of their own:
:meth:`Settings.from_config` validates a (possibly partial) section against the schema, fills in
the schema's defaults and builds the dataclass, nested sections as nested settings.

The training families' own settings hold some keys of a ``train:`` subsection (the rest are the
training loop's): each is a :class:`PartialSettings`, built the same way from the schema.
"""

from __future__ import annotations

import copy
import functools
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar
from urllib.parse import urlsplit

import yaml
from jsonschema import Draft202012Validator, validators

SCHEMA_PATH = Path(__file__).resolve().parents[2] / "workflow" / "schemas" / "config.schema.yaml"


class ConfigError(ValueError):
    """The configuration is invalid; the message names the key path."""


def _with_defaults(validator_class: type) -> type:
    """A validator class that fills in ``default`` values while it validates."""
    validate_properties = validator_class.VALIDATORS["properties"]

    def set_defaults(validator, properties, instance, schema) -> Iterator:
        if isinstance(instance, dict):
            for name, sub in properties.items():
                if "default" in sub and name not in instance:
                    instance[name] = copy.deepcopy(sub["default"])
        yield from validate_properties(validator, properties, instance, schema)

    return validators.extend(validator_class, {"properties": set_defaults})


_DefaultingValidator = _with_defaults(Draft202012Validator)


def load_schema(path: Path | None = None) -> dict:
    """Load the config schema (YAML)."""
    with open(path or SCHEMA_PATH, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


@functools.cache
def _shipped_schema() -> dict:
    """The shipped schema, read once per process (nothing may change it)."""
    return load_schema()


def _key_path(parts: Iterator) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _describe(error) -> str:
    """One line: what is wrong at which key, and what the schema allows there."""
    where = _key_path(error.absolute_path)
    sch = error.schema if isinstance(error.schema, dict) else {}
    v = error.validator
    if v == "additionalProperties":
        allowed = sorted(sch.get("properties", {}))
        extra = (
            sorted(set(error.instance) - set(allowed)) if isinstance(error.instance, dict) else []
        )
        return f"{where}: unknown key(s) {extra}; allowed keys: {allowed}"
    if v == "required":
        return f"{where}: {error.message}"
    if v == "pattern" and "start_urls" in where:
        return f"{where}: {error.instance!r} is not an absolute http(s) URL"
    if v == "contains" and where.endswith("languages"):
        return f"{where}: must include the pivot language 'en' (got {error.instance})"
    hint = sch.get("description", "").strip().split(". ")[0]
    msg = f"{where}: {error.message}"
    return f"{msg} ({hint})" if hint else msg


def validate_config(config: Mapping[str, Any], schema: dict | None = None) -> dict:
    """Validate ``config``, fill in the schema's defaults and check cross-field rules.

    Args:
        config: the raw configuration (e.g. Snakemake's ``config``).
        schema: the schema; default the shipped one.

    Returns:
        A new dict with defaults filled in.

    Raises:
        ConfigError: with one message naming the offending key path(s).
    """
    cfg = copy.deepcopy(dict(config))
    validator = _DefaultingValidator(schema or load_schema())
    errors = sorted(validator.iter_errors(cfg), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [_describe(e) for e in errors]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    problems: list[str] = []
    names = [s["name"] for s in cfg["sites"]]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"sites: the name {dup!r} is used more than once")
    for i, site in enumerate(cfg["sites"]):
        if site.get("serve_dir") and not os.path.isdir(site["serve_dir"]):
            problems.append(
                f"sites[{i}].serve_dir: {site['serve_dir']!r} is not a folder "
                f"(relative to {os.getcwd()})"
            )
        if site.get("serve_dir") and site.get("serve"):
            problems.append(f"sites[{i}]: serve_dir and serve: give one or the other")
        hosts = set(site.get("allowed_domains") or ()) | {
            urlsplit(u).hostname for u in site["start_urls"]
        }
        for host, folder in (site.get("serve") or {}).items():
            if not any(h and (host.lower() == h or host.lower().endswith("." + h)) for h in hosts):
                problems.append(
                    f"sites[{i}].serve: host {host!r} is not among allowed_domains or the "
                    f"start URLs' hosts {sorted(h for h in hosts if h)}"
                )
            if not os.path.isdir(folder):
                problems.append(
                    f"sites[{i}].serve.{host}: {folder!r} is not a folder "
                    f"(relative to {os.getcwd()})"
                )
        if "sitemap" in site["pairing"]["evidence"] and not site.get("sitemaps"):
            problems.append(
                f"sites[{i}].pairing.evidence: sitemap needs sitemaps: true (the crawl reads "
                "the sitemaps' hreflang alternates only then)"
            )
        for j, rw in enumerate(site["pairing"]["rewrites"]):
            unknown = sorted(set(rw) - set(site["languages"]))
            if unknown:
                problems.append(
                    f"sites[{i}].pairing.rewrites[{j}]: language(s) {unknown} are not among "
                    f"the site's languages {site['languages']}"
                )
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))
    return cfg


def section_schema(name: str, schema: dict | None = None) -> dict:
    """The schema of the config section ``name``, a dotted path such as ``negatives.encoder``.

    Raises:
        ConfigError: ``name`` is not a section of the schema.
    """
    node = schema or _shipped_schema()
    for i, key in enumerate(name.split(".")):
        props = node.get("properties", {})
        if key not in props:
            where = ".".join(name.split(".")[:i]) or "the config"
            raise ConfigError(f"{name}: not a config section (have {sorted(props)} in {where})")
        node = props[key]
    return node


def schema_default(name: str) -> Any:
    """The schema's default of the key ``name`` (a dotted path such as ``clean.placeholders``)."""
    return copy.deepcopy(section_schema(name)["default"])


def validate_section(name: str, raw: Mapping[str, Any] | None = None) -> dict:
    """Validate one section (e.g. ``crawl``, or ``negatives.encoder``) alone; fill its defaults.

    Raises:
        ConfigError: naming the key path inside the section.
    """
    sub = section_schema(name)
    value = copy.deepcopy(dict(raw or {}))
    errors = list(_DefaultingValidator(sub).iter_errors(value))
    if errors:
        lines = [f"{name}.{_describe(e)}" for e in errors]
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(lines))
    return value


def load_config(path: str | os.PathLike) -> dict:
    """Read a YAML config file and validate it."""
    with open(path, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh) or {}
    try:
        return validate_config(raw)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class Rewrite:
    """Substitutions from the English URL to the URL in another language."""

    by_lang: dict[str, str]


@dataclass(frozen=True)
class SiteConfig:
    """One site's validated configuration, as the stages use it."""

    name: str
    domain: str
    languages: tuple[str, ...]
    start_urls: tuple[str, ...]
    allowed_domains: tuple[str, ...]
    serve_dir: str | None = None
    main_selector: str | None = None
    evidence: tuple[str, ...] = ("hreflang", "toggle", "rewrite")
    rewrites: tuple[Rewrite, ...] = ()
    one_to_one: bool = False
    aliases: tuple[str, ...] = ()
    link_attributes: tuple[str, ...] = ()
    language_attributes: tuple[str, ...] = ()
    #: (host, folder) served locally for a site on several hosts (``serve``)
    serve: tuple[tuple[str, str], ...] = ()
    crawl_order: str = "breadth_first"
    sitemaps: bool = False
    drop_query_params: tuple[str, ...] = ()
    #: the file names a directory URL serves: ``X/`` and ``X/index.html`` are one page
    index_files: tuple[str, ...] = ("index.html", "index.htm")
    #: what content evidence does with a link pair whose pages it finds to be of other pages
    content_disagrees: str = "flag"
    max_pages: int = 5000
    max_depth: int = 20
    max_bytes: int = 5_000_000
    extra: dict = field(default_factory=dict, compare=False)

    @property
    def other_languages(self) -> tuple[str, ...]:
        """The site's languages other than the English pivot."""
        return tuple(lang for lang in self.languages if lang != "en")

    def main_text_selector(self):
        """``main_selector`` compiled (an lxml ``CSSSelector``), None when unset.

        Raises:
            ValueError: one sentence naming the site and the selector when it is not valid CSS.
        """
        if not self.main_selector:
            return None
        from cssselect import SelectorError
        from lxml.cssselect import CSSSelector

        try:
            return CSSSelector(self.main_selector)
        except SelectorError as exc:
            raise ValueError(
                f"site {self.name!r}: main_selector {self.main_selector!r} is not valid CSS ({exc})"
            ) from None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SiteConfig:
        """Build from one validated ``sites[i]`` entry."""
        allowed = d.get("allowed_domains") or sorted(
            {urlsplit(u).hostname for u in d["start_urls"]}
        )
        pairing = d.get("pairing", {})
        limits = d.get("limits", {})
        return cls(
            name=d["name"],
            domain=d["domain"],
            languages=tuple(d["languages"]),
            start_urls=tuple(d["start_urls"]),
            allowed_domains=tuple(allowed),
            serve_dir=d.get("serve_dir"),
            main_selector=d.get("main_selector"),
            evidence=tuple(pairing.get("evidence", cls.evidence)),
            rewrites=tuple(Rewrite(dict(r)) for r in pairing.get("rewrites", [])),
            one_to_one=pairing.get("one_to_one", cls.one_to_one),
            aliases=tuple(d.get("aliases", ())),
            link_attributes=tuple(d.get("link_attributes", ())),
            language_attributes=tuple(pairing.get("language_attributes", ())),
            serve=tuple((h.lower(), f) for h, f in (d.get("serve") or {}).items()),
            crawl_order=d.get("crawl_order", cls.crawl_order),
            sitemaps=bool(d.get("sitemaps", cls.sitemaps)),
            drop_query_params=tuple(d.get("drop_query_params", ())),
            index_files=tuple(d.get("index_files", cls.index_files)),
            content_disagrees=pairing.get("content_disagrees", cls.content_disagrees),
            max_pages=limits.get("max_pages", cls.max_pages),
            max_depth=limits.get("max_depth", cls.max_depth),
            max_bytes=limits.get("max_bytes", cls.max_bytes),
        )


def site_by_name(config: Mapping[str, Any], name: str) -> SiteConfig:
    """The validated site called ``name``."""
    for s in config["sites"]:
        if s["name"] == name:
            return SiteConfig.from_dict(s)
    raise ConfigError(
        f"sites: no site named {name!r} (have {[s['name'] for s in config['sites']]})"
    )


S = TypeVar("S", bound="Settings")

#: Every settings class by its section (dotted path), filled as the classes are defined.
SETTINGS: dict[str, type[Settings]] = {}


class Settings:
    """Base of the stages' settings: one frozen dataclass per config section.

    A subclass names its section (``class AlignSettings(Settings, section="align")``) and
    declares one field per key of that section in the schema, in the schema's order and without
    defaults: the defaults live in the schema alone. A key whose schema is an object with
    ``properties`` of its own is a nested section, and its field holds that section's settings.
    Lists become tuples; free-form objects (e.g. ``corpus.partitions``) stay dicts.
    """

    section: ClassVar[str]

    def __init_subclass__(cls, section: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.section = section
        SETTINGS[section] = cls

    @classmethod
    def from_config(cls: type[S], raw: S | Mapping[str, Any] | None = None) -> S:
        """The settings of ``raw``: the section as in the config (keys left out take the schema's
        defaults; None: all defaults), or settings already built (returned as they are).

        Raises:
            ConfigError: ``raw`` does not validate; the message names the key path.
        """
        if isinstance(raw, cls):
            return raw
        return cls._build(validate_section(cls.section, raw))

    @classmethod
    def _build(cls: type[S], value: Mapping[str, Any]) -> S:
        props = section_schema(cls.section).get("properties", {})
        kw = {}
        for name, v in value.items():
            if "properties" in props.get(name, {}):
                v = SETTINGS[f"{cls.section}.{name}"]._build(v)
            elif isinstance(v, list):
                v = tuple(v)
            kw[name] = v
        return cls(**kw)


P = TypeVar("P", bound="PartialSettings")

#: Every training family's settings class by its section, filled as the classes are defined.
PARTIAL_SETTINGS: dict[str, type[PartialSettings]] = {}


class PartialSettings:
    """Base of the settings that hold some keys of a section: a training family's own keys of its
    ``train:`` subsection, besides the training loop's (``parasim.train.core.loop``).

    A subclass names its section (``class RankerConfig(PartialSettings,
    section="train.divergence_ranker")``) and declares one field per key it holds, without
    defaults: as for :class:`Settings`, the defaults live in the schema alone.
    """

    section: ClassVar[str]

    def __init_subclass__(cls, section: str, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.section = section
        PARTIAL_SETTINGS[section] = cls

    @classmethod
    def from_config(cls: type[P], raw: P | Mapping[str, Any] | None = None) -> P:
        """The settings of ``raw``: some of the fields' keys (those left out take the schema's
        defaults; None: all defaults), or settings already built (returned as they are).

        Raises:
            ConfigError: a key of ``raw`` that is not a field, or a value the schema rejects;
                the message names the key path.
        """
        if isinstance(raw, cls):
            return raw
        names = [f.name for f in fields(cls)]
        raw = dict(raw or {})
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise ConfigError(
                f"{cls.section}: unknown key(s) {unknown}; allowed keys: {sorted(names)}"
            )
        value = validate_section(cls.section, raw)
        return cls(
            **{k: tuple(v) if isinstance(v, list) else v for k, v in value.items() if k in names}
        )
