"""`predict RESULTS... --nodes ... --bw ...`: what-if from the cost model fitted on results (no root).
The arguments are parsed here (units from testbed.units); the model, the grid and the figure are
analysis/model/predict.py's."""
from __future__ import annotations

import sys
from pathlib import Path

from testbed.cli.common import Command, main_of
from testbed.units import parse_bandwidth, parse_size, parse_time
import workloads.communication as comm


def add_arguments(ap) -> None:
    ap.add_argument("results", type=Path, nargs="+", help="results folder(s) with runs.csv (the model is "
                    "fitted on their runs together, e.g. an all-reduce sweep and a ps sweep)")
    ap.add_argument("--nodes", default="1,2,4,...,1024", help="node counts, e.g. 1,2,4,...,1024 (default)")
    ap.add_argument("--bw", default=None, help="configured link bandwidths, e.g. 10mbit,1gbit "
                    "(default: those of the results)")
    ap.add_argument("--strategy", default="allreduce,ps", help="allreduce,ps (default both)")
    ap.add_argument("--cpu", default=None, help="CPU per node as a fraction of the fitted machine; "
                    "A/B alternates nodes (default 1)")
    ap.add_argument("--servers", type=int, default=1, help="ps: parameter servers (default 1)")
    ap.add_argument("--samples", type=int, default=None, help="the job to project each point's time to train "
                    "for, in samples (default: what the results trained)")
    ap.add_argument("--steps", type=int, default=None, help="the job as steps of one node (steps x batch samples), "
                    "instead of --samples")
    ap.add_argument("--machine", choices=["separate", "shared"], default="separate",
                    help="separate: a machine per node (default); shared: all on one, like this testbed")
    ap.add_argument("--gradient-size", default=None, help="another model's gradient, e.g. 22mb")
    ap.add_argument("--batch", type=float, default=None, help="batch per worker (default: the results')")
    ap.add_argument("--rtt", default=None, help="round-trip time of the network, e.g. 1ms (default: measured)")
    ap.add_argument("--communication", default=None, help="the all-reduce's workload.communication setting "
                    f"(default none): {', '.join(comm.predict_forms(explained=True))} or a bytes factor such as 0.1 "
                    "(docs/communication.md)")
    ap.add_argument("--balance", choices=["none", "static"], default="none",
                    help="all-reduce's workload.balance: none (a mixed --cpu's step is set by its slowest node, "
                    "default) or static (each worker's batch proportional to its speed: set by the mean speed)")
    ap.add_argument("--out", type=Path, default=None, help="folder for predict.csv and predict.png "
                    "(default RESULTS/predict)")


def parse_bandwidths(text: str) -> list[int]:
    return [parse_bandwidth(t.strip()) for t in str(text).split(",") if t.strip()]


def run(args) -> int:
    from analysis.model import costmodel, predict
    from analysis.tables import tables
    try:
        exps = [tables.load_experiment(r) for r in args.results]
    except (FileNotFoundError, tables.ResultsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        nodes = predict.parse_nodes(args.nodes)
        cpus = predict.parse_cpus(args.cpu)
        strategies = [s.strip() for s in args.strategy.split(",") if s.strip()]
        bad = [s for s in strategies if s not in costmodel.STRATEGIES]
        if bad:
            raise ValueError(f"--strategy: unknown {', '.join(bad)} (allreduce, ps)")
        grad = parse_size(args.gradient_size) if args.gradient_size else None
        rtt = parse_time(args.rtt) if args.rtt else None
        bws = parse_bandwidths(args.bw) if args.bw else sorted(
            {int(b) for e in exps for b in e.runs["bw_bps"].dropna()})
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if not bws:
        print("error: no --bw given and the results record no bandwidth", file=sys.stderr)
        return 2
    return predict.run(args.results, " + ".join(e.name for e in exps), nodes, bws, strategies, cpus,
                       servers=args.servers, steps=args.steps, machine=args.machine, gradient_bytes=grad,
                       batch=args.batch, rtt_s=rtt, out=args.out, samples=args.samples,
                       communication_setting=args.communication, balance=args.balance)


COMMAND = Command("predict", "what-if from the cost model fitted on results: time per step, speedup and "
                  "the better strategy for any nodes, bandwidths, CPU (no root; predict --help)", add_arguments, run)


def main(argv=None) -> int:
    return main_of(COMMAND, argv)
