"""The JPEG dose study behind ``benchmarks/jpeg_dose.py``, one concern a module: the dose
points (doses), the dose on lossless images (lossless), one measurement (measure), the fit
(fit), summary.json (summary, conclusion), results.csv (rows) and README.md (readme)."""
