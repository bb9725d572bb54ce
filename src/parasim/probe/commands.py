"""`parasim probe`: crawl a few dozen pages of a site and suggest its ``sites:`` entry."""

from __future__ import annotations

import argparse
import logging
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

log = logging.getLogger("parasim.probe")

_URL_RE = re.compile(r"^https?://[A-Za-z0-9._~-]+(:[0-9]{1,5})?(/[^\s]*)?$")


def _languages(value: str | None) -> tuple[str, ...] | None:
    from parasim.stagecli import UsageError

    if not value:
        return None
    langs = tuple(x.strip().lower() for x in value.split(",") if x.strip())
    bad = [x for x in langs if not re.fullmatch(r"[a-z]{2}", x)]
    if bad or "en" not in langs or len(set(langs)) < 2:
        raise UsageError(
            f"--languages {value!r}: give two-letter codes separated by commas, English and at "
            "least one other (e.g. en,fr)"
        )
    return langs


def _hosts(value: str | None) -> list[str]:
    return [h.strip().lower() for h in (value or "").split(",") if h.strip()]


def _serve(values: list[str] | None) -> dict[str, str]:
    """``--serve HOST=FOLDER`` (repeated) as {host: folder}."""
    from parasim.stagecli import UsageError

    out: dict[str, str] = {}
    for value in values or []:
        host, sep, folder = value.partition("=")
        host = host.strip().lower()
        if not sep or not re.fullmatch(r"[a-z0-9.-]+", host) or not folder:
            raise UsageError(f"--serve {value!r}: give HOST=FOLDER, e.g. fr.example.org=site/fr")
        if not Path(folder).is_dir():
            raise UsageError(f"--serve {value!r}: {folder!r} is not a folder")
        out[host] = folder
    return out


def _options(args: argparse.Namespace) -> list[str]:
    """The options of this probe that shape its suggestion, as they were given."""
    out = []
    for value in args.serve or []:
        out += ["--serve", value]
    for flag, value, default in (
        ("--serve-dir", args.serve_dir, None),
        ("--languages", args.languages, None),
        ("--allowed-domains", args.allowed_domains, None),
        ("--max-pages", args.max_pages, 40),
    ):
        if value != default:
            out += [flag, str(value)]
    return out


def cmd_probe(args: argparse.Namespace) -> None:
    """Crawl a sample of one site, print the suggested entry and write it as YAML."""
    import yaml

    from parasim.config import validate_config
    from parasim.probe.stage import ProbeError, probe_site, render_yaml, site_name
    from parasim.stagecli import UsageError, write_stats

    if not _URL_RE.match(args.url):
        raise UsageError(f"{args.url!r} is not an absolute http(s) URL (e.g. https://example.org/)")
    if args.max_pages < 1:
        raise UsageError(f"--max-pages must be at least 1 (got {args.max_pages})")
    if args.serve_dir and not Path(args.serve_dir).is_dir():
        raise UsageError(f"--serve-dir {args.serve_dir!r} is not a folder")
    langs = _languages(args.languages)
    serve = _serve(args.serve)
    if serve and args.serve_dir:
        raise UsageError("--serve-dir and --serve: give one or the other")
    name = args.name or site_name(args.url)
    start_host = (urlsplit(args.url).hostname or "").lower()
    hosts = _hosts(args.allowed_domains)
    hosts += [h for h in serve if h != start_host and h not in hosts]  # served hosts are the site's
    early = {"name": name, "domain": args.domain, "languages": list(langs or ("en", "fr"))}
    early |= {"start_urls": [args.url], "allowed_domains": hosts}
    validate_config({"sites": [early]})  # a bad --name, --domain or host fails before the crawl
    with tempfile.TemporaryDirectory(prefix="parasim-probe-") as tmp:
        try:
            s, crawl = probe_site(
                args.url,
                Path(args.work or tmp),
                serve_dir=args.serve_dir,
                languages=langs,
                max_pages=args.max_pages,
                name=name,
                domain=args.domain,
                allowed_domains=tuple(hosts),
                serve=serve or None,
            )
        except ProbeError as exc:
            raise UsageError(str(exc)) from None
    skipped = ", ".join(f"{k} {v}" for k, v in crawl["pages_skipped_by_reason"].items()) or "none"
    command = " ".join(["parasim probe", args.url, *_options(args)])
    header = [
        f"Suggested by `{command}` from {crawl['pages_ok']} fetched page(s) "
        f"(not fetched: {skipped}).",
        f"Above each key: the counts behind it. Check: parasim validate-config {args.out}",
    ]
    text = render_yaml(s, header)
    validate_config(yaml.safe_load(text))  # what the probe suggests must validate as it is
    sys.stdout.write(text)
    out = Path(args.out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write {out}: {exc.strerror or exc}") from None
    log.info("probe %s: wrote %s; next: parasim validate-config %s", name, out, out)
    write_stats(args.stats, {"site": name, "stage": "probe", "crawl": crawl, **s.counts})


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the probe command to the `parasim` parser."""
    sp = add(
        "probe",
        cmd_probe,
        "Crawl a few dozen pages of a site; print and write a suggested `sites:` entry.",
    )
    sp.add_argument("url", help="the start URL, e.g. https://www.example.org/index-en.html")
    sp.add_argument("--serve-dir", help="a local folder holding the site, served on 127.0.0.1")
    sp.add_argument(
        "--serve",
        action="append",
        metavar="HOST=FOLDER",
        help="a local folder holding one host of a site on several hosts (repeat per host)",
    )
    sp.add_argument("--languages", help="the site's languages, e.g. en,fr (default: measured)")
    sp.add_argument("--max-pages", type=int, default=40, help="most URLs requested (default 40)")
    sp.add_argument("--out", default="suggested.yaml", help="YAML file to write")
    sp.add_argument(
        "--allowed-domains", help="other hosts the site lives on, comma-separated (e.g. fr.x.org)"
    )
    sp.add_argument("--name", help="the site's name (default: from the host)")
    sp.add_argument("--domain", default="general", help="the corpus domain label")
    sp.add_argument("--work", help="keep the sampled pages in this folder (default: a temp one)")
    sp.add_argument("--stats", help="write the counts as JSON here")
