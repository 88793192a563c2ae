"""Faults: triggers, validation with lines, the operations each action issues, costs, restarts."""
from types import SimpleNamespace

import pytest

from spec_helpers import issues, load
from testbed.run.faults import faults
from testbed.run.faults.faults import Context, Op, Record
from testbed.spec.faults.grammar import parse_trigger
from testbed.shaping import gso_max_size, ovs_root_class_command
from testbed.nodes import cgroups
from testbed.roles import Task, restart_group
from testbed.spec import LinkParams, expand_points

BASE = """
name: f
topology: {hosts: 2, link: {bw: 10mbit}}
workload: {epochs: 2, steps_per_epoch: 10}
faults:
"""


# ---- triggers ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind, value, step", [
    ("step 20", "step", 20, 20), ("  Epoch   2 ", "epoch", 2, 10), ("epoch 1", "epoch", 1, 0),
    ("15s", "time", 15.0, None), ("1m", "time", 60.0, None), ("500ms", "time", 0.5, None)])
def test_trigger_parsing(text, kind, value, step):
    trigger = parse_trigger(text)
    assert (trigger.kind, trigger.value, trigger.step(10)) == (kind, value, step)


@pytest.mark.parametrize("text", ["step", "step -1", "step 0", "12", "soon", "0s", 12, None])
def test_bad_triggers_are_refused(text):
    with pytest.raises(ValueError):
        parse_trigger(text)


def test_trigger_reached_by_step_or_time():
    assert not parse_trigger("step 5").reached(4, 1.0, 10)
    assert parse_trigger("step 5").reached(5, 1.0, 10)
    assert parse_trigger("epoch 2").reached(10, 9.0, 10) and not parse_trigger("epoch 2").reached(9, 9.0, 10)
    assert parse_trigger("epoch 1").reached(None, 0.0, 10)           # as soon as training starts
    assert not parse_trigger("epoch 1").reached(None, None, 10)      # not before
    assert parse_trigger("3s").reached(None, 3.1, 10) and not parse_trigger("3s").reached(99, 2.9, 10)


def test_task_names():
    assert faults.parse_task("worker  1") == ("worker", 1)
    assert faults.parse_task("chief") == ("chief", 0)
    with pytest.raises(ValueError):
        faults.parse_task("wrker 1")


# ---- validation --------------------------------------------------------------------------------

def test_faults_load_and_dump(tmp_path):
    exp = load(tmp_path, BASE + "  - {at: step 3, action: set_bw, link: [s1, h2], bw: 5mbit, duration: 2s}\n")
    fault = exp.faults[0]
    assert (fault.at, fault.bw, fault.duration, fault.link) == ("step 3", 5_000_000, 2.0, ["s1", "h2"])
    assert exp.model_dump(mode="json")["faults"][0]["bw"] == "5mbit"
    assert faults.describe(fault) == "set_bw s1-h2 to 5mbit for 2s at step 3"


@pytest.mark.parametrize("fault, line_key, words", [
    ("{at: step 3, action: link_down, link: [h3, s1]}", "faults[0].link[0]", "no node 'h3'"),
    ("{at: step 3, action: link_down, link: [h1, h2]}", "faults[0].link", "no link between h1 and h2"),
    ("{at: step 3, action: set_cpu, host: h9, cpu: 0.2}", "faults[0].host", "no host 'h9'"),
    ("{at: step 3, action: kill, task: worker 2}", "faults[0].task", "tasks: worker 0, worker 1"),
    ("{at: step 11, action: kill, task: worker 1}", "faults[0].at", "past the end of training (10 steps: 2 epoch(s) of 5)"),  # fixed data: 10 x 32 samples over 2 workers
    ("{at: epoch 3, action: kill, task: worker 1}", "faults[0].at", "past the end of training (2 epoch"),
    ("{at: 11m, action: kill, task: worker 1}", "faults[0].at", "past workload.timeout"),
    ("{at: step 3, action: kill, task: worker 1, duration: 3s}", "faults[0].duration", "kill has no duration"),
    ("{at: step 3, action: link_up, link: [h1, s1], duration: 3s}", "faults[0].duration", "nothing to undo"),
    ("{at: step 3, action: pause, task: worker 1}", "faults[0].action", "pause needs a duration"),
    ("{at: step 3, action: set_bw, link: [h1, s1]}", "faults[0].action", "set_bw needs bw"),
    ("{at: step 3, action: set_cpu, host: h1, cpu: 0.5, bw: 1mbit}", "faults[0].bw", "bw is not used by set_cpu"),
    ("{at: step 3, action: kill, host: h1}", "faults[0].host", "host is not used by kill"),
    ("{at: step 3, action: pause, task: worker 1, host: h1, duration: 1s}", "faults[0].host", "not both"),
    ("{at: 12, action: kill, task: worker 1}", "faults[0].at", "is not a trigger"),
    ("{at: step 3, action: kil, task: worker 1}", "faults[0].action", "did you mean 'kill'?"),
    ("{at: step 3, action: kill, task: wrker 1}", "faults[0].task", "is not a task"),
])
def test_fault_errors_name_file_line_and_key(tmp_path, fault, line_key, words):
    found = issues(tmp_path, BASE + f"  - {fault}\n")
    match = [i for i in found if i.key == line_key]
    assert match and words in match[0].message, "\n".join(map(str, found))
    assert match[0].line == 5 and str(match[0]).startswith(f"{tmp_path / 'exp.yaml'}:5: {line_key}: ")


