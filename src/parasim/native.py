"""Small C helpers of parasim, compiled with the system's C compiler on first use and cached.

A library is cached as ``<cache>/<name>-<source hash>.so`` (``$XDG_CACHE_HOME/parasim``, else
``~/.cache/parasim``, else a per-user folder under the temp dir); concurrent jobs build it side by
side and rename it into place, so a half-written library is never loaded. Every caller has a
pure-Python path for machines without a compiler: :func:`build` then returns None and the reason.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path


def cache_dir() -> Path:
    """parasim's cache folder for compiled helpers."""
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        try:
            base = os.path.join(Path.home(), ".cache")
        except RuntimeError:  # no home directory: a per-user folder under the temp dir
            base = os.path.join(tempfile.gettempdir(), f"parasim-{os.getuid()}")
    return Path(base) / "parasim"


@functools.cache
def build(source: Path, *link_args: str) -> tuple[str | None, str]:
    """``(path of the shared library, "")`` for the C file ``source``, or ``(None, reason)``.

    Args:
        source: the C source (its content hash names the cached library).
        link_args: extra compiler arguments after the source (e.g. ``-ldl``).
    """
    src = Path(source)
    so = cache_dir() / f"{src.stem}-{hashlib.sha1(src.read_bytes()).hexdigest()[:12]}.so"
    if so.exists():
        return str(so), ""
    cc = shlex.split(sysconfig.get_config_var("CC") or "")[:1] or []
    cc = [c for c in (*cc, "cc", "gcc") if shutil.which(c)][:1]
    if not cc:
        return None, "no C compiler (cc, gcc) on the PATH"
    tmp = so.with_name(f".{so.name}.{os.getpid()}.tmp")
    cmd = [cc[0], "-shared", "-fPIC", "-O2", "-o", str(tmp), str(src), *link_args]
    try:
        so.parent.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        return None, f"{' '.join(cmd)}: {proc.stderr.strip()[:300]}"
    try:
        os.replace(tmp, so)
    except OSError as exc:
        return None, f"cannot store {so}: {exc}"
    return str(so), ""
