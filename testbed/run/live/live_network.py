"""A live network held from Python (testbed.api.network) or a test (testbed/pytest_plugin.py).

The first run point of a spec is brought up as `up` brings it up (live.py): the same resolution,
preflight and BringUp, under the one-network lock, with live.json written so that `run_experiment.py
exec` reaches its hosts from another shell. Commands and processes run in a host through the node
interface (its own namespaces, a process group of its own, recorded for cleanup); links change
through the operations of the faults (faults/faults.py: LinkState, shape_ops, ACTIONS), so that a rate or a
delay means what it means in an experiment file, under dilation too.

Teardown on every path: an exception, Ctrl-C, SIGTERM (in the main thread it raises
KeyboardInterrupt inside the block, as Ctrl-C does), each process started here stopped first. A
process killed with SIGKILL leaves its state file, which `run_experiment.py cleanup` reads, as for
any run."""
from __future__ import annotations

import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from typing import Iterator, NamedTuple, Sequence

from pydantic import ValidationError

from testbed import shaping
from testbed.cleanup import run_lock
from testbed.emulation import dilation as dil
from testbed.run.faults import faults
from testbed.run.live import live
from testbed.run.bringup.network_up import preflight
from testbed.run.point import switch_capacity
from testbed.run.point.point import machine_cores, resolve_all
from testbed.spec import LinkParams, expand_points
from testbed.spec.rules.capabilities import NO_NETEM, SHAPERS, rate_problem
from testbed.spec.models import Fault

STOP_GRACE_S = 3.0      # a process started here gets this long after SIGTERM before SIGKILL
TASK_ACTIONS = ("kill", "pause")     # fault actions on training tasks, which a live network does not run


class ChecksFailed(RuntimeError):
    """The spec's checks failed and its checks.fail_run is true; the network is down again."""

    def __init__(self, reason: str, rows: list[dict]):
        super().__init__(reason)
        self.rows = rows


class Link(NamedTuple):
    """A link of the network: its ends, its parameters (LinkParams in the file's units: bits/s,
    seconds, percent; emulated time under dilation) and whether it is up."""
    a: str
    b: str
    params: LinkParams
    up: bool = True


class LiveFault(Fault):
    """A fault of the file's grammar applied when asked: no trigger, no duration (undo it instead)."""
    at: str | None = None


def parsed(model, values: dict):
    """`values` read as the experiment file reads them, with their units ('2mbit', '5ms', '1%');
    ValueError naming each bad value."""
    try:
        return model.model_validate(values)
    except ValidationError as err:
        raise ValueError("; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: "
                                   f"{e['msg'].removeprefix('Value error, ')}" for e in err.errors())) from None


class AppliedFault:
    """A fault in force on a live network; `undo()` takes its change off (the faults applied since stay)."""

    def __init__(self, net: "LiveNetwork", fault: LiveFault):
        self.net, self.fault, self.undone = net, fault, False

    @property
    def action(self) -> str:
        return self.fault.action

    def undo(self) -> None:
        undo = faults.ACTIONS[self.fault.action].undo
        if undo is None:
            raise ValueError(f"{self.fault.action} has no undo ({faults.ACTIONS[self.fault.action].doc})")
        if not self.undone:
            self.net._carry(self.fault, undo)
            self.undone = True