def test_faults_can_be_set_and_swept(tmp_path):
    text = BASE + "  - {at: step 3, action: pause, task: worker 1, duration: 1s}\n"
    exp = load(tmp_path, text, overrides=["faults[0].duration=4s", "faults[0].at=step 7"])
    assert (exp.faults[0].duration, exp.faults[0].at) == (4.0, "step 7")
    swept = load(tmp_path, text + "sweep:\n  faults[0].duration: [1s, 2s]\n  workload.recovery: [none, backup]\n")
    points = expand_points(swept)
    assert sorted((p.spec.faults[0].duration, p.spec.workload.recovery) for p in points) == [
        (1.0, "backup"), (1.0, "none"), (2.0, "backup"), (2.0, "none")]
    bad = issues(tmp_path, text + "sweep:\n  faults[0].at: [step 5, step 50]\n")
    assert any("step 50 is past the end of training" in i.message and i.line == 7 for i in bad), bad


def test_netem_faults_are_refused_before_start_on_this_kernel(tmp_path, monkeypatch):
    exp = load(tmp_path, BASE + "  - {at: step 3, action: set_delay, link: [h1, s1], delay: 10ms}\n")
    monkeypatch.setattr(faults.shaping, "kernel_has_qdisc", lambda kind: kind != "netem")
    [(key, message)] = faults.capability_problems(exp)
    assert key == "faults[0].action" and "CONFIG_NET_SCH_NETEM" in message


# ---- the operations each action issues ----------------------------------------------------------

class F:
    """A fault as the planner reads it."""
    def __init__(self, action, at="step 1", link=None, task=None, host=None, bw=None, delay=None, loss=None,
                 cpu=None, duration=None):
        self.__dict__.update(locals())


TASKS = [Task("h1", "worker", 0, 50501), Task("h2", "worker", 1, 50501), Task("h2", "ps", 0, 50502)]
LINK = frozenset({"h2", "s1"})


def ctx(shaping="tc", params=LinkParams(bw="10mbit")):
    return Context(ends={LINK: [("h2-eth0", "h2"), ("s1-eth2", None)]}, params={LINK: params}, shaping=shaping,
                   tasks=TASKS, cpu={"h1": None, "h2": 0.5})


def plan(fault, context=None):
    context = context or ctx()
    action = faults.ACTIONS[fault.action]
    return action.apply(context, fault), action.undo(context, fault) if action.undo else None


