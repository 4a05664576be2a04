"""The paper's studies (docs/studies.md): g-space detectors, uniformity, one table and its
figures per study, and the summary page that ranks every number against the paper.

Each grid of the config (GRIDS in common.smk: the main table and each study) needs results
from the shared results tree; a study only adds the rules below on top of it. Helpers
(targets, params) are in studies_common.smk.
"""

from pipeline_lib.config.resources import mem_mb_by_attempt


include: "studies_common.smk"


if STUDIES:

    wildcard_constraints:
        study=_one_of(STUDY_BY_NAME),

    # Light aggregation: on the submit host, not as cluster jobs.
    localrules:
        make_study,
        make_main_study,


if G_METHODS:

    rule score_detectors_g:
        input:
            split=os.path.join(SPLIT, "split.npz"),
            features=os.path.join(SPLIT, "{method}", "features.npz"),
        output:
            results=expand(
                os.path.join(RESULT_G, "result.json"),
                detector=DETECTORS,
                allow_missing=True,
            ),
            scores=expand(
                os.path.join(RESULT_G, "scores.npz"),
                detector=DETECTORS,
                allow_missing=True,
            ),
        log:
            "logs/score_detectors_g/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}/{fitset}.log",
        benchmark:
            "benchmarks/score_detectors_g/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}/{fitset}.tsv"
        wildcard_constraints:
            method=_one_of(G_METHODS),
        retries: 1
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=mem_mb_by_attempt(8000),
            runtime=60,
            gpu=0,
        params:
            detectors=DETECTOR_PARAMS,
            max_fit=config["detect"]["max_fit"],
            space="g",
        script:
            "../scripts/score_detectors.py"


if UNIFORMITY_GRIDS:

    rule measure_uniformity:
        input:
            os.path.join(SPLIT, "{method}", "features.npz"),
        output:
            os.path.join(SPLIT, "{method}", "uniformity.json"),
        log:
            "logs/measure_uniformity/{dataset}/{inlier}/contam{contamination}/seed{seed}/{method}.log",
        wildcard_constraints:
            method=_one_of(TRAINED or ["none"]),
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=4000,
            runtime=10,
        script:
            "../scripts/measure_uniformity.py"


if STUDIES:

    rule make_study:
        input:
            results=study_results,
            uniformity=lambda wildcards: list(
                uniformity_files(STUDY_BY_NAME[wildcards.study]).values()
            ),
            provenance=study_provenance,
            histories=lambda wildcards: training_histories(
                [STUDY_BY_NAME[wildcards.study]]
            ),
        output:
            results=os.path.join(STUDY, "results.csv"),
            expected=os.path.join(STUDY, "expected.csv"),
            manifest=os.path.join(STUDY, "{study}.json"),
            deviations=os.path.join(STUDY, "{study}_deviations.csv"),
            comparisons=multiext(os.path.join(STUDY, "{study}_wilcoxon"), ".md", ".csv"),
            tables=report(
                multiext(
                    os.path.join(STUDY, "{study}"), ".csv", ".md", ".tex", ".html"
                ),
                caption="../report/study.rst",
                category="Studies",
                subcategory="{study}",
            ),
            figures=report(
                directory(os.path.join(STUDY, "figures")),
                patterns=["{name}.png"],
                caption="../report/study_figure.rst",
                category="Studies",
                subcategory="{study}",
            ),
        log:
            "logs/make_study/{study}.log",
        wildcard_constraints:
            study=_one_of(
                [grid.name for grid in STUDIES if grid is not MAIN] or ["none"]
            ),
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=8000,
            runtime=30,
        params:
            kind=lambda wildcards: STUDY_BY_NAME[wildcards.study].kind,
            protocol=lambda wildcards: protocol_notes(
                config, STUDY_BY_NAME[wildcards.study]
            ),
            options=lambda wildcards: STUDY_BY_NAME[wildcards.study].options,
            result_keys=study_keys,
            uniformity=lambda wildcards: uniformity_files(
                STUDY_BY_NAME[wildcards.study]
            ),
            variants=VARIANTS,
        script:
            "../scripts/make_study.py"


