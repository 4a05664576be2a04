"""How a run's protocol differs from the paper's, computed from its config.

Every table that sits beside published numbers carries one line saying so, above the table:
a run with 20 epochs, width 16 or 2,000 training images per class is not the paper's
experiment, and its "deviations from the paper" must not read as if it were. The line lists
each difference with the paper's value (docs/protocol.md; Sohn et al., ICLR 2021): training
epochs (2048), ResNet-18 width and stem (64), the number of seeds (5), subsets of the images or
classes, variants that are not the paper's, other training settings, the contamination of
the main table (0) and MVTec's image / patch sizes (256 / 32, stride 4).

Torch-free and config-only, so the Snakefile can compute the lines at parse time and hand
them to the table jobs as params. Two lines come from what the jobs wrote instead, read by
the table jobs as inputs: the data line (:func:`data_notes`, from the data sets' provenance
files, :mod:`pipeline_lib.data.provenance`) and the training line (:func:`training_notes`:
device, precision and step mode from each trained model's own history, since which jobs get
a GPU is decided by a profile or the command line, not the config).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pipeline_lib.data import DATASETS
from pipeline_lib.registry import PAPER_RECIPE, is_trained, reads_setting

__all__ = [
    "PAPER_PROTOCOL",
    "PAPER_TRAIN",
    "data_notes",
    "mvtec_protocol_notes",
    "protocol_breaks",
    "protocol_differences",
    "protocol_notes",
    "table_notes",
    "training_notes",
    "training_setting",
]

#: The paper's protocol, the values the notes compare against.
PAPER_PROTOCOL: Mapping[str, Any] = {
    "epochs": 2048,
    "width": 64,
    "seeds": 5,
    "imagenet_size": 224,
    "contamination": 0.0,
    "mvtec_image_size": 256,
    "mvtec_patch_size": 32,
    "mvtec_stride": 4,
}

#: The paper's training settings besides the epochs (``train`` keys of the config; null
#: batch size and head depth mean the paper's per-method values), and its recipe switches
#: from the registry (docs/protocol.md).
PAPER_TRAIN: Mapping[str, Any] = {
    "batch_size": None,
    "lr": 0.01,
    "momentum": 0.9,
    "weight_decay": 0.0003,
    "head_depth": None,
    "temperature": 0.2,
    **PAPER_RECIPE,
}


def _trained(methods: Sequence[str], variants: Mapping[str, Any]) -> bool:
    return any(is_trained(m) or m in variants for m in methods)


def _read_by_run(key: str, methods: Sequence[str], variants: Mapping[str, Any]) -> bool:
    """Whether a trained method of the run (a variant counts as its base) reads ``key``.

    A recipe switch that no method of the run reads (the denoising input of a RotNet run,
    say) cannot take the run off the paper's recipe.
    """
    if key not in PAPER_RECIPE:
        return True
    bases = {(variants.get(m) or {}).get("method", m) for m in methods}
    return any(reads_setting(base, key) for base in bases)


def _class_subset(name: str, classes: Any) -> str | None:
    spec = DATASETS.get(name)
    if spec is None or not isinstance(spec.class_names, tuple) or classes in (None, "all"):
        return None
    allowed = spec.inliers if spec.inliers is not None else spec.class_names
    if set(classes) >= set(allowed):
        return None
    return f"{name}: {len(classes)} of {len(allowed)} classes ({', '.join(classes)})"


def protocol_differences(
    config: Mapping[str, Any],
    *,
    datasets: Mapping[str, Mapping[str, Any]] | None = None,
    methods: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    contamination: Sequence[float] | None = None,
    main: bool = True,
) -> list[str]:
    """Each way the run differs from the paper's protocol, as a short phrase.

    Parameters
    ----------
    config : mapping
        The validated config (defaults filled).
    datasets, methods, seeds, contamination : optional
        The grid's own values (a study's); None takes the config's top level.
    main : bool, default=True
        The grid stands for the paper's main table: its variants and a contamination > 0
        are differences too (a study's variants and contamination are its design).

    Returns
    -------
    list of str
        E.g. ``["20 training epochs (paper 2048)", "ResNet width 16 (paper 64)"]``; empty
        when the run follows the paper.
    """
    datasets = config.get("datasets") or {} if datasets is None else datasets
    methods = list(config.get("methods") or []) if methods is None else list(methods)
    seeds = list(config.get("seeds") or []) if seeds is None else list(seeds)
    splits = config.get("splits") or {}
    contamination = (
        list(splits.get("contamination", [0.0])) if contamination is None else contamination
    )
    variants = config.get("variants") or {}
    train = config.get("train") or {}
    embed = config.get("embed") or {}
    out: list[str] = []
    trained = _trained(methods, variants)
    epochs = train.get("epochs", PAPER_PROTOCOL["epochs"])
    if trained and epochs != PAPER_PROTOCOL["epochs"]:
        out.append(f"{epochs} training epochs (paper {PAPER_PROTOCOL['epochs']})")
    width = embed.get("width", PAPER_PROTOCOL["width"])
    # The trained networks' stem (train.stem_width, null: the width; the paper's is 64).
    stem = train.get("stem_width") if trained else None
    own_stem = f", trained stem {stem}" if stem is not None and stem != width else ""
    if width != PAPER_PROTOCOL["width"] and any(m != "raw" for m in methods):
        out.append(f"ResNet width {width}{own_stem} (paper {PAPER_PROTOCOL['width']})")
    elif own_stem:
        out.append(f"trained ResNet stem {stem} (paper {PAPER_PROTOCOL['width']})")
    if len(seeds) != PAPER_PROTOCOL["seeds"]:
        out.append(
            f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''} (paper {PAPER_PROTOCOL['seeds']})"
        )
    for name, settings in datasets.items():
        settings = settings or {}
        limits = [
            f"at most {settings[key]} {what} images per class"
            for key, what in (("max_train_per_class", "training"), ("max_test_per_class", "test"))
            if settings.get(key) is not None
        ]
        if limits:
            out.append(f"{name}: {' and '.join(limits)} (paper: all)")
        subset = _class_subset(name, settings.get("classes", "all"))
        if subset:
            out.append(f"{subset} (paper: all)")
    if trained:
        changed = [
            f"{key} {train[key]} (paper {value})"
            for key, value in PAPER_TRAIN.items()
            if key in train and train[key] != value and _read_by_run(key, methods, variants)
        ]
        if changed:
            out.append("training: " + ", ".join(changed))
    if "resnet50_imagenet" in methods:
        size = embed.get("imagenet_size", PAPER_PROTOCOL["imagenet_size"])
        if size != PAPER_PROTOCOL["imagenet_size"]:
            out.append(f"ImageNet input {size} px (paper {PAPER_PROTOCOL['imagenet_size']})")
    if main:
        own = [m for m in methods if m in variants]
        for name in own:
            spec = variants[name]
            overrides = ", ".join(f"{k}={v}" for k, v in (spec.get("train") or {}).items())
            size = spec.get("train_size")
            detail = "; ".join(
                part
                for part in (overrides, f"train_size={size}" if size is not None else "")
                if part
            )
            out.append(
                f"non-paper variant {name} ({spec['method']}{': ' + detail if detail else ''})"
            )
        dirty = [f"{c:g}" for c in contamination if float(c) != PAPER_PROTOCOL["contamination"]]
        if dirty:
            out.append(f"contamination {', '.join(dirty)} (paper's main table: 0)")
    return out


def protocol_breaks(config: Mapping[str, Any]) -> list[str]:
    """The differences that make the main table another experiment than the paper's.

    All of :func:`protocol_differences` but the seed count (our seeds enter the verdict's
    std: :func:`pipeline_lib.paper.verdict.reproduction_verdict`). The numeric precision is
    no break either: :func:`training_notes` states it from the jobs' records.
    """
    paper_seeds = list(range(PAPER_PROTOCOL["seeds"]))
    return protocol_differences(config, seeds=paper_seeds)


def _line(differences: Sequence[str]) -> list[str]:
    if not differences:
        return ["Protocol: the paper's (as far as the config says)."]
    return ["Protocol differs from the paper's: " + "; ".join(differences) + "."]


def protocol_notes(config: Mapping[str, Any], grid: Any = None) -> list[str]:
    """The line above a table of the image benchmarks, as a one-item list.

    Parameters
    ----------
    config : mapping
        The validated config.
    grid : pipeline_lib.config.grids.Grid or None, default=None
        The study grid the table shows; None: the config's top level (the main table).

    Returns
    -------
    list of str
        ``["Protocol differs from the paper's: ...; ...."]`` or ``["Protocol: the
        paper's ..."]``.
    """
    if grid is None:
        return _line(protocol_differences(config))
    return _line(
        protocol_differences(
            config,
            datasets=grid.datasets,
            methods=grid.methods,
            seeds=grid.seeds,
            contamination=grid.contamination,
            main=grid.kind == "main",
        )
    )


def mvtec_protocol_notes(config: Mapping[str, Any]) -> list[str]:
    """The line above the MVTec AD tables: seeds, width and the patch protocol's sizes.

    Returns
    -------
    list of str
        As :func:`protocol_notes`.
    """
    mvtec = config["mvtec"]
    methods = list(mvtec.get("methods") or config.get("methods") or [])
    out = protocol_differences(config, datasets={}, methods=methods, main=False)
    # MVTec trains with its own settings (mvtec.train): drop the image benchmarks' epochs.
    out = [d for d in out if "training epochs" not in d and not d.startswith("training:")]
    # mvtec.train overrides the top-level train keys; null keeps the top-level value.
    epochs = (mvtec.get("train") or {}).get("epochs")
    if epochs is None:
        epochs = (config.get("train") or {}).get("epochs")
    if epochs is not None and _trained(methods, {}):
        if epochs != PAPER_PROTOCOL["epochs"]:
            out.insert(0, f"{epochs} training epochs (paper {PAPER_PROTOCOL['epochs']})")
    patches = mvtec.get("patches") or {}
    for key, value, what in (
        ("mvtec_image_size", mvtec.get("image_size"), "image size"),
        ("mvtec_patch_size", patches.get("size"), "patch size"),
        ("mvtec_stride", patches.get("stride"), "patch stride"),
    ):
        if value is not None and value != PAPER_PROTOCOL[key]:
            out.append(f"{what} {value} (paper {PAPER_PROTOCOL[key]})")
    for key, what in (
        ("max_train_images", "training images per category"),
        ("max_test_per_type", "test images per test folder"),
    ):
        if mvtec.get(key) is not None:
            out.append(f"at most {mvtec[key]} {what} (paper: all)")
    return _line(out)


def data_notes(provenance: Sequence[Mapping[str, Any]]) -> list[str]:
    """Lines above a table saying which data sets were not read from the official files.

    Parameters
    ----------
    provenance : sequence of mapping
        Records of :func:`pipeline_lib.data.provenance.data_provenance`, one per data set
        of the table.

    Returns
    -------
    list of str
        One line per data set whose files are not the official release's (``official``
        False) or could not be checked (``"unknown"``), e.g. ``"Data: cifar10 files differ
        from the official CIFAR-10 (python version) release (md5 mismatch: data_batch_1,
        ...)."``; none for data sets whose every file matches.

    Raises
    ------
    ValueError
        If a record lacks ``dataset``, ``official`` or ``reason``.
    """
    lines = []
    for record in provenance:
        missing = [key for key in ("dataset", "official", "reason") if key not in record]
        if missing:
            raise ValueError(
                f"data provenance record lacks {missing}: re-run record_data_provenance "
                f"(got keys {sorted(record)})"
            )
        name, official = record["dataset"], record["official"]
        if official is True:
            continue
        if official is False:
            release = record.get("release") or "official"
            lines.append(
                f"Data: {name} files differ from the official {release} release "
                f"({record['reason']})."
            )
        else:
            lines.append(
                f"Data: {name} files are not checked against an official release "
                f"({record['reason']})."
            )
    return lines


_AUTOCAST_NAMES = {"bfloat16": "bf16 autocast", "float16": "fp16 autocast"}
_STEP_NAMES = {"graph": "graph-captured steps", "compiled": "compiled, graph-captured steps"}
# Letters whose spoken name starts with a vowel sound: "an H200", "an A100", "a T4".
_VOWEL_SOUND_LETTERS = frozenset("AEFHILMNORSX")


def _article(name: str) -> str:
    first = name.split()[0] if name.split() else name
    if first[:1].isupper() and (first.isupper() or any(c.isdigit() for c in first)):
        return "an" if first[0] in _VOWEL_SOUND_LETTERS else "a"  # read letter by letter
    return "an" if first[:1].lower() in "aeiou" else "a"


def _device_words(history: Mapping[str, Any]) -> str:
    if history.get("device", "cpu") != "cuda":
        return "on the CPU"
    name = str(history.get("device_name") or "").removeprefix("NVIDIA").strip()
    return f"on {_article(name)} {name}" if name else "on CUDA"


def training_setting(history: Mapping[str, Any]) -> str:
    """How one model trained, from its own history file (``train_history.json``).

    Parameters
    ----------
    history : mapping
        ``device`` (``"cpu"`` / ``"cuda"``), ``device_name`` (e.g. ``"NVIDIA H200"``),
        ``history`` (per-epoch records holding ``autocast``, the autocast dtype that ran or
        None, and ``step_mode``) and ``arguments``. A record written before ``autocast``
        was recorded falls back to ``arguments["amp"]`` on CUDA (autocast never runs on the
        CPU).

    Returns
    -------
    str
        E.g. ``"float32 on the CPU"``, ``"bf16 autocast on an H200, graph-captured steps"``.
    """
    epochs = list(history.get("history") or [])
    on_cuda = history.get("device", "cpu") == "cuda"
    fallback = (history.get("arguments") or {}).get("amp") if on_cuda else None
    casts = {e.get("autocast", fallback) for e in epochs} or {fallback}
    precision = " then ".join(
        _AUTOCAST_NAMES.get(c, f"{c} autocast") if c else "float32" for c in sorted(casts, key=str)
    )
    steps = sorted({str(e["step_mode"]) for e in epochs if e.get("step_mode") in _STEP_NAMES})
    words = f"{precision} {_device_words(history)}"
    return words + "".join(f", {_STEP_NAMES[step]}" for step in steps)


def training_notes(histories: Sequence[Mapping[str, Any]]) -> list[str]:
    """The line above a table saying on what and in which precision its models trained.

    Parameters
    ----------
    histories : sequence of mapping
        The trained models' history files (:func:`training_setting`).

    Returns
    -------
    list of str
        Nothing without a trained model; else one line, e.g. ``"Training: float32 on the
        CPU (4 models)."``, or for a run that mixes settings ``"Training mixes settings:
        bf16 autocast on an H200 (6 models); float32 on the CPU (2 models)."``.
    """
    counts: dict[str, int] = {}
    for history in histories:
        setting = training_setting(history)
        counts[setting] = counts.get(setting, 0) + 1
    if not counts:
        return []
    parts = [f"{setting} ({n} model{'s' if n != 1 else ''})" for setting, n in counts.items()]
    if len(parts) == 1:
        return [f"Training: {parts[0]}."]
    return [f"Training mixes settings: {'; '.join(parts)}."]


def table_notes(
    *,
    protocol: Sequence[str],
    data: Sequence[str],
    training: Sequence[str],
    published: bool,
) -> list[str]:
    """The lines above a table: how the run differs from the paper's protocol and data only
    beside a published number (without one there is nothing they qualify), then always how
    its models trained.

    Parameters
    ----------
    protocol, data, training : sequence of str
        :func:`protocol_notes`, :func:`data_notes`, :func:`training_notes`.
    published : bool
        Whether the table shows a published number.
    """
    return [*(list(protocol) + list(data) if published else []), *training]