class Net:
    """The parts of a running network the applier uses: a link h2-s1 of `params`; commands are
    collected, not run (the switch's end too); those of a host in `broken` fail."""
    def __init__(self, monkeypatch, params=LinkParams(bw="10mbit"), shaping="tc"):
        monkeypatch.setattr(faults.subprocess, "run", lambda argv, **kw: SimpleNamespace(
            returncode=self.ran.append((None, argv)) or int(None in self.broken), stdout="", stderr="broken"))
        self.topology = SimpleNamespace(shaping=shaping, qdisc="htb")
        self.graph = SimpleNamespace(links=[SimpleNamespace(a="h2", b="s1", params=params)])
        self.qos_rates, self.reshaped, self.ran, self.broken = {}, {}, [], set()
        self.nodes = {h: SimpleNamespace(name=h, limits={"cpu": None},
                                         run=lambda argv, timeout, check, h=h: self._run(h, argv, check))
                      for h in ("h1", "h2")}

    def _run(self, host, argv, check):
        self.ran.append((host, argv))
        if check and host in self.broken:
            raise RuntimeError(f"{argv[0]}: broken")

    def link_ends(self, a, b):
        return [("h2-eth0", self.nodes["h2"]), ("s1-eth2", None)]


def shaped(ops, intf="h2-eth0"):
    """The rate and netem arguments that operations give an interface (None: none)."""
    cmds = [op.arg for op in ops if intf in op.arg and "del" not in op.arg]
    rate = next((a[a.index("rate") + 1] for a in cmds if "class" in a), None)
    netem = next((a[a.index("netem") + 1:] for a in cmds if "netem" in a), None)
    return rate, netem


def up_or_down(ops) -> set:
    return {op.arg[-1] for op in ops}


def lead(step: int) -> list[dict]:
    """The lead task's events once it has ended `step`."""
    return [{"event": "start", "t": 0.0}, {"event": "step", "step": step}]


def test_link_down_and_up_commands():
    down, up = plan(F("link_down", link=["h2", "s1"]))
    assert down == [Op("cmd", "h2", ("ip", "link", "set", "dev", "h2-eth0", "down")),
                    Op("cmd", None, ("ip", "link", "set", "dev", "s1-eth2", "down"))]
    assert up == [op._replace(arg=op.arg[:-1] + ("up",)) for op in down]
    assert plan(F("link_up", link=["h2", "s1"]))[1] is None


def test_set_bw_reshapes_both_ends_and_restores_the_configured_rate():
    apply, undo = plan(F("set_bw", link=["h2", "s1"], bw=2_000_000))
    segments = [op for op in apply if op.arg[0] == "ip"]       # each end's segments capped for the new rate
    assert [(op.where, op.arg[-1]) for op in segments] == [("h2", str(gso_max_size(2_000_000))), (None, "3028")]
    apply, undo = [op for op in apply if op.arg[0] == "tc"], [op for op in undo if op.arg[0] == "tc"]
    assert [op.where for op in apply] == ["h2", None]
    # the same HTB tree at another rate: its class changes in place (the HTB qdisc itself refuses a
    # change), nothing is removed first: no queued packet dropped, the link never unshaped
    assert apply[0].arg[:6] == ("tc", "class", "replace", "dev", "h2-eth0", "parent") and "2000000bit" in apply[0].arg
    assert "10000000bit" in undo[0].arg and "10000000bit" in undo[1].arg
    assert not any("del" in op.arg for op in apply + undo) and all(op.check for op in undo)


def test_a_change_of_tree_removes_the_old_one_first_and_faults_see_each_others_changes(monkeypatch):
    context, net, slow = ctx(), Net(monkeypatch), F("set_bw", link=["h2", "s1"], bw=2_000_000)
    faults.carry_out(context, net, None, faults.ACTIONS["set_bw"].apply(context, slow))
    delay = faults.ACTIONS["set_delay"]
    fault = F("set_delay", link=["h2", "s1"], delay=0.05)
    apply = delay.apply(context, fault)      # netem joins the tree: HTB's root goes first (absent is fine)
    assert apply[0] == Op("cmd", "h2", ("tc", "qdisc", "del", "dev", "h2-eth0", "root"), check=False)
    assert any("netem" in op.arg for op in apply)
    faults.carry_out(context, net, None, apply)
    undo = delay.undo(context, fault)        # back to set_bw's tree without netem: removed again
    assert undo[0].arg[1:3] == ("qdisc", "del") and not any("netem" in op.arg for op in undo)
    assert shaped(undo) == ("2000000bit", None)


