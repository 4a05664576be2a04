"""Where the model code of registered models imports :class:`DrocPyfunc` from.

A registered model carries a copy of the model code file it was logged with
(``pyfunc_model.py`` in models logged by earlier versions, :mod:`.model_code` now), and
that file runs ``from pipeline_lib.deploy.pyfunc import DrocPyfunc``. Where
``pipeline_lib`` is already imported (``droc score --model models:/NAME/VERSION``), that
line resolves against the installed code, not the model's copy, so this path stays. New
code imports :mod:`pipeline_lib.deploy.serving`.
"""

from pipeline_lib.deploy.serving import DrocPyfunc

__all__ = ["DrocPyfunc"]
