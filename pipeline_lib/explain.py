"""Gradient-based visual explanations of deep one-class classifiers (paper Sec. 3.3, 5.3).

The paper makes any representation's decision explainable by putting a differentiable
detector on it: the KDE score is a smooth function of ``f(x)``, so
``dKDE(f(x))/dx = dKDE/df * df/dx`` (Sec. 3.3), and standard attribution methods apply:

* integrated gradients (Sundararajan et al., 2017), :func:`integrated_gradients`, written
  here directly in torch (no captum): the path integral of the gradient from a baseline
  (a black image) to the input, approximated by the trapezoidal rule. Its *completeness*
  property, ``sum(attributions) = score(x) - score(baseline)``, is the sanity check the
  tests and the figure script report;
* GradCAM (Selvaraju et al., 2017), :func:`gradcam`: the last convolutional stage's
  activations weighted by the spatial mean of the score's gradient, ReLU, up-sampled.

Scores explained (:func:`kde_anomaly_function`, :func:`rotation_anomaly_function`) are
*anomaly* scores, higher = more anomalous, the quantity the benchmark ranks: the negative
KDE score on normalised ``f``, and for RotNet's own classifier the negative sum of
probabilities ``-sum_k p(k | rot_k(x))`` (the ``rotation_classifier`` detector, the paper's
Table 1 score). Heat maps therefore
show what makes an image look anomalous (e.g. eyeglasses for a face model trained without).

Models run in inference mode (BatchNorm with running statistics), so every image's score
depends on that image only and a batch's summed score has per-image gradients.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from pipeline_lib.data import ImageDataset
from pipeline_lib.data.split import OneClassSplit
from pipeline_lib.detection.detectors.kde import KernelDensityScore
from pipeline_lib.detection.detectors.kernels import kde_score, kde_state, normalize_rows
from pipeline_lib.detection.runner import limit_fit_index, rows_for
from pipeline_lib.models.checkpoints import load_trained_representation
from pipeline_lib.models.proxy import ProxyModel
from pipeline_lib.models.representation import (
    Representation,
    build_representation,
    imagenet_weights_from_env,
)
from pipeline_lib.registry import GAMMA_SCALE, ROTATION_DETECTORS, detector_settings
from pipeline_lib.ssl.augment import rotate90
from pipeline_lib.ssl.rotation import rotation_view_logits, scores_from_rotation_logits

__all__ = [
    "ROTATION_VIEWS",
    "ScoreFunction",
    "Explanation",
    "explain_images",
    "explain_split",
    "explanation_layer",
    "gradcam",
    "integrated_gradients",
    "kde_anomaly_function",
    "rotation_anomaly_function",
]

log = logging.getLogger(__name__)

#: Images ``(n, 3, h, w)`` in [0, 1] -> anomaly scores ``(n,)``, differentiable. A score
#: function that runs the network on rotated copies lists the quarter turns of its forward
#: passes, in order, as its ``views`` attribute (see :func:`gradcam`).
ScoreFunction = Callable[[torch.Tensor], torch.Tensor]

#: Quarter turns of RotNet's four forward passes.
ROTATION_VIEWS: tuple[int, ...] = (0, 1, 2, 3)


def kde_anomaly_function(
    model: Representation,
    fit_features: np.ndarray,
    *,
    gamma: float | None = None,
    gamma_scale: float = GAMMA_SCALE,
    space: str = "f",
) -> ScoreFunction:
    """Differentiable ``-KDE(normalize(f(x)))`` with the detector's own fit set and gamma.

    Same score as :class:`pipeline_lib.detection.detectors.kde.KernelDensityScore` (normalised
    features, ``gamma = gamma_scale / (d Var)`` unless given), negated:
    ``-(1/gamma) log sum_y exp(-gamma ||normalize(f(x)) - y||^2)``. The fit is that
    detector's (in float64), the score its kernel
    (:func:`pipeline_lib.detection.detectors.kernels.kde_score`), here in one differentiable
    block.

    Parameters
    ----------
    model : Representation
        Put in inference mode; its parameters are not differentiated.
    fit_features : ndarray of shape (n_fit, d)
        Training features (un-normalised, as stored in ``features.npz``).
    gamma : float or None, default=None
    gamma_scale : float, default=GAMMA_SCALE (10, the paper's)
    space : {"f", "g"}, default="f"
        The paper explains ``f``.

    Returns
    -------
    callable
        Images ``(n, 3, h, w)`` on the model's device -> ``(n,)`` float64 anomaly scores.
    """
    model.eval()
    device = next(model.parameters()).device
    # The detector's own fit (normalisation, gamma) on float64 rows, and its scoring kernel.
    kde = KernelDensityScore(gamma=gamma, gamma_scale=gamma_scale, dtype="float64")
    kde.fit(np.asarray(fit_features, dtype=np.float64))
    state = kde_state(kde.fit_features_, kde.center_, kde.gamma_, device=device)

    def score(images: torch.Tensor) -> torch.Tensor:
        return -kde_score(normalize_rows(model(images)[space].double()), state)

    score.gamma = state.gamma  # type: ignore[attr-defined]
    return score


def rotation_anomaly_function(model: ProxyModel) -> ScoreFunction:
    """RotNet's own score as an anomaly score: ``-sum_k p(y = k | rot_k(x))``.

    The ``rotation_classifier`` detector's score (:func:`pipeline_lib.ssl.rotation.
    scores_from_rotation_logits`), negated.
    """
    model.eval()
    name = ROTATION_DETECTORS["rotation_classifier"]

    def score(images: torch.Tensor) -> torch.Tensor:
        return -scores_from_rotation_logits(rotation_view_logits(model, images))[name]

    # The model sees four rotated copies: GradCAM turns each activation map back.
    score.views = ROTATION_VIEWS  # type: ignore[attr-defined]
    return score


def integrated_gradients(
    score_fn: ScoreFunction,
    images: torch.Tensor,
    *,
    baseline: torch.Tensor | None = None,
    steps: int = 64,
    batch_size: int = 64,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Integrated gradients of ``score_fn`` from ``baseline`` to each image.

    ``IG_i(x) = (x_i - b_i) * integral_0^1 dF(b + a (x - b))/dx_i da``, the integral by the
    trapezoidal rule on ``steps`` equal intervals (``steps + 1`` gradient evaluations per
    image, in batches of ``batch_size`` path points).

    Parameters
    ----------
    score_fn : callable
        Differentiable ``(n, 3, h, w) -> (n,)``.
    images : Tensor of shape (n, 3, h, w)
        Float inputs in [0, 1], on the model's device.
    baseline : Tensor of shape (3, h, w) or (n, 3, h, w), optional
        Default: zeros (a black image).
    steps : int, default=64
    batch_size : int, default=64

    Returns
    -------
    attributions : Tensor of shape (n, 3, h, w), float64
    completeness_gap : Tensor of shape (n,), float64
        ``sum(attributions) - (F(x) - F(baseline))``: near 0 when ``steps`` is large
        enough (the sanity check of Sundararajan et al.).
    """
    if steps < 1 or batch_size < 1:
        raise ValueError(f"steps and batch_size must be >= 1, got {steps}, {batch_size}")
    if images.ndim != 4:
        raise ValueError(f"images must have shape (n, 3, h, w), got {tuple(images.shape)}")
    dtype = images.dtype  # the model's input dtype; the path itself is built in float64
    images = images.detach().double()
    if baseline is None:
        baseline = torch.zeros_like(images)
    baseline = baseline.detach().double().expand_as(images)
    alphas = torch.linspace(0.0, 1.0, steps + 1, dtype=torch.float64, device=images.device)
    weights = torch.full_like(alphas, 1.0 / steps)
    weights[0] = weights[-1] = 0.5 / steps  # trapezoidal rule
    attributions = torch.zeros_like(images)
    gaps = torch.zeros(len(images), dtype=torch.float64, device=images.device)
    for i in range(len(images)):
        x, b = images[i], baseline[i]
        total = torch.zeros_like(x)
        for start in range(0, len(alphas), batch_size):
            a = alphas[start : start + batch_size, None, None, None]
            path = (b + a * (x - b)).to(dtype).requires_grad_(True)  # (m, 3, h, w)
            with torch.enable_grad():
                (grad,) = torch.autograd.grad(score_fn(path).sum(), path)
            total += (weights[start : start + batch_size, None, None, None] * grad.double()).sum(0)
        attributions[i] = (x - b) * total
        with torch.no_grad():
            ends = score_fn(torch.stack([x, b]).to(dtype)).double()
        gaps[i] = attributions[i].sum() - (ends[0] - ends[1])
    return attributions, gaps


def explanation_layer(model: nn.Module) -> nn.Module:
    """The last convolutional stage of a representation's backbone (GradCAM's layer).

    ``backbone.stages[-1]`` of the small-image ResNet-18, ``layer4`` of the ImageNet
    ResNet-50.

    Raises
    ------
    ValueError
        If the backbone has no convolutional stage (e.g. raw pixels).
    """
    backbone = getattr(model, "backbone", model)
    inner = getattr(backbone, "backbone", None)  # ImageNetInput wraps torchvision's network
    if hasattr(backbone, "stages"):
        return backbone.stages[-1]
    if inner is not None and hasattr(inner, "layer4"):
        return inner.layer4
    if hasattr(backbone, "layer4"):
        return backbone.layer4
    raise ValueError(
        f"{type(backbone).__name__} has no convolutional stage to explain with GradCAM"
    )


def gradcam(score_fn: ScoreFunction, images: torch.Tensor, *, layer: nn.Module) -> torch.Tensor:
    """GradCAM heat maps of ``score_fn`` at ``layer``, up-sampled to the input size.

    ``cam = ReLU(sum_c alpha_c A_c)`` with ``A`` the layer's output and
    ``alpha_c = mean_{u,v} dF/dA_c(u, v)``; bilinear up-sampling; each map divided by its
    maximum (all-zero maps stay zero). When the score runs the network on rotated copies
    (``score_fn.views``, e.g. RotNet's four rotations), each pass's weighted activation
    map is turned back to the input's orientation and the maps are summed before the ReLU.

    Returns
    -------
    Tensor of shape (n, h, w), float32 in [0, 1]

    Raises
    ------
    ValueError
        If ``layer`` did not run, or ran a different number of times than
        ``score_fn.views`` lists.
    """
    captured: list[torch.Tensor] = []
    handle = layer.register_forward_hook(lambda _m, _i, output: captured.append(output))
    try:
        with torch.enable_grad():
            inputs = images.detach().requires_grad_(True)
            scores = score_fn(inputs)
            if not captured:
                raise ValueError("the GradCAM layer did not run in the score function")
            grads = torch.autograd.grad(scores.sum(), captured)
    finally:
        handle.remove()
    views = tuple(getattr(score_fn, "views", (0,) * len(captured)))
    if len(views) != len(captured):
        raise ValueError(
            f"the GradCAM layer ran {len(captured)} times but the score lists {len(views)} views"
        )
    total = None
    for k, activation, grad in zip(views, captured, grads, strict=True):
        # activation, grad: (n, c, u, v); the weights are the spatially averaged gradients.
        alpha = grad.mean(dim=(2, 3), keepdim=True)
        weighted = (alpha * activation).sum(dim=1, keepdim=True).detach()
        weighted = rotate90(weighted, -k)  # back to the input's orientation
        total = weighted if total is None else total + weighted
    cam = F.relu(total)
    cam = F.interpolate(cam.float(), size=images.shape[-2:], mode="bilinear", align_corners=False)
    peak = cam.amax(dim=(2, 3), keepdim=True)
    return torch.where(peak > 0, cam / peak.clamp_min(1e-12), torch.zeros_like(cam))[:, 0]


def _ig_heatmap(attributions: torch.Tensor) -> np.ndarray:
    """``(n, 3, h, w)`` attributions -> ``(n, h, w)`` in [0, 1]: channel-summed magnitude,
    divided by each image's 99th percentile (a few extreme pixels would hide the rest)."""
    magnitude = attributions.abs().sum(dim=1).float()  # (n, h, w)
    scale = torch.quantile(magnitude.flatten(1), 0.99, dim=1).clamp_min(1e-12)
    return (magnitude / scale[:, None, None]).clamp(0.0, 1.0).cpu().numpy()


def explain_images(
    models: Mapping[str, Representation],
    fit_features: Mapping[str, np.ndarray],
    images: np.ndarray,
    *,
    rotation_methods: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    baseline: np.ndarray | None = None,
    ig_steps: int = 64,
    gamma: float | None = None,
    gamma_scale: float = GAMMA_SCALE,
    device: torch.device | str = "cpu",
) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
    """Integrated gradients and GradCAM of every representation's KDE score (and RotNet's
    rotation classifier) for ``images``, in the column order of the paper's figure.

    Parameters
    ----------
    models : mapping of str to Representation
        Method id -> model.
    fit_features : mapping of str to ndarray of shape (n_fit, d)
        Method id -> the KDE's fit features (``f`` of training inliers).
    images : ndarray of shape (n, h, w, 3), uint8
    rotation_methods : sequence of str, default=()
        Methods (of ``models``) also explained through their rotation classifier.
    labels : mapping of str to str, optional
        Display name per method id (default: the id).
    baseline : ndarray of shape (h, w, 3), optional
        Integrated-gradients baseline in [0, 1]; default a black image. A network whose
        normalised features do not change along the ray from black (a freshly initialised
        ResNet without biases is positively homogeneous) makes the black baseline
        degenerate; the mean training image avoids that (``explain.baseline: mean``).
    ig_steps : int, default=64
    gamma, gamma_scale
        KDE kernel (as the ``kde`` detector).
    device : torch.device or str, default="cpu"

    Returns
    -------
    heatmaps : dict of str to ndarray of shape (n, h, w)
        ``"IG: <method> + KDE"`` ..., then ``"GradCAM: ..."`` columns, values in [0, 1].
    diagnostics : dict of str to dict of str to ndarray of shape (n,)
        ``"score"``, ``"baseline_score"`` and ``"completeness_gap"``, each IG column -> the
        anomaly score of every image, of the baseline, and the gap (see
        :func:`integrated_gradients`).
    """
    labels = labels or {}
    x = torch.from_numpy(np.ascontiguousarray(images)).to(device).permute(0, 3, 1, 2).float() / 255
    base = (
        torch.zeros_like(x[0])
        if baseline is None
        else torch.as_tensor(np.asarray(baseline), dtype=torch.float32, device=x.device).permute(
            2, 0, 1
        )
    )
    explained: list[tuple[str, nn.Module, ScoreFunction]] = []
    for method, model in models.items():
        model = model.to(device).eval()
        name = labels.get(method, method)
        explained.append(
            (
                f"{name} + KDE",
                model,
                kde_anomaly_function(
                    model, fit_features[method], gamma=gamma, gamma_scale=gamma_scale
                ),
            )
        )
        if method in rotation_methods:
            explained.append(
                (f"{name} + rotation classifier", model, rotation_anomaly_function(model))
            )
    integrated: dict[str, np.ndarray] = {}
    cams: dict[str, np.ndarray] = {}
    diagnostics: dict[str, dict[str, np.ndarray]] = {
        "score": {},
        "baseline_score": {},
        "completeness_gap": {},
    }
    for label, model, score in explained:
        attributions, gaps = integrated_gradients(score, x, baseline=base, steps=ig_steps)
        integrated[f"IG: {label}"] = _ig_heatmap(attributions)
        with torch.no_grad():
            diagnostics["score"][f"IG: {label}"] = score(x).double().cpu().numpy()
            at_base = score(base[None]).double().cpu().numpy()
            diagnostics["baseline_score"][f"IG: {label}"] = np.repeat(at_base, len(x))
        diagnostics["completeness_gap"][f"IG: {label}"] = gaps.cpu().numpy()
        cams[f"GradCAM: {label}"] = gradcam(score, x, layer=explanation_layer(model)).cpu().numpy()
    return {**integrated, **cams}, diagnostics


@dataclass(frozen=True)
class Explanation:
    """The heat maps of chosen test images of one split, with their sanity diagnostics."""

    #: Positions of the explained images in the data set's test split.
    test_index: np.ndarray
    #: The explained images, ``(n, h, w, 3)`` uint8.
    images: np.ndarray
    #: One label per image: its test position and class name.
    row_labels: list[str]
    #: Column title -> ``(n, h, w)`` heat maps in [0, 1] (see :func:`explain_images`).
    heatmaps: dict[str, np.ndarray]
    #: ``score``, ``baseline_score`` and ``completeness_gap`` per integrated-gradients column.
    diagnostics: dict[str, dict[str, np.ndarray]]

    def arrays(self) -> dict[str, np.ndarray]:
        """The ``.npz`` layout of the workflow's ``explain_detectors`` maps file."""
        return {
            "test_index": self.test_index,
            "columns": np.array(list(self.heatmaps)),
            "heatmaps": np.stack(list(self.heatmaps.values()), axis=1),
            "ig_columns": np.array(list(self.diagnostics["score"])),
            "scores": np.stack(list(self.diagnostics["score"].values())),
            "baseline_scores": np.stack(list(self.diagnostics["baseline_score"].values())),
            "completeness_gaps": np.stack(list(self.diagnostics["completeness_gap"].values())),
        }


def explained_test_index(
    split: OneClassSplit, test_index: Sequence[int] | None, *, n_images: int, seed: int
) -> np.ndarray:
    """The test images to explain: those asked for, else a seeded draw of the split's outliers.

    Outliers are what an explanation should show (what makes an image look anomalous); the
    draw depends only on the split and the seed, so a re-run explains the same images.
    """
    if test_index:
        return np.asarray(test_index, dtype=np.int64)
    outliers = split.test_index[split.test_is_outlier == 1]
    draw = np.random.default_rng(seed).choice(
        len(outliers), size=min(n_images, len(outliers)), replace=False
    )
    return np.sort(outliers[draw])


def log_completeness(diagnostics: Mapping[str, Mapping[str, np.ndarray]]) -> None:
    """Log integrated gradients' sanity check: attributions add up to the score change.

    A gap above 10 % of the change is a warning (too few steps, or a baseline along whose
    path the score does not change smoothly); the maps are written regardless.
    """
    for column, gaps in diagnostics["completeness_gap"].items():
        change = diagnostics["score"][column] - diagnostics["baseline_score"][column]
        relative = float(np.max(np.abs(gaps) / np.maximum(np.abs(change), 1e-12)))
        log.log(
            logging.WARNING if relative > 0.1 else logging.INFO,
            "%s: sum(IG) - (F(x) - F(baseline)) = %s, %.1f%% of the score change%s",
            column,
            np.round(gaps, 5).tolist(),
            100 * relative,
            " (more ig_steps, or a baseline along whose path the score changes smoothly)"
            if relative > 0.1
            else "",
        )


def explain_split(
    dataset: ImageDataset,
    split: OneClassSplit,
    features: Mapping[str, Mapping[str, np.ndarray]],
    model_files: Mapping[str, str | os.PathLike],
    *,
    methods: Sequence[str],
    rotation_methods: Sequence[str] = (),
    labels: Mapping[str, str] | None = None,
    test_index: Sequence[int] | None = None,
    n_images: int = 8,
    seed: int = 0,
    max_fit: int,
    width: int,
    imagenet_size: int | None = None,
    baseline: str | None = None,
    ig_steps: int = 64,
    detector_params: Mapping[str, Any] | None = None,
    device: torch.device | str = "cpu",
) -> Explanation:
    """Explain chosen test images of one split by every method's KDE score (paper Fig. 5).

    The workflow's ``explain_detectors`` job: load (trained) or build (frozen) each model,
    fit the KDE on the same seeded fit rows as the ``kde`` detector, pick the images and run
    :func:`explain_images`, logging integrated gradients' completeness check.

    Parameters
    ----------
    dataset : ImageDataset
    split : OneClassSplit
    features : mapping of str to mapping
        Method id -> its feature file (``train_index``, ``f_train``, ...).
    model_files : mapping of str to path
        Method id -> ``model.pt`` of the trained methods; the others are built frozen
        (ImageNet weights from ``$DROC_IMAGENET_WEIGHTS``).
    methods : sequence of str
        The columns, in order.
    rotation_methods : sequence of str, default=()
        Methods also explained through their rotation classifier.
    labels : mapping of str to str, optional
        Display name per method id.
    test_index : sequence of int, optional
        Test images to explain; default ``n_images`` outliers drawn with ``seed``.
    n_images : int, default=8
    seed : int, default=0
        Seed of the frozen weights, the fit-row subset and the image draw.
    max_fit : int
        At most this many fit rows (``detect.max_fit``), as the detector job.
    width : int
    imagenet_size : int or None, default=None
    baseline : {"mean", None}, default=None
        ``"mean"``: the mean training image as the integrated-gradients baseline; else black.
    ig_steps : int, default=64
    detector_params : mapping, optional
        The ``kde`` detector's parameters (``gamma``, ``gamma_scale``); unset ones take
        the registry's defaults, as the detector itself does.
    device : torch.device or str, default="cpu"

    Returns
    -------
    Explanation
    """
    fit_index = limit_fit_index(split.train_index, max_fit=max_fit, seed=seed)
    models: dict[str, Representation] = {}
    fit_features: dict[str, np.ndarray] = {}
    for method in methods:
        files = features[method]
        fit_features[method] = rows_for(fit_index, files["train_index"], files["f_train"])
        if method in model_files:
            models[method] = load_trained_representation(model_files[method], map_location=device)
        else:
            models[method] = build_representation(
                method,
                seed=seed,
                width=width,
                imagenet_weights=imagenet_weights_from_env(),
                imagenet_size=imagenet_size,
            )
    chosen = explained_test_index(split, test_index, n_images=n_images, seed=seed)
    kde = detector_settings("kde", detector_params or {})  # the registry's defaults filled
    mean_image = None
    if baseline == "mean":
        mean_image = dataset.train_images[split.train_index].mean(axis=0) / 255.0
    images = dataset.test_images[chosen]
    heatmaps, diagnostics = explain_images(
        models,
        fit_features,
        images,
        rotation_methods=rotation_methods,
        labels=labels,
        baseline=mean_image,
        ig_steps=ig_steps,
        gamma=kde["gamma"],
        gamma_scale=kde["gamma_scale"],
        device=device,
    )
    log_completeness(diagnostics)
    row_labels = [f"test {i} ({dataset.class_names[dataset.test_labels[i]]})" for i in chosen]
    return Explanation(chosen, images, row_labels, heatmaps, diagnostics)