def test_set_bw_on_an_unshaped_link_removes_the_shaping_again(monkeypatch):
    context, fault = ctx(params=LinkParams()), F("set_bw", link=["h2", "s1"], bw=2_000_000)
    apply = faults.ACTIONS["set_bw"].apply(context, fault)
    assert sum(op.arg[0] == "tc" for op in apply) == 6 and sum(op.arg[0] == "ip" for op in apply) == 2
    faults.carry_out(context, Net(monkeypatch, params=LinkParams()), None, apply)
    undo = faults.ACTIONS["set_bw"].undo(context, fault)
    assert [op.arg for op in undo] == [("tc", "qdisc", "del", "dev", "h2-eth0", "root"),
                                       ("tc", "qdisc", "del", "dev", "s1-eth2", "root")]


def test_set_bw_with_ovs_shaping_sets_the_switch_port_qos():
    apply, undo = plan(F("set_bw", link=["h2", "s1"], bw=2_000_000), ctx(shaping="ovs"))
    assert [op for op in apply if op.arg[0] == "ip"] == [
        Op("cmd", "h2", ("ip", "link", "set", "dev", "h2-eth0", "gso_max_size", "3028")),
        Op("cmd", None, ("ip", "link", "set", "dev", "s1-eth2", "gso_max_size", "3028"))]
    apply, undo = [op for op in apply if op.arg[0] != "ip"], [op for op in undo if op.arg[0] != "ip"]
    assert len(apply) == 2 and apply[0].where is None and apply[0].arg[0] == "ovs-vsctl"
    assert "other-config:max-rate=2000000" in apply[0].arg
    assert "other-config:max-rate=10000000" in undo[0].arg
    # then, as at bring-up, the QoS root class gets the queue's burst (the fault path once lacked it)
    assert apply[1] == Op("cmd", None, ("tc", *ovs_root_class_command("s1-eth2", 2_000_000)))
    assert undo[1] == Op("cmd", None, ("tc", *ovs_root_class_command("s1-eth2", 10_000_000)))
    unshaped = plan(F("set_bw", link=["h2", "s1"], bw=2_000_000), ctx(shaping="ovs", params=LinkParams()))[1]
    assert unshaped == [Op("cmd", None, ("ovs-vsctl", "clear", "Port", "s1-eth2", "qos"))]


def test_overlapping_faults_on_a_link_each_put_on_and_take_off_only_their_own_change():
    context = ctx()
    slow, late = F("set_bw", link=["h2", "s1"], bw=1_000_000), F("set_delay", link=["h2", "s1"], delay=0.05)
    faults.ACTIONS["set_bw"].apply(context, slow)
    assert shaped(faults.ACTIONS["set_delay"].apply(context, late)) == ("1000000bit", ("delay", "50000us"))
    assert shaped(faults.ACTIONS["set_bw"].undo(context, slow)) == ("10000000bit", ("delay", "50000us"))
    assert shaped(faults.ACTIONS["set_delay"].undo(context, late)) == ("10000000bit", None)


def test_of_two_faults_on_one_key_the_later_wins_and_each_undo_leaves_the_others():
    set_bw = faults.ACTIONS["set_bw"]
    context, a, b = ctx(), F("set_bw", link=["h2", "s1"], bw=1_000_000), F("set_bw", link=["h2", "s1"], bw=2_000_000)
    set_bw.apply(context, a)
    assert shaped(set_bw.apply(context, b)) == ("2000000bit", None)
    assert shaped(set_bw.undo(context, b)) == ("1000000bit", None)        # a is still on
    assert shaped(set_bw.undo(context, a)) == ("10000000bit", None)
    set_bw.apply(context, a), set_bw.apply(context, b)
    assert shaped(set_bw.undo(context, a)) == ("2000000bit", None)        # b, the later, still on


def test_a_link_stays_down_while_any_link_down_on_it_is_active_and_link_up_is_a_later_change():
    down, up = faults.ACTIONS["link_down"], faults.ACTIONS["link_up"]
    context, a, b = ctx(), F("link_down", link=["h2", "s1"]), F("link_down", link=["h2", "s1"])
    down.apply(context, a), down.apply(context, b)
    assert up_or_down(down.undo(context, a)) == {"down"} and up_or_down(down.undo(context, b)) == {"up"}
    down.apply(context, a)
    assert up_or_down(up.apply(context, F("link_up", link=["h2", "s1"]))) == {"up"}
    assert up_or_down(down.undo(context, a)) == {"up"}             # link_up, the later change, stays
    assert up_or_down(down.apply(context, b)) == {"down"} and up_or_down(down.undo(context, b)) == {"up"}


