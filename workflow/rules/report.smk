rule yield_report:
    """Per site and stage: kept, dropped by reason; a table and a funnel plot (`--report`)."""
    input:
        crawl=expand("results/stats/crawl_site/{site}.json", site=SITES),
        pairs=expand("results/stats/pair_pages/{site}.json", site=SITES),
        clean=expand("results/stats/clean_positives/{site}.json", site=SITES),
        shards=expand(
            "results/stats/{job}/{site}/{shard}.json",
            job=REPORTED_SHARD_JOBS,
            site=SITES,
            shard=SHARDS,
        ),
        code=code("report"),
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
