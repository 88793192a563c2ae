#!/usr/bin/env python3
"""Command line of the testbed: run, up, exec, validate, report, predict, cleanup, schema, image, cluster."""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from pathlib import Path

from rich.console import Console

console = Console(stderr=True)


def _set_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                   help="override a value of the file (also a sweep axis), e.g. topology.link.bw=100mbit")


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="run_experiment.py", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run every point of an experiment file (root)")
    run.add_argument("file")
    _set_args(run)
    run.add_argument("--out", help="results folder (default results/<name>)")
    run.add_argument("--dry-run", action="store_true", help="list the run points and exit (no root)")
    run.add_argument("--retry-failed", action="store_true", help="rerun points recorded as failed")
    run.add_argument("--quiet", action="store_true", help="no progress bar or per-run detail (CI logs)")
    run.add_argument("--no-report", action="store_true", help="skip the report at the end")
    up = sub.add_parser("up", help="bring a topology up (checks included) and keep it until Ctrl-C (root)")
    up.add_argument("file")
    _set_args(up)
    ex = sub.add_parser("exec", help="run a command in a host of the live network: exec HOST -- CMD... (root)")
    ex.add_argument("host")
    ex.add_argument("argv", nargs=argparse.REMAINDER, metavar="-- CMD")
    val = sub.add_parser("validate", help="check a file without running it (no root)")
    val.add_argument("files", nargs="+")
    _set_args(val)
    rep = sub.add_parser("report", help="tables, figures and report.html from stored results (no root)")
    rep.add_argument("dir")
    sub.add_parser("predict", add_help=False, help="what-if from the cost model fitted on results: time per "
                   "step, speedup and the better strategy for any nodes, bandwidths, CPU (no root; "
                   "predict --help)")
    cl = sub.add_parser("cleanup", help="remove what a killed run left behind (root)")
    cl.add_argument("--force", action="store_true", help="also remove the resources of runs that look alive")
    sub.add_parser("schema", help="print the JSON Schema of experiment files")
    img = sub.add_parser("image", help="the worker image that docker nodes run (build: root)")
    img.add_argument("action", choices=["build", "name"], help="build (or reuse) it; or print its name")
    img.add_argument("--base", metavar="IMAGE", help="build FROM this local image instead of a debootstrap-made Debian")
    img.add_argument("--force", action="store_true", help="rebuild even when the image exists")
    clu = sub.add_parser("cluster", help="local servers for the cluster edition: cluster up N | status | down (root)")
    clu.add_argument("action", choices=["up", "status", "down"])
    clu.add_argument("n", nargs="?", type=int, default=2, help="how many servers `up` starts (default 2)")
    return parser.parse_args(argv)


def _need_root(what: str) -> None:
    if os.geteuid() != 0:
        console.print(f"[red]error[/red]: {what} needs root (Mininet, Open vSwitch and tc): run it with sudo")
        sys.exit(2)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def _load(args):
    """(experiment, run points) of the file and --set overrides; None after printing what is wrong."""
    from testbed.spec import SpecError, expand_points, load_spec
    try:
        exp = load_spec(args.file, args.overrides)
        return exp, expand_points(exp)
    except SpecError as err:
        console.print(str(err), highlight=False, markup=False)
        return None


def cmd_run(args) -> int:
    from testbed.spec import SpecError
    loaded = _load(args)
    if loaded is None:
        return 2
    exp, points = loaded
    out = Path(args.out or Path("results") / exp.name)
    if args.dry_run:
        for p in points:
            print(p.run_id, json.dumps(p.params, default=str))
        print(f"{len(points)} run point(s) -> {out}")
        return 0
    _need_root("run")
    from testbed.run.sweep import run_sweep
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)   # even when started with SIGINT ignored
    out.mkdir(parents=True, exist_ok=True)
    try:
        summary = run_sweep(exp, out, retry_failed=args.retry_failed, quiet=args.quiet, console=console)
    except SpecError as err:
        console.print(str(err), highlight=False, markup=False)
        return 2
    if not args.no_report and (summary.done or summary.skipped):
        from analysis.report import build_report
        report = build_report(out)
        console.print(f"report: {report}")
    console.print(f"{len(summary.done)} ok, {len(summary.failed)} failed, {len(summary.skipped)} already done; "
                  f"tables in {out}/ (runs.csv, checks.csv, steps.csv, usage.csv)")
    if summary.interrupted:
        return 130
    return min(len(summary.failed), 100)