def test_after_a_failed_change_the_next_one_rebuilds_the_tree(tmp_path, monkeypatch):
    net, clock = Net(monkeypatch), [0.0]
    monkeypatch.setattr(faults.time, "time", lambda: clock[0])
    delay = F("set_delay", at="step 1", link=["h2", "s1"], delay=0.05, duration=1)
    slow = F("set_bw", at="step 3", link=["h2", "s1"], bw=2_000_000, duration=1)
    applier = faults.Applier([delay, slow], net, TASKS, 10, tmp_path / "faults.json")
    assert applier.tick(None, lead(1)) is None
    net.broken, clock[0] = {"h2"}, 2.0       # the undo removes h2's root, then cannot build it again
    assert applier.tick(None, lead(2)) is None and "undo failed: tc: broken" in applier.records[0].outcome
    net.broken, before = set(), len(net.ran)
    assert applier.tick(None, lead(3)) is None
    h2 = [argv for host, argv in net.ran[before:] if host == "h2" and argv[0] == "tc"]
    # not the class changed in place under a root that is not there: the root removed and built again
    assert h2[0] == ["tc", "qdisc", "del", "dev", "h2-eth0", "root"] and "htb" in h2[1] and "2000000bit" in h2[2]
    before, clock[0] = len(net.ran), 4.0
    assert applier.tick(None, lead(4)) is None          # that one succeeded: the undo changes it in place
    assert [argv[1:3] for host, argv in net.ran[before:] if argv[0] == "tc"] == [["class", "replace"]] * 2


def test_what_a_change_shapes_is_recorded_only_once_it_succeeded(monkeypatch):
    context, net = ctx(shaping="ovs"), Net(monkeypatch, shaping="ovs")
    context.qos_rates.update({"s1-eth1": 10_000_000, "s1-eth2": 10_000_000})
    fault = F("set_bw", link=["h2", "s1"], bw=2_000_000)
    ops = faults.ACTIONS["set_bw"].apply(context, fault)
    assert context.qos_rates == {"s1-eth1": 10_000_000, "s1-eth2": 10_000_000}, "not while planning"
    net.broken = {None}
    with pytest.raises(RuntimeError):
        faults.carry_out(context, net, None, ops)
    assert context.qos_rates["s1-eth2"] == 10_000_000 and context.links[LINK].shaped is None
    net.broken, faster = set(), F("set_bw", link=["h2", "s1"], bw=3_000_000)
    faults.carry_out(context, net, None, faults.ACTIONS["set_bw"].apply(context, faster))
    assert context.qos_rates == {"s1-eth1": 10_000_000, "s1-eth2": 3_000_000}
    assert context.links[LINK].shaped.bw == 3_000_000


def test_set_delay_and_loss_add_netem_under_the_rate():
    apply, _ = plan(F("set_delay", link=["h2", "s1"], delay=0.02))
    assert apply[3].arg[-4:] == ("10:", "netem", "delay", "20000us") and "parent" in apply[3].arg
    apply, _ = plan(F("set_loss", link=["h2", "s1"], loss=1.5))
    assert apply[3].arg[-3:] == ("netem", "loss", "1.5%")


def test_task_actions_signal_process_groups():
    assert plan(F("kill", task="worker 1")) == ([Op("signal", TASKS[1], "SIGKILL")], None)
    stop, cont = plan(F("pause", task="worker 0", duration=3))
    assert stop == [Op("signal", TASKS[0], "SIGSTOP")] and cont == [Op("signal", TASKS[0], "SIGCONT")]
    stop, _ = plan(F("pause", host="h2", duration=3))
    assert stop == [Op("signal", TASKS[1], "SIGSTOP"), Op("signal", TASKS[2], "SIGSTOP")]


def test_set_cpu_and_its_undo_to_the_configured_limit():
    assert plan(F("set_cpu", host="h2", cpu=0.1)) == ([Op("cpu", "h2", 0.1)], [Op("cpu", "h2", 0.5)])
    assert plan(F("set_cpu", host="h1", cpu=0.1))[1] == [Op("cpu", "h1", None)]


