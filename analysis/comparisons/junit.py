"""A run as JUnit XML, the test report CI systems read (`run --junit FILE`): one testcase per run point and one
per judged expectation, in the Ant/Jenkins JUnit format (its schema: tests/fixtures/junit.xsd).

- suite "<experiment>.points": a point that ran ok passes, a failed one is a failure carrying its reason, one
  not recorded (an interrupted sweep) is skipped; time = the point's wall_time_s.
- suite "<experiment>.expectations": one testcase per expectations.csv row; a failure carries the expectation,
  the measured value and the bound, "not judged" is skipped with its reason (never a pass).
"""
from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET

from analysis.comparisons.expectations import FAIL, NOT_JUDGED, Outcome, shown

# What XML 1.0 cannot carry (control characters of a task's log, say) is dropped.
_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def clean(text: object) -> str:
    return _NOT_XML.sub("", "" if text is None else str(text))


def seconds(value) -> str:
    """xs:decimal seconds (no exponent, never NaN)."""
    try:
        value = float(value)
    except (TypeError, ValueError):
        return "0"
    return f"{value:.3f}" if math.isfinite(value) and value > 0 else "0"


def junit_xml(experiment: str, points: list[dict], outcomes: list[Outcome], timestamp: str, hostname: str,
              properties: dict | None = None) -> str:
    """The document. `points`: per run point of the file, in order, {run_id, status (ok, failed, or None when
    not recorded), reason, wall_time_s}; `timestamp`: when the run started, YYYY-MM-DDTHH:MM:SS, no zone."""
    root = ET.Element("testsuites")
    cases = [_point_case(experiment, p) for p in points]
    _suite(root, 0, f"{experiment}.points", experiment, cases, timestamp, hostname, properties)
    cases = [_expectation_case(experiment, o) for o in outcomes]
    _suite(root, 1, f"{experiment}.expectations", experiment, cases, timestamp, hostname, properties)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _suite(root, index, name, experiment, cases, timestamp, hostname, properties) -> None:
    attrs = dict(name=clean(name) or "points", package=clean(experiment) or "experiment", id=str(index),
                 timestamp=timestamp, hostname=clean(hostname) or "localhost", tests=str(len(cases)),
                 failures=str(sum(c.find("failure") is not None for c in cases)), errors="0",
                 skipped=str(sum(c.find("skipped") is not None for c in cases)),
                 time=seconds(sum(float(c.get("time")) for c in cases)))
    suite = ET.SubElement(root, "testsuite", attrs)
    props = ET.SubElement(suite, "properties")
    for key, value in (properties or {}).items():
        ET.SubElement(props, "property", name=clean(key), value=clean(value))
    suite.extend(cases)
    ET.SubElement(suite, "system-out")
    ET.SubElement(suite, "system-err")


def _point_case(experiment: str, point: dict) -> ET.Element:
    case = ET.Element("testcase", name=clean(point["run_id"]), classname=clean(f"{experiment}.points"),
                      time=seconds(point.get("wall_time_s")))
    status = point.get("status")
    if status is None:
        ET.SubElement(case, "skipped", message="not run: the sweep stopped before this point")
    elif status != "ok":
        reason = clean(point.get("reason")) or "(no reason recorded)"
        ET.SubElement(case, "failure", type="point failed", message=reason).text = reason
    return case


def _expectation_case(experiment: str, o: Outcome) -> ET.Element:
    where = f" [{o.point}]" if o.point else ""
    case = ET.Element("testcase", name=clean(o.expectation + where), classname=clean(f"{experiment}.expectations"),
                      time="0")
    said = f"{o.expectation}{where}: measured {shown(o.measured)}, bound {o.bound}"
    if o.outcome == FAIL:
        message = clean(said + (f" ({o.detail})" if o.detail else ""))
        ET.SubElement(case, "failure", type="expectation", message=message).text = message
    elif o.outcome == NOT_JUDGED:
        ET.SubElement(case, "skipped", message=clean(f"not judged: {o.detail or 'no figure to judge'}"))
    return case