class LiveNetwork:
    """The running network of one resolved point (point.ResolvedPoint); made by open_network."""

    def __init__(self, point, brought, checks: Sequence[dict] = ()):
        self.point = point              # the resolved point: its spec, dilation, graphs
        self._net = brought.net         # testbed.net.network.Network, on this machine's clock
        self.checks = list(checks)      # the checks' rows (checks.csv's columns); [] when none ran
        self._procs: list[subprocess.Popen] = []
        self._closed = False

    # what it is --------------------------------------------------------------------------------
    @property
    def spec(self):
        """The point's experiment (the first point of a sweep), as written: emulated units."""
        return self.point.spec

    @property
    def dilation(self) -> float:
        return self.point.k

    @property
    def hosts(self) -> list[str]:
        return [h.name for h in self.point.graph.hosts]

    def ip(self, host: str) -> str:
        return self._node(host).address

    @property
    def links(self) -> list[Link]:
        """Every link with its configured parameters (the file's; what set_link changed: `link(a, b)`)."""
        return [Link(e.a, e.b, e.params) for e in self.point.graph.links]

    def link(self, a: str, b: str) -> Link:
        """The link between a and b as it is now: its parameters after set_link and faults, and whether it is up."""
        key = self._link_key(a, b)
        configured = next(e.params for e in self.point.graph.links if frozenset((e.a, e.b)) == key)
        state = self._net.reshaped.get(key)
        if state is None:
            return Link(a, b, configured)
        return Link(a, b, self._emulated(state.params), state.up)

    # processes ---------------------------------------------------------------------------------
    def popen(self, host: str, cmd: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start `cmd` (a list of arguments: no shell unless you pass ["sh", "-c", ...]) in the host: in its
        namespaces and cgroups, in a process group of its own (`send_signal`, `terminate` and `kill` signal
        the group), recorded for `cleanup`, and stopped when the network goes down. Keyword arguments are
        subprocess.Popen's; `env` adds to the host's environment; `cwd` defaults to /."""
        node, argv = self._node(host), _argv(cmd)
        self._open()
        kwargs["env"] = node.env({k: str(v) for k, v in (kwargs.get("env") or {}).items()})
        proc = node.popen(argv, **kwargs)
        self._procs = [p for p in self._procs if p.poll() is None] + [proc]
        return proc

    def exec(self, host: str, cmd: Sequence[str], timeout: float | None = 60.0, check: bool = False,
             input: str | None = None, env: dict | None = None, cwd: str = "/") -> subprocess.CompletedProcess:
        """Run `cmd` in the host to completion: a CompletedProcess with its returncode and its stdout and
        stderr as text (`input`: text for its stdin). subprocess.TimeoutExpired after `timeout` seconds
        (its process group killed); CalledProcessError with check=True when it exits non-zero."""
        argv = _argv(cmd)
        proc = self.popen(host, argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=cwd)
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            raise subprocess.TimeoutExpired(argv, timeout, out, err) from None
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        done = subprocess.CompletedProcess(argv, proc.returncode, out, err)
        if check:
            done.check_returncode()
        return done

    # links -------------------------------------------------------------------------------------
    def set_link(self, a: str, b: str, bw=None, delay=None, loss=None) -> Link:
        """Reshape the link between a and b, both ends, as a set_bw / set_delay / set_loss fault does,
        with the file's units: bw '2mbit', delay '20ms', loss '1%'; what is not given stays. The change
        stays until another one (faults applied later go on top of it); returns the link as it is now."""
        given = {k: v for k, v in (("bw", bw), ("delay", delay), ("loss", loss)) if v is not None}
        if not given:
            raise ValueError("set_link: give bw, delay or loss, e.g. set_link('h1', 's1', bw='2mbit')")
        key = self._link_key(a, b)
        wall = dil.wall_link(parsed(LinkParams, given), self.point.k, getattr(self.point, "byte_scale", 1))
        change = {k: getattr(wall, k) for k in given}
        self._refuse(change, netem="delay" in change or "loss" in change)
        ctx = self._context([(a, b)])
        state = faults.link_state(ctx, key)
        entry = (object(), change)          # whose change it is: this call's (a fault's undo leaves it)
        state.changes.append(entry)
        try:
            faults.carry_out(ctx, self._net, None, faults.shape_ops(ctx, key, state.params))
        except BaseException:
            state.changes.remove(entry)     # the link's tree is unknown now: its next change rebuilds it
            raise
        return self.link(a, b)

    def link_down(self, a: str, b: str) -> AppliedFault:
        """Both ends of the link down (a link_down fault); `.undo()` or `link_up` brings it back."""
        return self.fault("link_down", link=[a, b])

    def link_up(self, a: str, b: str) -> AppliedFault:
        return self.fault("link_up", link=[a, b])

    def fault(self, action: str, **fields) -> AppliedFault:
        """Apply a fault of the file's grammar now (docs/faults.md): link_down, link_up, set_bw, set_delay,
        set_loss (link=[a, b] and the value: bw, delay, loss) or set_cpu (host, cpu). Returns the fault
        in force; its `undo()` takes it off."""
        if action not in faults.ACTIONS:
            raise ValueError(f"no fault action {action!r}: {', '.join(faults.ACTIONS)}")
        if action in TASK_ACTIONS:
            raise ValueError(f"{action} acts on training tasks, which a live network does not run: signal a "
                             "process you started instead (net.popen(...).send_signal)")
        if {"at", "duration"} & set(fields):
            raise ValueError("a fault on a live network applies now and lasts until its undo(): no at or duration")
        syntax = faults.ACTIONS[action]
        fault = parsed(LiveFault, {"action": action, **fields})
        named = [k for k in syntax.targets if getattr(fault, k) is not None]
        if len(named) != 1:
            raise ValueError(f"{action} needs {' or '.join(syntax.targets)}")
        if syntax.value and getattr(fault, syntax.value) is None:
            raise ValueError(f"{action} needs {syntax.value}")
        if fault.link is not None:
            self._link_key(*fault.link)
        if fault.host is not None:
            self._node(fault.host)
        k = self.point.k
        if k != 1:
            fault = fault.model_copy(update={
                "bw": None if fault.bw is None else dil.link_rate(fault.bw, k),
                "delay": None if fault.delay is None else dil.wall_time(fault.delay, k)})
        self._refuse({"bw": fault.bw} if fault.bw is not None else {}, netem=syntax.netem)
        try:
            self._carry(fault, syntax.apply)
        except BaseException:
            if syntax.undo is not None:        # whatever part of it took effect
                try:
                    self._carry(fault, syntax.undo)
                except Exception:  # noqa: BLE001 - the apply's error is the one to see
                    pass
            raise
        return AppliedFault(self, fault)

    # teardown ----------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop every process started here that still runs: SIGTERM to its group, SIGKILL after
        STOP_GRACE_S. The network itself goes down when open_network's block ends."""
        self._closed = True
        running = [p for p in self._procs if p.poll() is None]
        for proc in running:
            proc.terminate()
        deadline = time.monotonic() + STOP_GRACE_S
        for proc in running:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                try:
                    proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass            # the network's teardown kills what its state file records
        self._procs = []

    # helpers -----------------------------------------------------------------------------------
    def _open(self) -> None:
        if self._closed:
            raise RuntimeError("the network is down: use it inside its `with` block")

    def _node(self, host: str):
        node = self._net.nodes.get(host) if isinstance(host, str) else None
        if node is None:
            raise ValueError(f"no host {host!r} in the network (hosts: {_listed(self.hosts)})")
        return node

    def _link_key(self, a: str, b: str) -> frozenset:
        key = frozenset((a, b))
        if not any(frozenset((e.a, e.b)) == key for e in self._net.graph.links):
            names = [f"{e.a}-{e.b}" for e in self._net.graph.links]
            raise ValueError(f"no link between {a!r} and {b!r} (links: {_listed(names)})")
        return key

    def _context(self, links) -> faults.Context:
        """A faults Context of the running network for these links (it shares their states and the
        OVS QoS rates with every other, the faults' too), the hosts' configured CPU."""
        self._open()
        ctx = faults.link_context(self._net, [tuple(pair) for pair in links])
        ctx.cpu = {name: node.limits["cpu"] for name, node in self._net.nodes.items()}
        return ctx

    def _carry(self, fault: LiveFault, operations) -> None:
        ctx = self._context([fault.link] if fault.link is not None else [])
        faults.carry_out(ctx, self._net, None, operations(ctx, fault))

    def _refuse(self, change: dict, netem: bool) -> None:
        """ValueError when this network cannot shape the change (on this machine's clock)."""
        topology = self._net.topology
        if netem and not SHAPERS[topology.shaping].netem:
            raise ValueError(f"delay and loss need netem on tc-shaped links; {SHAPERS[topology.shaping].what} "
                             "(topology.shaping: tc)")
        if netem and not shaping.kernel_has_qdisc("netem"):
            raise ValueError(f"delay and loss {NO_NETEM}")
        problem = rate_problem(change["bw"], topology.shaping) if change.get("bw") is not None else None
        if problem:
            scaled = f" (the rate / dilation {self.point.k:g})" if self.point.k != 1 else ""
            raise ValueError(f"bw: {problem}{scaled}")

    def _emulated(self, params: LinkParams) -> LinkParams:
        """Parameters on this machine's clock back in the file's (emulated) units: rate x K, times / K."""
        k = self.point.k
        if k == 1:
            return params
        return params.model_copy(update={
            "bw": None if params.bw is None else round(params.bw * k),
            "delay": None if params.delay is None else params.delay / k,
            "jitter": None if params.jitter is None else params.jitter / k})


def _argv(cmd) -> list[str]:
    if isinstance(cmd, (str, bytes)) or not isinstance(cmd, Sequence) or not cmd:
        raise TypeError(f"a command is a non-empty list of arguments, never run through a shell (got {cmd!r}); "
                        "for a shell pass it yourself: ['sh', '-c', 'echo $HOSTNAME']")
    return [str(a) for a in cmd]


def _listed(names: list[str], most: int = 8) -> str:
    return ", ".join(names[:most]) + (f", ... ({len(names)} in all)" if len(names) > most else "")


_held: list[LiveNetwork] = []        # the network this process holds (at most one)


@contextmanager
def open_network(exp, checks: bool | None = None, progress=lambda msg: None) -> Iterator[LiveNetwork]:
    """The first run point of `exp` (a validated Experiment) up, as `up` brings it up, until the block
    ends. checks: run the spec's checks (None: when the spec has a `checks:` section); a failed check
    raises ChecksFailed unless the spec's checks.fail_run is false. Raises SpecError (a preflight
    refusal), testbed.owner.LockHeld (another run holds the network lock), NetworkError or NodeError."""
    if _held:
        raise RuntimeError("this process holds a live network already: one network at a time on a machine")
    with terminate_interrupts(), run_lock():
        points = expand_points(exp)
        if len(points) > 1:
            progress(f"the spec sweeps {len(points)} points; bringing up the first ({points[0].run_id})")
        first = resolve_all(points[:1], machine_cores(), progress=progress,
                            switch=lambda kind: switch_capacity.capacity(kind, progress))
        preflight(exp, first, progress=progress)
        asked = checks if checks is not None else "checks" in exp.model_fields_set
        with live.kept(first[0], progress, checks=asked) as (brought, checked):
            if checked.reason and first[0].wall_spec.checks.fail_run:
                raise ChecksFailed(f"the network's checks failed: {checked.reason}", checked.rows)
            if checked.reason:
                progress(f"WARNING {checked.reason} (checks.fail_run is false: the network stays up)")
            net = LiveNetwork(first[0], brought, checked.rows)
            _held.append(net)
            try:
                yield net
            finally:
                _held.clear()
                net.close()


@contextmanager
def terminate_interrupts():
    """In the block, SIGTERM raises KeyboardInterrupt (as Ctrl-C does), so that the `finally` of every
    block inside it runs, even where this process started with SIGTERM blocked; the handler and the
    signal mask before are restored after. Only the main thread can handle signals: elsewhere the
    block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = signal.signal(signal.SIGTERM, _raise_interrupt)
    mask = signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        signal.signal(signal.SIGTERM, before if before is not None else signal.SIG_DFL)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signal.Signals(signum).name}")
