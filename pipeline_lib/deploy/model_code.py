"""The MLflow model's code ("models from code"): MLflow runs this file to build the model.

:func:`pipeline_lib.deploy.mlflow_model.log_and_register` logs this file as
``python_model``, so the logged model holds source and the package folder, and no
``python_model.pkl``: loading a registered model imports this project's code (carried in
the model's ``code/``) instead of unpickling an object.
"""

import mlflow

from pipeline_lib.deploy.serving import DrocPyfunc

mlflow.models.set_model(DrocPyfunc())
