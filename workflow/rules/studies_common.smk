"""Helpers of studies.smk: every grid gets a table, figures and a place on the summary page.

No rules. Each grid of the config (GRIDS in common.smk) is a study, the main table too.
"""

# The main grid is a study too (kind main), so the summary ranks its deviations with the rest.
STUDIES = list(GRIDS)
STUDY_BY_NAME = {grid.name: grid for grid in STUDIES}
G_METHODS = _union(
    [m for m in grid.methods if m in TRAINED] for grid in GRIDS if "g" in grid.spaces
)
UNIFORMITY_GRIDS = [grid for grid in STUDIES if grid.kind == "uniformity"]
STUDY = "studies/{study}"


def study_results(wildcards):
    return [path for _, path in grid_results(STUDY_BY_NAME[wildcards.study])]


def _model_folders(grid):
    """SPLIT/{method} of every trained model the grid's results come from."""
    return list(
        dict.fromkeys(
            ResultKey.from_wildcards(key).model_folder()
            for key, _ in grid_results(grid)
            if key["method"] in TRAINED
        )
    )


def uniformity_files(grid):
    """uniformity.json of every trained model of a uniformity study (model folder -> file)."""
    if grid.kind != "uniformity":
        return {}
    return {
        folder: os.path.join(folder, "uniformity.json")
        for folder in _model_folders(grid)
    }


def study_keys(wildcards):
    """The grid's result keys, in the order of study_results."""
    return [key for key, _ in grid_results(STUDY_BY_NAME[wildcards.study])]


def study_outputs():
    return [f"studies/{grid.name}/{grid.name}.json" for grid in STUDIES]
