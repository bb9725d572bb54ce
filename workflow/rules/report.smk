#: Every stats file of the yield report's stages, every site.
REPORT_STATS = [
    f
    for stage in stages.FUNNEL
    for site in SITES
    for f in stage.stats_files(site, SHARDS)
]


rule yield_report:
    """Per site and stage: kept, dropped by reason; a table and a funnel plot (`--report`); then
    the corpus's hardness for the untrained encoder, per tier."""
    input:
        stats=REPORT_STATS,
        corpus="results/stats/build_corpus.json",  # its hardness figures
        code=code("report", "stages", "stats"),
    output:
        tsv="results/report/yield.tsv",
        json="results/report/yield.json",
        png=report(
            "results/report/yield.png",
            caption="../report/yield.rst",
            category="Yield",
        ),
    log:
        "logs/yield_report.log",
    conda:
        "../../envs/nlp.yaml"
    params:
        sites=SITES,
    shell:
        "parasim yield-report --stats-root results/stats --sites {params.sites}"
        " --tsv {output.tsv} --json {output.json} --png {output.png} > {log} 2>&1"
