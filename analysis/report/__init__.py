"""The report of a results folder: report.html, figures/*.png and tables/*.csv (assemble.py puts them together).

``from analysis.report import build_report; build_report(folder)``, as ``run_experiment.py report`` does."""
from analysis.report.assemble import build_report, derived_tables  # noqa: F401
