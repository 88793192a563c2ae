"""Role placement and TF cluster specs."""
from types import SimpleNamespace as NS

import pytest

from testbed.roles import PlacementError, Task, assign_tasks, cluster_spec, final_tasks


def wl(strategy, servers=1, placement=None, port=50501):
    return NS(strategy=strategy, port=port, ps=NS(servers=servers, placement=placement))


HOSTS = ["h1", "h2", "h3", "h4"]


def test_single_runs_on_first_host():
    assert assign_tasks(wl("single"), HOSTS) == [Task("h1", "single", 0, 50501)]


def test_allreduce_one_worker_per_host_worker0_first():
    tasks = assign_tasks(wl("allreduce"), HOSTS)
    assert [(t.host, t.task_type, t.index) for t in tasks] == [(h, "worker", i) for i, h in enumerate(HOSTS)]
    assert cluster_spec(tasks, {h: f"10.0.0.{i + 1}" for i, h in enumerate(HOSTS)}) == {
        "worker": ["10.0.0.1:50501", "10.0.0.2:50501", "10.0.0.3:50501", "10.0.0.4:50501"]}
    assert final_tasks(tasks) == tasks


def test_ps_default_placement_chief_servers_workers():
    tasks = assign_tasks(wl("ps", servers=1), HOSTS)
    assert [(t.host, t.task_type, t.index) for t in tasks] == [
        ("h1", "chief", 0), ("h2", "ps", 0), ("h3", "worker", 0), ("h4", "worker", 1)]
    assert final_tasks(tasks) == [tasks[0]]


def test_ps_too_few_hosts_is_explained():
    with pytest.raises(PlacementError, match="needs at least 4 hosts"):
        assign_tasks(wl("ps", servers=2), HOSTS[:3])


def test_ps_colocation_gets_distinct_ports():
    placement = {"chief": ["h1"], "ps": ["h1"], "worker": ["h1", "h2"]}
    tasks = assign_tasks(wl("ps", placement=placement), HOSTS)
    ports_h1 = [t.port for t in tasks if t.host == "h1"]
    assert ports_h1 == [50501, 50502, 50503]
    cluster = cluster_spec(tasks, {"h1": "10.0.0.1", "h2": "10.0.0.2"})
    assert cluster == {"chief": ["10.0.0.1:50501"], "ps": ["10.0.0.1:50502"],
                       "worker": ["10.0.0.1:50503", "10.0.0.2:50501"]}


def test_ps_placement_with_unknown_host_is_refused():
    with pytest.raises(PlacementError, match="h9"):
        assign_tasks(wl("ps", placement={"chief": ["h9"], "ps": ["h1"], "worker": ["h2"]}), HOSTS)


def test_a_userspace_ovs_star_beyond_57_ports_is_refused_before_start(tmp_path):
    from testbed.net.network import port_problems
    from testbed.spec import build_graph, load_spec
    path = tmp_path / "big.yaml"
    path.write_text("name: big\ntopology: {template: star, hosts: 64, switch: {kind: ovs, datapath: user}}\n")
    spec = load_spec(path)
    (key, message), = port_problems(spec.topology, build_graph(spec.topology))
    assert key == "topology.hosts" and "s1 (64 ports)" in message and "tree" in message
    path.write_text("name: big\ntopology: {template: tree, fanout: 8, hosts: 64, switch: {kind: ovs, datapath: user}}\n")
    spec = load_spec(path)
    assert port_problems(spec.topology, build_graph(spec.topology)) == []
    path.write_text("name: big\ntopology: {template: star, hosts: 1024, switch: {kind: linuxbridge}}\n")
    spec = load_spec(path)
    (key, message), = port_problems(spec.topology, build_graph(spec.topology))
    assert "s1 (1024 ports): a Linux bridge takes at most 1023 ports" in message and "fanout at most 1022" in message
    for topology in ("{template: star, hosts: 1000, switch: {kind: linuxbridge}}",
                     "{template: tree, fanout: 56, hosts: 3000, switch: {kind: ovs, datapath: user}}"):
        path.write_text(f"name: big\ntopology: {topology}\n")
        spec = load_spec(path)
        assert port_problems(spec.topology, build_graph(spec.topology)) == []


def test_tf_config_per_task_lists_the_cluster_in_task_order():
    from testbed.roles import Task, cluster_spec, tf_config
    tasks = [Task("h1", "chief", 0, 50501), Task("h2", "ps", 0, 50501), Task("h3", "worker", 0, 50501),
             Task("h4", "worker", 1, 50501)]
    cluster = cluster_spec(tasks, {f"h{i}": f"10.0.0.{i}" for i in range(1, 5)})
    assert tf_config(cluster, tasks[3]) == {
        "cluster": {"chief": ["10.0.0.1:50501"], "ps": ["10.0.0.2:50501"],
                    "worker": ["10.0.0.3:50501", "10.0.0.4:50501"]},
        "task": {"type": "worker", "index": 1}}
    assert tf_config(cluster, tasks[0])["task"] == {"type": "chief", "index": 0}


def test_threads_share_the_machine_and_respect_cpu_limits():
    from testbed.roles import Task, threads_per_task
    tasks = [Task(f"h{i}", "worker", i - 1, 50501) for i in range(1, 5)]
    local = {f"h{i}": ("local", 8, None) for i in range(1, 5)}
    assert set(threads_per_task(tasks, local).values()) == {2}            # 4 tasks on 8 cores
    limited = dict(local, h1=("local", 8, 0.125))                           # h1 may use one core
    assert threads_per_task(tasks, limited)[tasks[0]] == 1
    crowded = {f"h{i}": ("local", 2, None) for i in range(1, 5)}
    assert set(threads_per_task(tasks, crowded).values()) == {1}          # never below one
    apart = {f"h{i}": (f"machine{i}", 16, None) for i in range(1, 5)}      # real machines each
    assert set(threads_per_task(tasks, apart).values()) == {16}
    emulated = {f"h{i}": ("local", 2, 0.2, 2.0) for i in range(1, 5)}   # 2-core machines, dilated
    assert set(threads_per_task(tasks, emulated).values()) == {2}          # as on the emulated machine
    together = [Task("h1", "chief", 0, 50501), Task("h1", "ps", 0, 50502)]
    assert set(threads_per_task(together, {"h1": ("local", 8, 0.5)}).values()) == {2}   # 4 cores, 2 tasks
