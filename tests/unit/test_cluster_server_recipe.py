"""The pure parts of `cluster up`: addresses, capabilities, known_hosts, the printed section, image tag."""
import io
import tarfile
from pathlib import Path

import pytest
import yaml

from testbed.cluster import servers
from testbed.cluster.servers import ClusterError, Server


def test_servers_get_consecutive_addresses_after_the_bridge():
    assert servers.gateway("172.31.250.0/24") == "172.31.250.1"
    assert [servers.server_address(i, "172.31.250.0/24") for i in (1, 2, 3)] == \
        ["172.31.250.2", "172.31.250.3", "172.31.250.4"]
    assert servers.server_address(253, "172.31.250.0/24") == "172.31.250.254"


@pytest.mark.parametrize("i", [0, 254])
def test_an_address_outside_the_subnet_is_refused_with_the_variable_to_set(i):
    with pytest.raises(ClusterError, match="DLTB_CLUSTER_SUBNET"):
        servers.server_address(i, "172.31.250.0/24")


def test_capabilities_are_those_of_the_bounding_set_docker_knows():
    # this machine: everything but SYS_RESOURCE (bit 24), plus bits 38-40 Docker 20.10 does not know
    caps = servers.capabilities("Name:\tx\nCapBnd:\t000001fffeffffff\n")
    assert "SYS_RESOURCE" not in caps and {"NET_ADMIN", "SYS_ADMIN", "AUDIT_READ"} <= set(caps)
    assert len(caps) == len(servers.CAPABILITIES) - 1
    assert servers.capabilities("CapBnd:\t0000000000003000\n") == ["NET_ADMIN", "NET_RAW"]


def test_known_hosts_has_one_line_per_key_and_address():
    keys = {"172.31.250.2": "ssh-ed25519 AAAAC3one root@srv1\necdsa-sha2-nistp256 AAAAE2two root@srv1\n",
            "172.31.250.3": "ssh-rsa AAAAB3three root@srv2\nnot a key\n"}
    assert servers.known_hosts_lines(keys) == (
        "172.31.250.2 ssh-ed25519 AAAAC3one\n172.31.250.2 ecdsa-sha2-nistp256 AAAAE2two\n"
        "172.31.250.3 ssh-rsa AAAAB3three\n")


def test_the_printed_section_loads_as_the_experiment_files_cluster_section():
    found = [Server("srv1", "172.31.250.2", "dltestbed-srv1"), Server("srv2", "172.31.250.3", "dltestbed-srv2")]
    text = servers.cluster_yaml(found, Path("/k/id_ed25519"), Path("/k/known_hosts"))
    section = yaml.safe_load(text)["cluster"]
    assert section["servers"] == [
        {"name": "srv1", "address": "172.31.250.2", "user": "root", "key_file": "/k/id_ed25519"},
        {"name": "srv2", "address": "172.31.250.3", "user": "root", "key_file": "/k/id_ed25519"}]
    assert section["known_hosts"] == "/k/known_hosts"
    from testbed.spec.models import ClusterConf      # the spec's own model accepts it as printed
    conf = ClusterConf.model_validate(section)
    assert [s.address for s in conf.servers] == ["172.31.250.2", "172.31.250.3"]
    assert conf.placement == "auto"


def test_the_image_tag_follows_its_inputs():
    one = servers.server_image_tag("dltestbed-worker:aaaaaaaaaaaa")
    assert one == servers.server_image_tag("dltestbed-worker:aaaaaaaaaaaa")
    assert one.startswith(f"{servers.SERVER_REPO}:") and len(one.rsplit(":", 1)[1]) == 12
    assert one != servers.server_image_tag("dltestbed-worker:bbbbbbbbbbbb")


def test_the_recipe_configures_sshd_for_tunnels_and_key_only_root():
    for line in ("PermitTunnel yes", "PermitRootLogin prohibit-password", "UseDNS no", "PasswordAuthentication no"):
        assert line in servers.BUILD_SCRIPT
    assert "ovs-ctl start" in servers.START_SCRIPT and "exec /usr/sbin/sshd -D" in servers.START_SCRIPT
    assert {"openssh-server", "openvswitch-switch", "mininet", "sudo", "iperf3"} <= set(servers.SERVER_PACKAGES)


def test_the_ssh_folder_is_private():
    data = servers._ssh_tar({"id_ed25519": (b"secret", 0o600), "known_hosts": (b"k", 0o644)})
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        modes = {m.name: m.mode for m in tar.getmembers()}
        assert tar.extractfile(".ssh/id_ed25519").read() == b"secret"
    assert modes == {".ssh": 0o700, ".ssh/id_ed25519": 0o600, ".ssh/known_hosts": 0o644}


def test_up_refuses_a_count_out_of_range_before_touching_docker():
    with pytest.raises(ClusterError, match="1 to"):
        servers.up(0)


def test_the_key_pair_is_made_once_and_private(tmp_path):
    key = servers.ensure_key(tmp_path / "cluster" / "id_ed25519")
    first = key.read_bytes()
    assert key.stat().st_mode & 0o777 == 0o600 and key.parent.stat().st_mode & 0o777 == 0o700
    assert key.with_suffix(".pub").read_text().startswith("ssh-ed25519 ")
    assert servers.ensure_key(key).read_bytes() == first          # kept: servers already trust it
