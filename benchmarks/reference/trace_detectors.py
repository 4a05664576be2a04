"""Trace the released detectors: the scores and AUCs of ``BaseTrain.eval_embed`` on fixed inputs.

The released evaluation (``util/train.py``, ``extract`` and ``eval_embed``) runs unchanged on
a stand-in network whose outputs are the fixed inputs of :func:`inputs.detector_inputs`:
each of the four test views ``x, rot90 x, rot180 x, rot270 x`` (``--aug_list_for_test``) is
a tensor ``[logits of that view | features]``, and the stand-in returns its columns as
``logits`` and as ``pools`` and ``embeds``. So ``extract`` forms its rotation score
``dscore`` from the logits and keeps the first view's features, and ``eval_embed`` fits and
scores every detector, exactly as after training. The scores are taken where the released
code ranks them: ``util.metric.roc`` is wrapped to record its ``pr`` argument for each metric
(in ``eval_metrics`` order) before it computes the AUC, unchanged.

Metrics: ``pool.auc`` (1 - the largest cosine similarity to a fit feature), ``pool.kocsvm``
(RBF OC-SVM), ``pool.kde``, ``pool.gde``, ``pool.locsvm`` (linear OC-SVM), ``logit.auc``
(``1 - p(0 | x)``) and ``dscore.auc`` (``1 - prod_k p(k | rot_k x)``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from inputs import DETECTOR_SEED, detector_inputs, digest
from trace_io import released_meta, write_trace

METRICS = (
    "pool.auc",
    "pool.kocsvm",
    "pool.kde",
    "pool.gde",
    "pool.locsvm",
    "logit.auc",
    "dscore.auc",
)
VIEWS = ("x", "+rotate90", "+rotate180", "+rotate270")  # the rotation scripts' test views
BATCH = 64


def _views_dataset(tf: Any, logits: np.ndarray, features: np.ndarray, labels: np.ndarray) -> Any:
    """Batches ``(view_0, ..., view_3, label, id)`` as the released test loader yields them."""
    views = tuple(np.concatenate([logits[k], features], axis=1) for k in range(4))
    ids = np.arange(len(labels))[:, None]
    data = (*views, labels.astype(np.float32)[:, None], ids)
    return tf.data.Dataset.from_tensor_slices(data).batch(BATCH)


def trace(released: Any, out: Path) -> list[Path]:
    tf = released.tf
    train = released.module("util.train")
    metric = released.module("util.metric")
    inputs = detector_inputs()
    fit, test = inputs["fit_features"], inputs["test_features"]
    labels, logits = inputs["test_labels"], inputs["rotation_logits"]
    # The fit set's views carry logits too (the released loader of the training data has the
    # same test views); only its first view's features are used.
    fit_logits = np.zeros((4, len(fit), 4), dtype=np.float32)

    trainer = object.__new__(train.BaseTrain)
    trainer.strategy = train.setup_tf()
    trainer.aug_list_for_test = list(VIEWS)
    trainer.epoch, trainer.num_epoch = 0, 1
    trainer.eval_metrics = dict.fromkeys(METRICS)
    n_logits = 4

    def stand_in(x: Any, training: bool = False) -> dict[str, Any]:
        del training
        return {"logits": x[:, :n_logits], "embeds": x[:, n_logits:], "pools": x[:, n_logits:]}

    trainer.model = stand_in

    def loader(views_logits: np.ndarray, features: np.ndarray, y: np.ndarray) -> list[Any]:
        dataset = _views_dataset(tf, views_logits, features, y)
        distributed = trainer.strategy.experimental_distribute_dataset(dataset)
        return [iter(distributed), -(-len(y) // BATCH)]

    ranked: list[np.ndarray] = []
    roc = metric.roc

    def recording_roc(pr: Any, gt: Any) -> float:
        ranked.append(np.asarray(metric.check_type(pr), dtype=np.float64).copy())
        return roc(pr, gt)

    metric.roc = recording_roc
    try:
        trainer.eval_embed(
            trainset=loader(fit_logits, fit, np.zeros(len(fit), np.int64)),
            testset=loader(logits, test, labels),
        )
    finally:
        metric.roc = roc
    # The gamma the released code derives (util/train.py, kocsvm and kde branches).
    normalized = tf.nn.l2_normalize(fit, axis=1)
    gamma = float(10.0 / (tf.math.reduce_variance(normalized) * normalized.shape[1]))
    arrays = {f"score/{name}": values for name, values in zip(METRICS, ranked, strict=True)}
    arrays["auc"] = np.array([trainer.eval_metrics[name] for name in METRICS], np.float64)
    arrays["gamma"] = np.array(gamma, np.float64)
    meta = released_meta(
        released,
        family="detectors",
        what=(
            "released anomaly scores (higher = more anomalous, as util.metric.roc ranks them) "
            "and AUCs (percent) of BaseTrain.eval_embed on inputs.detector_inputs"
        ),
        metrics=list(METRICS),
        input_seed=DETECTOR_SEED,
        input_digest=digest(*inputs.values()),
        test_views=list(VIEWS),
    )
    return [write_trace(out, "detectors", arrays, meta)]