def cmd_up(args) -> int:
    from testbed.spec import SpecError
    loaded = _load(args)
    if loaded is None:
        return 2
    exp, points = loaded
    _need_root("up")
    from testbed.run.live import up
    from testbed.run.runner import preflight
    if len(points) > 1:
        console.print(f"the file sweeps {len(points)} points; bringing up the first ({points[0].run_id})")
    signal.signal(signal.SIGTERM, _raise_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)

    def ready(nodes):
        for name, node in nodes.items():
            console.print(f"  {name:<8} {node.address:<15} {type(node).kind}", highlight=False)
        console.print(f"up: {len(nodes)} hosts. From another shell: run_experiment.py exec "
                      f"{next(iter(nodes))} -- ping -c1 {list(nodes.values())[-1].address}; Ctrl-C tears it down",
                      highlight=False)
    try:
        preflight(exp, points[:1], progress=console.print)
        up(points[0].spec, progress=lambda msg: console.print(f"  {msg}", highlight=False), ready=ready)
    except SpecError as err:
        console.print(str(err), highlight=False, markup=False)
        return 2
    except KeyboardInterrupt:
        console.print("torn down")
    return 0


def cmd_exec(args) -> int:
    _need_root("exec")
    from testbed.run.live import LiveError, exec_in
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    try:
        return exec_in(args.host, argv)
    except LiveError as err:
        console.print(f"[red]error[/red]: {err}")
        return 2


def cmd_validate(args) -> int:
    from testbed.spec import validate_file
    bad = 0
    for f in args.files:
        ok, text = validate_file(f, args.overrides)
        if ok:
            ok, text = _probe_kernel(f, args.overrides, text)
        print(text)
        bad += not ok
    return 1 if bad else 0


def _probe_kernel(path, overrides, text: str) -> tuple[bool, str]:
    """As root, also ask the kernel whether it can shape what the file asks (netem, qdiscs); nodes
    (real machines, the Docker engine) are checked by `run`, not here."""
    if os.geteuid() != 0:
        return True, text + "\n  (kernel capability probe skipped: it needs root; run checks it before starting)"
    from testbed.run.runner import preflight
    from testbed.spec import SpecError, expand_points, load_spec
    exp = load_spec(path, overrides)
    try:
        preflight(exp, expand_points(exp), contact_nodes=False)
    except SpecError as err:
        return False, str(err)
    return True, text


def cmd_report(args) -> int:
    from analysis.report import build_report
    print(build_report(Path(args.dir)))
    return 0


def cmd_cleanup(args) -> int:
    _need_root("cleanup")
    from testbed.run.cleanup import cleanup
    actions = cleanup(force=args.force)
    for a in actions:
        print(a)
    print("nothing to clean up" if not actions else f"{len(actions)} action(s)")
    return 0


def cmd_schema(args) -> int:
    from testbed.spec import json_schema
    print(json.dumps(json_schema(), indent=2))
    return 0


def cmd_image(args) -> int:
    if args.action == "build":
        _need_root("image build")
    from testbed.nodes import image
    return image.main([args.action] + (["--base", args.base] if args.base else []) + (["--force"] if args.force else []))


def cmd_cluster(args) -> int:
    _need_root("cluster")
    from testbed.cluster import servers
    say = lambda msg: console.print(f"[cluster] {msg}", highlight=False, markup=False, soft_wrap=True)  # noqa: E731
    try:
        if args.action == "up":
            print(servers.cluster_yaml(servers.up(args.n, progress=say)), end="")
        elif args.action == "status":
            found = servers.status()
            for s in found:
                print(f"{s.name:<6} {s.address:<15} {s.state:<8} {s.container:<18} {s.image}")
            running = [s for s in found if s.state == "running"]
            print(servers.cluster_yaml(running) if running else "no servers running", end="")
        else:
            actions = servers.down(progress=say)
            say(f"{len(actions)} removed" if actions else "no servers")
    except servers.ClusterError as err:
        console.print(f"[red]error[/red]: {err}", highlight=False)
        return 1
    except KeyboardInterrupt:
        say("interrupted: run_experiment.py cluster down removes what was started")
        return 130
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["predict"]:   # its own parser (analysis/predict.py), imported only when used
        from analysis.predict import main as predict
        return predict(argv[1:])
    args = parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    return {"run": cmd_run, "up": cmd_up, "exec": cmd_exec, "validate": cmd_validate, "report": cmd_report, "cleanup": cmd_cleanup,
            "schema": cmd_schema, "image": cmd_image, "cluster": cmd_cluster}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
