"""What one job of a stage counted, typed: rows in, rows out, rows dropped by reason, the rest.

Every stage command writes one :class:`Stats` as JSON (``--stats``). The `.done` summaries
(``parasim summarize``), the yield report and :mod:`parasim.diagnose` read these fields and add
them up over shards by what they are, never by the look of a key:

- ``rows_in``: the rows the job received (in the stage's input unit: URLs, page pairs, sentence
  pairs, ...);
- ``rows_out``: the rows it passed on (what the next stage reads);
- ``dropped``: reason -> rows of ``rows_in`` left out for that reason; their sum is the job's
  drops (:attr:`Stats.n_dropped`). Where each row in gives at most one row out
  (:attr:`parasim.stages.Stage.one_to_one`), ``rows_in == rows_out + n_dropped``;
- ``counts``: other counts (integers, or mappings of them): added up over shards;
- ``seconds``: timings (numbers, or mappings of them): added up over shards, left out of the
  yield report;
- ``figures``: everything else (rates, shares, sizes, settings, lists): describes one job and is
  never added up.
"""

from __future__ import annotations

import json
import operator
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Recorder", "Stats", "add", "done_summary"]

#: Keys a stats file may have (the fields of :class:`Stats`).
_FIELDS = ("stage", "site", "rows_in", "rows_out", "dropped", "counts", "seconds", "figures")


def _count(where: str, value: Any) -> int:
    """``value`` as a non-negative int (numpy integers too); a TypeError naming ``where``."""
    if isinstance(value, (bool, float)):
        raise TypeError(f"{where}: a count must be an integer, not {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{where}: a count must be an integer, not {value!r}") from None
    if n < 0:
        raise ValueError(f"{where}: a count cannot be negative ({n})")
    return n


def _counts(where: str, value: Any) -> Any:
    """An int, or a mapping (nested) of them, with every leaf checked."""
    if isinstance(value, Mapping):
        return {str(k): _counts(f"{where}.{k}", v) for k, v in value.items()}
    return _count(where, value)


def _seconds(where: str, value: Any) -> Any:
    """A number, or a mapping (nested) of them."""
    if isinstance(value, Mapping):
        return {str(k): _seconds(f"{where}.{k}", v) for k, v in value.items()}
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{where}: a timing must be a number of seconds, not {value!r}")
    return float(value)


def add(a: Any, b: Any) -> Any:
    """``a + b`` for numbers, key by key for (nested) mappings; a key of one side only is kept.

    The one adder of counts and timings: :meth:`Stats.total` and :class:`Recorder` use it.
    """
    if isinstance(a, Mapping):
        out = dict(a)
        for k, v in b.items():
            out[k] = add(out[k], v) if k in out else _copy(v)
        return out
    return a + b


def _copy(value: Any) -> Any:
    """A copy of a (nested) mapping of numbers: later additions never change the caller's."""
    return {k: _copy(v) for k, v in value.items()} if isinstance(value, Mapping) else value


def _round(value: Any, digits: int = 4) -> Any:
    """Timings rounded to 0.1 ms (``digits``), leaf by leaf (a sum of rounded floats gathers
    noise)."""
    if isinstance(value, Mapping):
        return {k: _round(v, digits) for k, v in value.items()}
    return round(value, digits)


