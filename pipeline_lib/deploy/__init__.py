"""Deployment: a trained (representation, detector) cell as a product.

Small modules, one job each, from the bottom up (each imports only modules above it in
this list; ``pyproject.toml`` holds the order as an import-linter contract):

* :mod:`~pipeline_lib.deploy.package_format`: the package format's version,
  :class:`~pipeline_lib.deploy.package_format.PackageError` and what a reader is told to do;
  :mod:`~pipeline_lib.deploy.images`: read image files, folders, bytes and arrays of any
  size into the training resolution, with a per-item error instead of an exception;
  :mod:`~pipeline_lib.deploy.export`: the representation and the fitted detector as one
  TorchScript / ONNX graph (detectors as matrix products) and the parity check;
  :mod:`~pipeline_lib.deploy.threshold`: the threshold on held-out (cross-fitted) inliers;
* :mod:`~pipeline_lib.deploy.bounded_files`: a package's files opened once each, as regular
  files of bounded sizes (no symlink, FIFO or device is read), its zip directories and JSON
  files bounded;
* :mod:`~pipeline_lib.deploy.detector_state`: the fitted detector as ``detector.npz`` +
  ``detector.json``, read back from an allow-list of classes, never unpickled;
  :mod:`~pipeline_lib.deploy.representation_file`: ``representation.pt``, its spec bounded
  and built on the meta device against its weights before anything real, its weights read
  without unpickling;
* :mod:`~pipeline_lib.deploy.saved_package`: a package folder's files (``package.json``,
  the representation, the detector) and the base class that saves and reads them;
* :mod:`~pipeline_lib.deploy.image_package` (one score per image) and
  :mod:`~pipeline_lib.deploy.patch_package` (MVTec: a score and an anomaly map per image,
  exported whole): the two kinds of package, which score new images;
* :mod:`~pipeline_lib.deploy.package_kinds`: open a package folder of either kind;
* :mod:`~pipeline_lib.deploy.cell_protocol`: the interface of what differs between cells
  when they are packaged; :mod:`~pipeline_lib.deploy.image_protocol` and
  :mod:`~pipeline_lib.deploy.patch_protocol` implement it;
* :mod:`~pipeline_lib.deploy.packaging`: :func:`~pipeline_lib.deploy.packaging.package_cell`,
  the one path that writes a package; :mod:`~pipeline_lib.deploy.serving`: the MLflow pyfunc
  class and the requests it answers, row by row;
* :mod:`~pipeline_lib.deploy.mlflow_model`: log the package as an MLflow model from code
  (:mod:`~pipeline_lib.deploy.model_code`: no pickle in the model), register it, load it
  from a URI;
* :mod:`~pipeline_lib.deploy.workflow_step`: the workflow's ``deploy_model`` and
  ``register_model`` steps; :mod:`~pipeline_lib.deploy.cli`: ``droc score --model URI
  PATH...`` (MVTec: heat-map PNGs); :mod:`~pipeline_lib.deploy.pyfunc`: the path the model
  code of registered models imports the pyfunc class from.

Nothing here is imported by the benchmark itself; mlflow is imported only inside
:mod:`~pipeline_lib.deploy.serving`, :mod:`~pipeline_lib.deploy.mlflow_model` and where a
``models:/`` / ``runs:/`` URI is resolved.
"""
