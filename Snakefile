# parasim: bilingual websites -> labelled multilingual similarity corpus.
# The whole workflow at a glance; every stage's rules live in workflow/rules/<stage>.smk and
# every stage's logic in src/parasim/.


from snakemake.utils import min_version

min_version("9.0")


configfile: "config.yaml"


include: "workflow/rules/common.smk"


wildcard_constraints:
    site=SITE_RE,
    shard=SHARD_RE,


include: "workflow/rules/crawl.smk"
include: "workflow/rules/pair_pages.smk"
include: "workflow/rules/parse.smk"
include: "workflow/rules/translate.smk"
include: "workflow/rules/align.smk"
include: "workflow/rules/clean.smk"
include: "workflow/rules/divergences.smk"
include: "workflow/rules/mine.smk"
include: "workflow/rules/negatives.smk"
include: "workflow/rules/scores.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/similarity.smk"
include: "workflow/rules/align_encoder.smk"
include: "workflow/rules/entity_siamese.smk"
include: "workflow/rules/graded_encoder.smk"
include: "workflow/rules/models_table.smk"


# Bookkeeping: each stage's .done target and the reports read stats files for a second or so;
# under a cluster executor Snakemake runs them itself instead of queueing a job for each.
localrules:
    all,
    pair_done,
    parse_done,
    translate_done,
    clean_done,
    divergences_done,
    scores_done,
    yield_report,
    similarity_report,
    models_table,


rule all:
    default_target: True
    input:
        expand("results/{done}/{site}.done", done=DONE_TARGETS, site=SITES),
        "results/corpus",
        "results/report/yield.tsv",
        f"{RANKER_DIR}/metrics.json",
        f"{S3BERT_DIR}/metrics.json",
        "results/models/similarity.done",
        f"{ENTITY_DIR}/metrics.json",
        f"{GRADED_DIR}/metrics.json",
        ALIGNED_DIR,
        "results/models/README.md",


onsuccess:
    # the models table at the end of the run (issue 34)
    if Path("results/models/README.md").exists():
        print(Path("results/models/README.md").read_text(encoding="utf-8"))
