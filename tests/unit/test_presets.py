"""`run --preset smoke` changes what it says and nothing else (the file, the defaults, the report), and the
phases each point's log line says (testbed/run/phases.py). No network: the points are recorded by a
stand-in for the runner that marks phases as the stages do."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from testbed.cli import common, presets, report as report_command, run as run_command
from testbed.run import phases, results
from sweep_stand_in import stand_in_sweep
from testbed.run.training.training import Training
from testbed.spec import Checks, Monitor, SpecError, load_spec

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "topologies" / "smoke.yaml"


def _flat(value, prefix="") -> dict:
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{prefix}{key}.").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{prefix}{i}.").items()}
    return {prefix.rstrip("."): value}


def test_the_smoke_preset_changes_the_check_duration_and_the_monitor_interval_only():
    plain = _flat(load_spec(SMOKE).model_dump())
    smoke = _flat(load_spec(SMOKE, presets.PRESETS["smoke"].overrides).model_dump())
    changed = {k: (plain[k], smoke[k]) for k in plain if plain[k] != smoke[k]}
    assert changed == {"checks.duration": (3.0, 1.0), "monitor.interval": (0.5, 2.0)}
    assert set(plain) == set(smoke)
    assert Checks().duration == 3.0 and Monitor().interval == 0.5, "the defaults stay"


@pytest.mark.parametrize("path", sorted((REPO / "topologies").glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_file_that_loads_loads_under_the_smoke_preset(path):
    try:
        load_spec(path)
    except SpecError:
        pytest.skip(f"{path.name} is a template to fill in (it does not load as it is)")
    load_spec(path, presets.PRESETS["smoke"].overrides)


def _args(*argv):
    parser = __import__("argparse").ArgumentParser()
    run_command.add_arguments(parser)
    return parser.parse_args([str(SMOKE), *argv])


@pytest.mark.parametrize("argv, overrides, report", [
    ((), [], True),
    (("--no-report",), [], False),
    (("--preset", "smoke", "--set", "checks.duration=2s"), ["checks.duration=1s", "monitor.interval=2s",
                                                            "checks.duration=2s"], False),
    (("--preset", "smoke", "--report"), ["checks.duration=1s", "monitor.interval=2s"], True),
    (("--preset", "smoke", "--report", "--no-report"), ["checks.duration=1s", "monitor.interval=2s"], False),
])
def test_the_preset_comes_before_the_command_lines_set_and_skips_the_report_unless_asked(argv, overrides, report):
    args = _args(*argv)
    assert run_command.apply_preset(args) is report
    assert args.overrides == overrides
    if "checks.duration=2s" in argv:
        assert load_spec(SMOKE, args.overrides).checks.duration == 2.0, "the command line's own --set wins"


def test_an_unknown_preset_is_refused_naming_the_known_ones(capsys):
    with pytest.raises(SystemExit):
        _args("--preset", "fast")
    said = capsys.readouterr().err
    assert "argument --preset: invalid choice: 'fast'" in said and "smoke" in said


@pytest.fixture
def stand_in(monkeypatch):
    """`run` whose points are recorded by a stand-in that marks the stages' phases and keeps the spec it got."""
    state = SimpleNamespace(specs=[], drawn=[])

    def run_point(resolved, exp_dir, progress=lambda msg: None):
        state.specs.append(resolved.spec)
        phases.add("bring-up", 1.5)
        with phases.timed("checks"):
            pass
        phases.add("engine start", 2.0)
        phases.add("training", 3.0)
        phases.add("teardown", 0.5)
        row = dict(experiment="smoke", run_id=resolved.run_id, repeat=0, hosts=2, status="ok", reason="",
                   wall_time_s=8.0, training_time_s=3.0)
        results.replace_run_rows(exp_dir, "runs", resolved.run_id, [row])
        return row

    stand_in_sweep(monkeypatch, run_point)
    monkeypatch.setattr(report_command, "draw", lambda folder: state.drawn.append(folder) or folder / "report.html")
    return state


def test_a_smoke_run_gets_the_presets_values_no_report_and_says_its_phases(tmp_path, stand_in, capsys):
    code = common.main_of(run_command.COMMAND, [str(SMOKE), "--preset", "smoke", "--out", str(tmp_path / "s")])
    assert code == 0 and stand_in.drawn == []
    [spec] = stand_in.specs
    assert (spec.checks.duration, spec.monitor.interval, spec.checks.attempts) == (1.0, 2.0, 3)
    said = " ".join(capsys.readouterr().err.split())
    assert "preset smoke: --set checks.duration=1s --set monitor.interval=2s; no report (--report draws it)" in said
    assert ("phases: bring-up 1.5 s, checks 0.0 s, engine start 2.0 s, training 3.0 s, teardown 0.5 s, rest "
            in said)
    plain = tmp_path / "plain"
    assert common.main_of(run_command.COMMAND, [str(SMOKE), "--out", str(plain)]) == 0
    assert stand_in.drawn == [plain], "without the preset the report is drawn"
    assert "phases: report " in capsys.readouterr().err
    assert stand_in.specs[1].checks.duration == 3.0 and stand_in.specs[1].monitor.interval == 0.5
    assert results.read_table(plain, "runs")["run_id"][0] != results.read_table(tmp_path / "s", "runs")["run_id"][0]


def test_phases_are_recorded_only_inside_a_point_and_said_in_order():
    phases.add("training", 9.0)          # outside a point: nowhere
    with phases.recording() as timing:
        phases.add("teardown", 1.0)
        phases.add("bring-up", 2.0)
        phases.add("bring-up", 0.25)
        with pytest.raises(ZeroDivisionError):
            with phases.timed("checks"):
                1 / 0
    assert set(timing.seconds) == {"teardown", "bring-up", "checks"}
    assert timing.text(total=5.0).startswith("phases: bring-up 2.2 s, checks 0.0 s, teardown 1.0 s, rest 1.")
    assert phases.Phases().text() == "phases: "


def test_the_engine_start_ends_at_the_lead_tasks_first_start_event():
    with phases.recording() as timing:
        Training._phases([{"event": "start", "t": 104.0}, {"event": "start", "t": 150.0}], 100.0, 110.0)
    assert timing.seconds == {"engine start": 4.0, "training": 6.0}
    with phases.recording() as timing:
        Training._phases([{"event": "script_start", "t": 101.0}], 100.0, 103.0)
    assert timing.seconds == {"engine start": 1.0, "training": 2.0}
    with phases.recording() as timing:
        Training._phases([{"event": "error", "t": 101.0}], 100.0, 107.0)
    assert timing.seconds == {"engine start": 7.0}