@dataclass(frozen=True)
class Stats:
    """The counts of one job of a stage (or their total over jobs, :meth:`total`).

    Attributes:
        stage: the stage's name in :mod:`parasim.stages`.
        rows_in: rows received.
        rows_out: rows passed on.
        dropped: reason -> rows of ``rows_in`` left out for that reason.
        counts: other counts (ints or nested mappings of ints), added up over shards.
        seconds: timings (numbers or nested mappings of them), added up over shards.
        figures: anything else (JSON-serialisable), never added up.
        site: the site, where the job is one site's.
    """

    stage: str
    rows_in: int = 0
    rows_out: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    counts: Mapping[str, Any] = field(default_factory=dict)
    seconds: Mapping[str, Any] = field(default_factory=dict)
    figures: Mapping[str, Any] = field(default_factory=dict)
    site: str | None = None

    def __post_init__(self) -> None:
        where = f"stats of stage {self.stage}"
        set_ = object.__setattr__  # frozen: the checked copies replace the given values once
        set_(self, "rows_in", _count(f"{where}: rows_in", self.rows_in))
        set_(self, "rows_out", _count(f"{where}: rows_out", self.rows_out))
        set_(
            self,
            "dropped",
            {str(r): _count(f"{where}: dropped.{r}", n) for r, n in self.dropped.items()},
        )
        set_(self, "counts", _counts(f"{where}: counts", self.counts))
        set_(self, "seconds", _seconds(f"{where}: seconds", self.seconds))
        set_(self, "figures", dict(self.figures))
        clash = {"rows_in", "rows_out", "dropped"} & set(self.counts)
        if clash:
            raise ValueError(f"{where}: counts may not be named {sorted(clash)} (a field)")

    @property
    def n_dropped(self) -> int:
        """All rows dropped: the sum over the reasons."""
        return sum(self.dropped.values())

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the fields in their order (``site`` only when set)."""
        out: dict[str, Any] = {"stage": self.stage}
        if self.site is not None:
            out["site"] = self.site
        out |= {
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
            "dropped": dict(self.dropped),
            "counts": dict(self.counts),
            "seconds": dict(self.seconds),
            "figures": dict(self.figures),
        }
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], where: str = "stats") -> Stats:
        """Read back :meth:`to_dict`'s form.

        Raises:
            ValueError: ``d`` is not a stats object of this form (e.g. a stats file written by an
                older parasim: rerun its stage).
        """
        unknown = sorted(set(d) - set(_FIELDS))
        if "stage" not in d or unknown:
            raise ValueError(
                f"{where}: not a parasim stats file "
                + (f"(unknown keys {unknown[:5]})" if unknown else "(no `stage`)")
                + "; written by an older parasim? Rerun the stage that wrote it"
            )
        return cls(**{k: d[k] for k in _FIELDS if k in d})

    @classmethod
    def read(cls, path: str | Path) -> Stats:
        """The stats file at ``path``."""
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")), str(path))

    @classmethod
    def total(cls, items: Iterable[Stats]) -> Stats:
        """The stats of several jobs of one stage (e.g. its shards) added up.

        Rows, drops by reason, counts and timings are added; figures describe one job each and
        are left out. The site is kept when every item names the same one.

        Raises:
            ValueError: no items, or items of several stages.
        """
        items = list(items)
        stages = sorted({s.stage for s in items})
        if len(stages) != 1:
            raise ValueError(f"cannot add up stats of stages {stages}: one stage at a time")
        sites = {s.site for s in items}
        out: dict[str, Any] = {"rows_in": 0, "rows_out": 0, "dropped": {}, "counts": {}}
        out["seconds"] = {}
        for s in items:
            for k in out:
                out[k] = add(out[k], getattr(s, k))
        out["seconds"] = _round(out["seconds"])
        return cls(stage=stages[0], site=sites.pop() if len(sites) == 1 else None, **out)


class Recorder:
    """What one job of a stage counts, as it runs: the stage's :class:`Stats`, built directly.

    Every stage function takes one (``rec``) and returns only its outputs; the stage's command
    writes :meth:`stats` (``--stats``). A count keeps the name it is recorded under, in the
    stats file, the `.done` summary and the yield report::

        rec.rows_in += len(pairs)
        rec.drop("missing_page")             # one row of rows_in left out, by reason
        rec.count("selector_used")           # any other count; a mapping adds key by key
        with rec.time("parse"):              # seconds of a step (added up over calls)
            ...
        rec.figure("pairs_per_s", 12.5)      # a rate, a setting, a size: never added up

    Attributes:
        stage: the stage's name (:mod:`parasim.stages`).
        site: the site, where the job is one site's.
        rows_in: rows received (the stage's input unit).
        rows_out: rows passed on.
    """

    def __init__(self, stage: str, site: str | None = None) -> None:
        self.stage, self.site = stage, site
        self.rows_in = self.rows_out = 0
        self._dropped: dict[str, int] = {}
        self._counts: dict[str, Any] = {}
        self._seconds: dict[str, Any] = {}
        self._figures: dict[str, Any] = {}

    def drop(self, reason: str, n: int = 1) -> None:
        """``n`` rows of ``rows_in`` left out for ``reason`` (0 still names the reason)."""
        self._dropped[reason] = self._dropped.get(reason, 0) + _count(f"drop {reason}", n)

    def count(self, name: str, n: Any = 1) -> None:
        """Add ``n`` (an int, or a nested mapping of ints) to the count ``name``."""
        n = _counts(f"count {name}", n)
        self._counts[name] = add(self._counts[name], n) if name in self._counts else _copy(n)

    def seconds(self, step: str, value: Any) -> None:
        """Add ``value`` seconds (or a mapping of them) to the timing of ``step``."""
        value = _seconds(f"seconds {step}", value)
        old = self._seconds.get(step)
        self._seconds[step] = _copy(value) if old is None else add(old, value)

    @contextmanager
    def time(self, step: str) -> Iterator[None]:
        """Time the block (wall clock) into ``seconds[step]``."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.seconds(step, time.perf_counter() - t0)

    def figure(self, name: str, value: Any) -> None:
        """Set the figure ``name`` (a rate, share, size, setting or list; never added up)."""
        self._figures[name] = value

    def dropped(self, reason: str) -> int:
        """The rows dropped so far for ``reason``."""
        return self._dropped.get(reason, 0)

    def counted(self, name: str, default: Any = 0) -> Any:
        """The count ``name`` so far (``default`` when never counted)."""
        return self._counts.get(name, default)

    def stats(self, rounding: int | None = None) -> Stats:
        """The job's stats (timings rounded to ``rounding`` digits when given)."""
        seconds = self._seconds if rounding is None else _round(self._seconds, rounding)
        return Stats(
            self.stage,
            site=self.site,
            rows_in=self.rows_in,
            rows_out=self.rows_out,
            dropped=self._dropped,
            counts=self._counts,
            seconds=seconds,
            figures=self._figures,
        )


def by_stage(items: Sequence[Stats]) -> dict[str, Stats]:
    """Stats of jobs added up per stage, in the order the stages first appear."""
    groups: dict[str, list[Stats]] = {}
    for s in items:
        groups.setdefault(s.stage, []).append(s)
    return {stage: Stats.total(group) for stage, group in groups.items()}


def done_summary(
    stage: str, site: str | None, shards: int, rows: int, own: Sequence[Stats]
) -> dict[str, Any]:
    """A stage's `.done` summary: its rows (from its shards) and its stats, added up per stage.

    Args:
        stage: the stage the `.done` target summarizes.
        site: the site.
        shards: how many shards it counted.
        rows: their rows.
        own: the stats files of the stage (one per job), and of any stage it covers (the
            positives' `.done` covers align and clean): each stage is added up apart.
    """
    return {
        "stage": stage,
        "site": site,
        "shards": shards,
        "rows": rows,
        "stats": {name: s.to_dict() for name, s in by_stage(own).items()},
    }
