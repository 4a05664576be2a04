"""Deployment: a trained (representation, detector) cell as a product.

Small modules, one job each:

* :mod:`~pipeline_lib.deploy.images`: read image files, folders, bytes and arrays of any size
  into the training resolution, with a per-item error instead of an exception;
* :mod:`~pipeline_lib.deploy.export`: the representation and the fitted detector as one
  TorchScript / ONNX graph (detectors as matrix products) and the parity check;
* :mod:`~pipeline_lib.deploy.package`: the packaged model (weights, preprocessing, detector,
  calibrated threshold) and :func:`~pipeline_lib.deploy.package.package_cell`, the one
  packaging path of every cell;
* :mod:`~pipeline_lib.deploy.protocols`: what differs between cells (the image protocol and
  the interface); :mod:`~pipeline_lib.deploy.patch_protocol`: the MVTec patch protocol, with
  an anomaly map per image, exported whole;
* :mod:`~pipeline_lib.deploy.threshold`: the threshold on held-out (cross-fitted) inliers;
* :mod:`~pipeline_lib.deploy.detector_state`: the fitted detector as ``detector.npz`` +
  ``detector.json``, read back from an allow-list of classes, never unpickled;
* :mod:`~pipeline_lib.deploy.representation_file`: ``representation.pt``, its spec bounded
  and built on the meta device against its weights before anything real, its weights read
  without unpickling;
* :mod:`~pipeline_lib.deploy.package_files`: a package's files opened once each, as regular
  files of bounded sizes (no symlink, FIFO or device is read), and its zip directories bounded;
* :mod:`~pipeline_lib.deploy.errors`: :class:`~pipeline_lib.deploy.errors.PackageError` and
  the package format;
* :mod:`~pipeline_lib.deploy.packages`: open a package folder of either kind;
* :mod:`~pipeline_lib.deploy.pyfunc`: the MLflow ``pyfunc`` wrapper, logging and registry
  (logged from code, :mod:`~pipeline_lib.deploy.pyfunc_model`: no pickle in the model);
* :mod:`~pipeline_lib.deploy.cli`: ``droc score --model URI PATH...`` (MVTec: heat-map PNGs).

Nothing here is imported by the benchmark itself; mlflow is imported only inside
:mod:`~pipeline_lib.deploy.pyfunc` and where a ``models:/`` / ``runs:/`` URI is resolved.
"""
