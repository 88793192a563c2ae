"""The report's sections, one module each: its wording, its tables (``tables(exp)``: name -> frame, also the
CSV's stem) and its figure. analysis/report/assemble.py puts them on the page in this order: answer, runs,
trend (with the findings of time_split, thesis_vs_measured, network, cost_model, stability, bleu and faults),
the settings compared on the same cluster (settings/: communication, then mixed_machines), thesis_vs_measured,
against_reference."""
