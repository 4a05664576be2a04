"""Self-supervised proxy objectives, one module each: a pure loss and a batch -> loss step.

Every ``*_step(model, batch, *, generator, ...)`` takes a :class:`~pipeline_lib.models.proxy.
ProxyModel` and a uint8 batch ``(n, 3, h, w)`` already on the training device, builds the
views with :mod:`pipeline_lib.ssl.augment` (random parameters from the explicit CPU
``generator``), and returns the scalar loss in float32. The training run owns autocast, the
optimiser and the batches: its recipe is :class:`~pipeline_lib.ssl.settings.TrainSettings`,
:mod:`pipeline_lib.ssl.run` prepares it, :mod:`pipeline_lib.ssl.loop` steps, checks and
checkpoints its epochs, and :mod:`pipeline_lib.ssl.train` (one run) and
:mod:`pipeline_lib.ssl.fused` (K runs together) loop over them.
"""
