"""The rows of this package, as droc-bench's entry points find them (torch-free: the
workflow reads them when it parses its Snakefile).

``FLIP`` is one row of the method table: flip prediction, trained by the task of
:mod:`droc_plugin_example.flip` with an MLP head; ``LOF`` one detector, the estimator of
:mod:`droc_plugin_example.lof`. Both name their code by a ``"module:attribute"`` path that
only a job imports.
"""

from pipeline_lib.registry.methods import MethodSpec
from pipeline_lib.registry.plugins import DetectorSpec

__all__ = ["FLIP", "LOF"]

FLIP = MethodSpec(
    "flip",
    trained=True,
    # An MLP g on f: the flip logits are two of its outputs (droc_plugin_example.flip).
    head="projection",
    task="droc_plugin_example.flip:TASK",
    batch_size=32,
    # A view and its mirror image pass through the network for each instance.
    views_per_instance=2,
    # Its parts compose over stacked models (train.fuse > 1); graph capture is not tested.
    fusable=True,
    capturable=False,
)

LOF = DetectorSpec(
    "lof",
    estimator="droc_plugin_example.lof:LocalOutlierFactorScore",
    params={"n_neighbors": 20, "normalize": True},
)