if MAIN:

    # The main grid's study: the same job, but its human tables are the main table that
    # make_tables writes once (summary/main_table.*); the study links them.
    use rule make_study as make_main_study with:
        input:
            results=study_results,
            uniformity=lambda wildcards: list(
                uniformity_files(STUDY_BY_NAME[wildcards.study]).values()
            ),
            main_table=multiext("summary/main_table", ".csv", ".md", ".tex", ".html"),
            provenance=study_provenance,
            histories=training_histories([MAIN]),
        output:
            results=os.path.join(STUDY, "results.csv"),
            expected=os.path.join(STUDY, "expected.csv"),
            manifest=os.path.join(STUDY, "{study}.json"),
            deviations=os.path.join(STUDY, "{study}_deviations.csv"),
            comparisons=multiext(os.path.join(STUDY, "{study}_wilcoxon"), ".md", ".csv"),
            table=os.path.join(STUDY, "{study}.csv"),
            figures=report(
                directory(os.path.join(STUDY, "figures")),
                patterns=["{name}.png"],
                caption="../report/study_figure.rst",
                category="Studies",
                subcategory="{study}",
            ),
        wildcard_constraints:
            study=re.escape(MAIN.name),


if MAIN:

    localrules:
        make_summary,
        partial_summary,

    rule make_summary:
        input:
            manifests=study_outputs(),
            main_table="summary/main_table.csv",
            verdicts="summary/main_table_verdicts.csv",
            provenance=data_provenance_files(MAIN_DATASETS),
            ranks=RANK_PLOT,
            results="summary/results.csv",
            logged=image_tracking_log(),
            # what the page shows inline or links, besides the studies: every table and
            # figure of the summary folder
            histories=training_histories([MAIN]),
            per_class=rules.make_tables.output.per_class,
            comparisons=rules.make_tables.output.comparisons,
            bars=expand(rules.plot_per_class.output[0], dataset=MAIN_DATASETS),
            roc=expand(rules.plot_roc_curves.output[0], dataset=MAIN_DATASETS),
            run_provenance=rules.write_provenance.output,
            mvtec=lambda wildcards: (
                [*mvtec_table_outputs(), *mvtec_heatmap_outputs()] if MVTEC else []
            ),
            explanations=lambda wildcards: explanation_outputs(),
        output:
            html=report(
                "summary/index.html",
                caption="../report/summary.rst",
                category="Summary",
            ),
            markdown="summary/index.md",
        log:
            "logs/make_summary/make_summary.log",
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=4000,
            runtime=30,
        params:
            studies=[grid.name for grid in STUDIES],
            datasets=MAIN_DATASETS,
            n_datasets=len(MAIN_DATASETS),
            protocol=protocol_notes(config, MAIN),
            breaks=protocol_breaks(config),
            # one job of each ROC figure: its class, seed and contamination name the figure
            roc_jobs=[roc_score_files(dataset)[0] for dataset in MAIN_DATASETS],
        script:
            "../scripts/make_summary.py"

    rule partial_summary:
        """What exists now, with every missing result marked: run with --forcerun
        partial_summary while a large sweep is incomplete or after failed jobs."""
        output:
            "summary/partial/index.html",
        log:
            "logs/partial_summary/partial_summary.log",
        conda:
            "../../environment.yml"
        threads: 1
        resources:
            mem_mb=8000,
            runtime=30,
        params:
            grids=lambda wildcards: {
                grid.name: {
                    "kind": grid.kind,
                    "options": grid.options,
                    "keys": [key for key, _ in grid_results(grid)],
                    "paths": [path for _, path in grid_results(grid)],
                    "uniformity": uniformity_files(grid),
                    "protocol": protocol_notes(config, grid),
                }
                for grid in GRIDS
            },
            variants=VARIANTS,
        script:
            "../scripts/partial_summary.py"
