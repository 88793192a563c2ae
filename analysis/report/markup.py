"""What every part of the report writes its HTML with: the page's style and a table (``DataFrame.to_html`` of
the frame written to ``tables/<name>.csv``)."""
from __future__ import annotations

import numpy as np
import pandas as pd


def _fmt(x) -> str:
    return f"{x:.3g}" if isinstance(x, (float, np.floating)) else str(x)


def table_html(name: str, df: pd.DataFrame) -> str:
    if df.empty:
        return f"<p><em>(table {name} is empty)</em></p>"
    return df.to_html(index=False, float_format=_fmt, na_rep="", classes="tbl", border=0)


CSS = """body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em}
.tbl{border-collapse:collapse;font-size:13px}.tbl td,.tbl th{padding:2px 8px;
border-bottom:1px solid #ddd;text-align:right}figure{margin:1.5em 0}
figcaption{font-style:italic}img{max-width:100%}.skip{color:#a33}"""
