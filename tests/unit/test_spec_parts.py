"""The spec's small pure parts, each by itself: key paths, the shaping capability table, image references,
the value types and the hosts' kinds."""
import pytest

from testbed.spec import keypaths, values
from testbed.spec.rules import capabilities
from testbed.spec.rules.image_reference import reference_problem
from testbed.spec.models import LinkParams, Topology
from testbed.spec.rules.problems import host_kinds, real_machines


def test_key_paths_parse_format_and_resolve_aliases():
    assert keypaths.parse_path("topology.links[2].a") == ("topology", "links", 2, "a")
    assert keypaths.parse_path("topology.links.2.a") == ("topology", "links", 2, "a")
    assert keypaths.format_path(("topology", "links", 2, "a")) == "topology.links[2].a"
    assert keypaths.canonical("hosts") == "topology.hosts" and keypaths.canonical("bw") == "topology.link.bw"
    for bad in ("", ".a", "a.", "a..b", "a b"):
        with pytest.raises(ValueError, match="is not a key path"):
            keypaths.parse_path(bad)
    assert keypaths.covers(("topology",), ("topology", "link", "bw")) and not keypaths.covers(("a", "b"), ("a",))
    data = {"a": [{"b": 1}]}
    assert keypaths.get_in(data, ("a", 0, "b")) == 1 and keypaths.get_in(data, ("a", 3), "none") == "none"
    keypaths.set_in(data, ("c", "d"), 2)
    assert data["c"] == {"d": 2} and keypaths.suggest("hots", ["hosts", "link"]) == "; did you mean 'hosts'?"


def test_the_capability_table_says_what_each_shaper_can_do():
    assert capabilities.SHAPERS["tc"].netem and not capabilities.SHAPERS["ovs"].netem
    assert capabilities.needs_netem(LinkParams(delay="10ms")) and not capabilities.needs_netem(LinkParams(bw="10mbit"))
    assert capabilities.rate_problem(10**7) is None
    assert "tc paces rates between 8000 bit/s" in capabilities.rate_problem(100)


@pytest.mark.parametrize("name, why", [
    ("debian:bookworm", None), ("registry:5000/team/worker:1.0", None), ("a b", "white space"),
    ("Worker:Latest", "is not a valid docker image reference"), ("x@sha256:12", "digest"),
])
def test_image_references_are_checked_without_docker(name, why):
    problem = reference_problem(name)
    assert problem is None if why is None else why in problem


def test_node_names_say_why_they_are_refused():
    assert values.check_node_name("h1") == "h1"
    with pytest.raises(ValueError, match="too long .* at most 8"):
        values.check_node_name("hostnumber1")
    with pytest.raises(ValueError, match="unknown node kind 'vm'"):
        values.check_kind("vm")


def test_which_hosts_are_machines_of_their_own():
    topo = Topology.model_validate({"hosts": 3, "host_overrides": {"h2": {"kind": "docker"}}})
    assert host_kinds(topo) == {"h1": "netns", "h2": "docker", "h3": "netns"} and real_machines(topo) == set()
