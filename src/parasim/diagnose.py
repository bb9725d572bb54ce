"""Why a site came out empty: one sentence naming the stage, the counts by reason and the fix.

A site's ``.done`` target (``parasim summarize``, every stage's) fails when its stage has no
rows. It reads the stats of that stage and of every stage before it, and :func:`explain_empty`
explains the earliest stage of the funnel (:data:`parasim.stages.FUNNEL`) that came out empty
with that stage's sentence-maker (:mod:`parasim.explain`), e.g. "0 page pairs for site X: 15
English pages point to pages detected as fr, not de; check `languages`".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parasim import stages
from parasim.stats import Stats, by_stage


def explain_empty(site: str, stage: str, stats: Mapping[str, Stats]) -> str:
    """One sentence on why ``stage`` of ``site`` has no rows.

    Args:
        site: the site's name.
        stage: the empty stage (a name in :mod:`parasim.stages`).
        stats: summed stats per stage name, this stage and the ones before it; stages without
            stats are skipped.

    Returns:
        The explanation of the earliest funnel stage up to ``stage`` whose stats say it is
        empty; a generic sentence naming ``stage`` when none does.
    """
    names = [s.name for s in stages.FUNNEL]
    upto = stages.FUNNEL[: names.index(stage) + 1] if stage in names else ()
    for st in upto:
        s = stats.get(st.name)
        if s is None or st.explain is None or not st.empty(s):
            continue
        if st.input_from_upstream and st.upstream and not s.rows_in:
            return (
                f"0 rows from stage {st.name} for site {site}: the {st.upstream} stage gave it "
                "nothing; see that stage's log and stats"
            )
        return st.explain(site, s)
    own = stats.get(stage)
    counts = (own and ", ".join(f"{k} {v}" for k, v in own.dropped.items() if v)) or (
        "nothing counted"
    )
    return f"0 rows from stage {stage} for site {site}: {counts}; see the stage's log"


def require_rows(
    site: str,
    stage: str,
    rows: int,
    own: Sequence[Stats],
    upstream: Sequence[Stats] = (),
    allow_empty: bool = False,
) -> None:
    """Raise a one-sentence :class:`~parasim.stagecli.UsageError` when ``stage`` has no rows.

    Args:
        site: the site's name.
        stage: the stage being summarized.
        rows: its rows, summed over shards.
        own: its stats files (one per job), and those of the stages its `.done` covers.
        upstream: the stats files of the stages before it.
        allow_empty: the config's ``allow_empty``: zero rows is then not an error.
    """
    from parasim.stagecli import UsageError

    if rows or allow_empty:
        return
    raise UsageError(
        f"{explain_empty(site, stage, by_stage([*upstream, *own]))} (or set `allow_empty: true` "
        "if an empty result is wanted)"
    )
