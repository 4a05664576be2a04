"""Self-supervised proxy tasks: one module per task, each exporting one :class:`ProxyTask`.

A task module holds what its task computes (inputs, forward, loss) and a ``TASK`` object
that builds a run's step from its :class:`~pipeline_lib.ssl.settings.TrainSettings`. The
method table names it (:attr:`pipeline_lib.registry.MethodSpec.task`,
``"pipeline_lib.ssl.tasks.rotation:TASK"``), and :func:`task_of` imports it inside the job
that trains: RotNet and rotation prediction share :mod:`~pipeline_lib.ssl.tasks.rotation`
(their head kinds differ), contrastive learning with and without distribution augmentation
share :mod:`~pipeline_lib.ssl.tasks.contrastive`, and :mod:`~pipeline_lib.ssl.tasks.denoising`
is the denoising autoencoder. The loops (:mod:`pipeline_lib.ssl.run`, ``loop``, ``fused``)
know no task by name.
"""

from __future__ import annotations

from pipeline_lib.ssl.tasks.base import ProxyTask, StepParts, load_task, task_of

__all__ = ["ProxyTask", "StepParts", "load_task", "task_of"]
