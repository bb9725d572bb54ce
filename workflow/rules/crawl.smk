rule crawl_site:
    """Crawl one site recursively (scrapy); every URL requested lands in the pages dataset.

    The crawl state (results/crawl_state/<site>) outlives the job: a killed crawl resumes without
    refetching finished pages. Delete that folder to recrawl from scratch.
    """
    input:
        code=code("crawl"),
    output:
        pages=directory("results/pages/{site}"),
        stats="results/stats/crawl_site/{site}.json",
    log:
        "logs/crawl_site/{site}.log",
    benchmark:
        "benchmarks/crawl_site/{site}.tsv"
    conda:
        "../../envs/crawl.yaml"
    threads: 1
    resources:
        mem_mb=1500,
        runtime=240,
    params:
        site=site_json,
        crawl=section_json("crawl"),
        state="results/crawl_state/{site}",
    shell:
        "parasim crawl-site --site-json {params.site:q} --settings-json {params.crawl:q}"
        " --out {output.pages} --state {params.state} --stats {output.stats} > {log} 2>&1"
