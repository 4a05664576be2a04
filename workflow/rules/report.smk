"""Aggregation: tidy results, the paper's tables beside its numbers, plots, MLflow, report."""


# Light aggregation jobs run where Snakemake runs (on a cluster: the submit host), instead of
# waiting in a queue for a few seconds of work (docs/cluster.md).
localrules:
    init_tracking,
    collect_results,
    make_tables,
    plot_per_class,
    plot_roc_curves,
    log_to_mlflow,
    plot_ranks,
    write_provenance,


rule collect_results:
    input:
        detection_results(),
    output:
        report(
            "summary/results.csv",
            caption="../report/results.rst",
            category="Results",
        ),
    log:
        "logs/collect_results/collect_results.log",
    benchmark:
        "benchmarks/collect_results/collect_results.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/collect_results.py"


rule make_tables:
    input:
        "summary/results.csv",
        provenance=data_provenance_files(MAIN_DATASETS),
        histories=training_histories([MAIN]) if MAIN else [],
    output:
        main=report(
            multiext("summary/main_table", ".csv", ".md", ".tex", ".html"),
            caption="../report/main_table.rst",
            category="Tables",
            subcategory="Main table",
        ),
        comparisons="summary/main_table_wilcoxon.md",
        verdicts="summary/main_table_verdicts.csv",
        per_class=report(
            expand(
                "summary/per_class/{dataset}{ext}",
                dataset=MAIN_DATASETS,
                ext=[".csv", ".md", ".tex", ".html"],
            ),
            caption="../report/per_class.rst",
            category="Tables",
            subcategory="Per class",
        ),
    log:
        "logs/make_tables/make_tables.log",
    benchmark:
        "benchmarks/make_tables/make_tables.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    params:
        datasets=MAIN_DATASETS,
        protocol=protocol_notes(config, MAIN) if MAIN else [],
        breaks=protocol_breaks(config) if MAIN else [],
    script:
        "../scripts/make_tables.py"


rule plot_per_class:
    input:
        "summary/results.csv",
    output:
        report(
            "summary/plots/per_class_{dataset}.png",
            caption="../report/per_class_plot.rst",
            category="Plots",
            subcategory="{dataset}",
        ),
    log:
        "logs/plot_per_class/{dataset}.log",
    benchmark:
        "benchmarks/plot_per_class/{dataset}.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/plot_per_class.py"


# Defined always (localrules names it); requested only where RANK_PLOT holds.
rule plot_ranks:
    input:
        "summary/results.csv",
    output:
        report(
            RANK_PLOT_FILE,
            caption="../report/ranks.rst",
            category="Plots",
            subcategory="Ranks",
        ),
    log:
        "logs/plot_ranks/plot_ranks.log",
    benchmark:
        "benchmarks/plot_ranks/plot_ranks.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/plot_ranks.py"


rule plot_roc_curves:
    input:
        lambda wildcards: roc_score_files(wildcards.dataset),
    output:
        report(
            "summary/plots/roc_{dataset}.png",
            caption="../report/roc.rst",
            category="Plots",
            subcategory="{dataset}",
        ),
    log:
        "logs/plot_roc_curves/{dataset}.log",
    benchmark:
        "benchmarks/plot_roc_curves/{dataset}.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../scripts/plot_roc_curves.py"


rule init_tracking:
    output:
        "mlflow/store.json",
    log:
        "logs/init_tracking/init_tracking.log",
    conda:
        "../../environment.yml"
    params:
        experiment=config["experiment"],
        timeout_s=config["tracking"]["timeout_s"],
    script:
        "../scripts/init_tracking.py"


rule log_to_mlflow:
    input:
        store="mlflow/store.json",
        results="summary/results.csv",
        studies=lambda wildcards: study_outputs(),  # studies.smk, included later
        histories=training_histories(),
        tables=rules.make_tables.output,
        plots=expand(
            "summary/plots/{kind}_{dataset}.png",
            kind=["per_class", "roc"],
            dataset=MAIN_DATASETS,
        ),
    output:
        "mlflow/logged.json",
    log:
        "logs/log_to_mlflow/log_to_mlflow.log",
    benchmark:
        "benchmarks/log_to_mlflow/log_to_mlflow.tsv"
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=60,
    params:
        benchmark="images",
        experiment=config["experiment"],
        sweep=SWEEP,
        tags={},
        timeout_s=config["tracking"]["timeout_s"],
    script:
        "../scripts/log_to_mlflow.py"


rule write_provenance:
    input:
        # Re-made whenever the results are, so it describes the code that made them.
        "summary/results.csv",
    output:
        json="summary/provenance.json",
        html=report(
            "summary/provenance.html",
            caption="../report/provenance.rst",
            category="Provenance",
        ),
    log:
        "logs/write_provenance/write_provenance.log",
    conda:
        "../../environment.yml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    params:
        config=config,
        sweep=SWEEP,
    script:
        "../scripts/write_provenance.py"