def test_every_action_has_a_row_that_validation_understands():
    for name, action in faults.ACTIONS.items():
        assert action.targets and set(action.targets) <= {"link", "task", "host"}, name
        assert action.duration in ("no", "optional", "required"), name
        assert (action.undo is None) == (action.duration == "no"), name


# ---- cgroups at run time, restarts, costs -------------------------------------------------------

def test_set_cpu_rewrites_the_quota_v1_and_v2(tmp_path):
    v1 = tmp_path / "v1"
    d = cgroups.set_cpu("h1", 0.25, root=v1, cores=2)
    assert d == v1 / "cpu/dltestbed/h1" and (d / "cpu.cfs_quota_us").read_text() == "1000"   # half a core: 1 ms per 2 ms
    assert (d / "cpu.cfs_period_us").read_text() == "2000"
    cgroups.set_cpu("h1", None, root=v1, cores=2)
    assert (d / "cpu.cfs_quota_us").read_text() == "-1"
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu memory\n")
    (v2 / "cgroup.subtree_control").write_text("+memory")
    d = cgroups.set_cpu("h1", 0.5, root=v2, cores=4)
    assert (d / "cpu.max").read_text() == "2000 1000"
    assert (v2 / "dltestbed" / "cgroup.subtree_control").read_text() == "+cpu"
    assert cgroups.set_cpu("h1", None, root=v2, cores=4) == d and (d / "cpu.max").read_text() == "max 1000"


def test_restart_group():
    chief, ps, w0, w1 = Task("h1", "chief", 0, 1), Task("h2", "ps", 0, 1), Task("h3", "worker", 0, 1), \
        Task("h4", "worker", 1, 1)
    assert restart_group([chief, ps, w0, w1], w1, "ps") == [w1]
    assert restart_group([chief, ps, w0, w1], ps, "ps") == [chief, ps, w0, w1]
    assert restart_group([w0, w1], w1, "allreduce") == [w0, w1]


def step(n, t, time_s=1.0):
    return {"event": "step", "step": n, "t": t, "time_s": time_s}


def test_costs_of_a_restart_and_of_a_window():
    # steps 1..6 one second each; killed at t=6.5; back at t=20 from the backup at step 4
    first = [{"event": "start", "t": 0.0}] + [step(n, float(n)) for n in range(1, 7)]
    second = [{"event": "start", "t": 15.0}, {"event": "resume", "step": 4, "t": 19.0}] + \
             [step(n, 15.0 + n) for n in range(5, 11)]
    events = first + second + [{"event": "done", "t": 25.5, "steps": 10, "time_per_step_s": 1.0,
                                "samples_per_s": 32.0}]
    [cost] = faults.restart_costs(events)
    assert cost["replayed"] == 2 and cost["time_lost_s"] == pytest.approx(22 - 6 - 1)   # step 7 at t=22
    cols = faults.recovery_columns(events, restarts=1)
    assert cols["restarts"] == 1 and cols["training_time_s"] == 25.5
    assert cols["time_per_step_s"] == 2.55 and cols["samples_per_s"] == pytest.approx(32 / 2.55)
    lead = Task("h1", "worker", 0, 1)
    kill = Record(0, F("kill", task="worker 1"), applied_step=6, applied_t=6.5, outcome="ok")
    [row] = faults.fault_rows([kill], {lead: events}, lead, "e", "r")
    assert (row["extra_s"], row["steps_replayed"], row["target"]) == (15.0, 2, "worker 1")
    # a 3 s pause over steps 3..4 of a run without restarts: those steps took 2.5 s longer each
    steady = [{"event": "start", "t": 0.0}, step(1, 1.0), step(2, 2.0), step(3, 5.5, 3.5), step(4, 6.5),
              step(5, 7.5)]
    pause = Record(0, F("pause", task="worker 1", duration=3), applied_t=2.1, undone_t=5.1, outcome="ok")
    [row] = faults.fault_rows([pause], {lead: steady}, lead, "e", "r")
    assert (row["extra_s"], row["steps_replayed"], row["duration_s"]) == (2.5, 0, 3)
    assert faults.recovery_columns(steady, 0) == {"restarts": 0, "time_lost_s": 0}
