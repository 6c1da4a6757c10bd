"""--rdzv-conf is_host: whether this node hosts the elastic rendezvous store,
whatever its host name says. On Kubernetes the endpoint is a Service name a
pod cannot recognise as its own, so the template tells it."""
import socket
import subprocess

from built_tree import ROOT

TRAINRUN = ROOT / "bazel-bin" / "launcher" / "trainrun"


def _free_port():
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def _elastic(tmp_path, endpoint, conf):
    (tmp_path / "noop.py").write_text("import os; assert os.environ['WORLD_SIZE'] == '1'\n")
    return subprocess.run([str(TRAINRUN), "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint, "--nnodes", "1",
                           "--rdzv-conf", conf, str(tmp_path / "noop.py")], capture_output=True, text=True,
                          timeout=120)


def test_is_host_makes_a_node_host_the_store_under_a_name_it_does_not_know(tmp_path):
    # 127.0.0.2 reaches this machine, but is neither "localhost", 127.0.0.1 nor the host name.
    port = _free_port()
    r = _elastic(tmp_path, f"127.0.0.2:{port}", "is_host=1,join_timeout=30")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hosting the rendezvous store" in r.stdout + r.stderr


def test_without_is_host_such_a_node_waits_for_a_store_and_names_it(tmp_path):
    port = _free_port()
    r = _elastic(tmp_path, f"127.0.0.2:{port}", "join_timeout=2")
    assert r.returncode != 0
    assert f"127.0.0.2:{port}" in r.stdout + r.stderr


def test_is_host_0_keeps_even_a_loopback_endpoint_from_hosting(tmp_path):
    port = _free_port()
    r = _elastic(tmp_path, f"127.0.0.1:{port}", "is_host=0,join_timeout=2")
    assert r.returncode != 0 and "hosting the rendezvous store" not in r.stdout + r.stderr


def test_a_bad_is_host_value_is_refused_by_name(tmp_path):
    r = _elastic(tmp_path, "127.0.0.1:29400", "is_host=maybe")
    assert r.returncode == 2 and "--rdzv-conf: 'is_host=maybe' is not a known setting" in r.stdout + r.stderr
