"""trainrun.hub and trainrun.utils.model_zoo: a state dict fetched by URL (file:// and a local HTTP server) is
cached under get_dir()/checkpoints and read from the cache afterwards; check_hash refuses a file whose content
does not match the hash in its name and leaves nothing in the cache; hub.load / list / help run a local
repository's hubconf.py; the cache directory follows TORCH_HOME as PyTorch's."""
import hashlib
import http.server
import os
import threading

import pytest

import built_tree  # noqa: F401  (trainrun from the source tree; skips when not built)

import trainrun as torch  # noqa: E402
import trainrun.hub as hub  # noqa: E402
from trainrun.utils import model_zoo  # noqa: E402


@pytest.fixture
def hub_dir(tmp_path):
    before = hub._hub_dir
    hub.set_dir(tmp_path / "hub")
    yield tmp_path / "hub"
    hub._hub_dir = before


def _saved_weights(directory, name):
    state = {"weight": torch.arange(6.0).reshape(2, 3), "bias": torch.tensor([1.0, -1.0])}
    path = directory / name
    torch.save(state, str(path))
    return path, state


def test_load_state_dict_from_file_url_is_cached(tmp_path, hub_dir):
    source, state = _saved_weights(tmp_path, "weights.pt")
    loaded = hub.load_state_dict_from_url(source.as_uri())
    assert torch.equal(loaded["weight"], state["weight"]) and torch.equal(loaded["bias"], state["bias"])
    cached = hub_dir / "checkpoints" / "weights.pt"
    assert cached.exists()
    source.unlink()  # the second load reads the cache
    assert torch.equal(hub.load_state_dict_from_url(source.as_uri())["weight"], state["weight"])
    assert model_zoo.load_url is hub.load_state_dict_from_url
    other = hub.load_state_dict_from_url(cached.as_uri(), model_dir=str(tmp_path / "elsewhere"), file_name="x.pt")
    assert torch.equal(other["bias"], state["bias"]) and (tmp_path / "elsewhere" / "x.pt").exists()


def test_check_hash_over_http(tmp_path, hub_dir):
    served = tmp_path / "served"
    served.mkdir()
    source, state = _saved_weights(served, "tmp.pt")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    good, bad = served / f"model-{digest[:8]}.pt", served / "model-deadbeef.pt"
    source.rename(good)
    bad.write_bytes(good.read_bytes())

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=str(served), **kwargs)

        def log_message(self, *args):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        loaded = hub.load_state_dict_from_url(f"{base}/{good.name}", check_hash=True)
        assert torch.equal(loaded["weight"], state["weight"])
        with pytest.raises(RuntimeError, match="invalid hash value"):
            hub.load_state_dict_from_url(f"{base}/{bad.name}", check_hash=True)
        assert sorted(os.listdir(hub_dir / "checkpoints")) == [good.name]  # (nothing partial left behind)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_local_hubconf(tmp_path, hub_dir):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "hubconf.py").write_text(
        "dependencies = ['math']\n"
        "import trainrun.nn as nn\n"
        "def tiny_mlp(hidden=4, pretrained=False):\n"
        "    '''A two-layer MLP.'''\n"
        "    return nn.Sequential(nn.Linear(3, hidden), nn.ReLU(), nn.Linear(hidden, 1))\n"
        "def _helper():\n"
        "    pass\n")
    model = hub.load(str(repo), "tiny_mlp", source="local", hidden=7)
    assert model[0].out_features == 7
    assert hub.list(str(repo), source="local") == ["tiny_mlp"]
    assert hub.help(str(repo), "tiny_mlp", source="local") == "A two-layer MLP."
    with pytest.raises(RuntimeError, match="Cannot find callable missing"):
        hub.load(str(repo), "missing", source="local")
    with pytest.raises(ValueError, match="Unknown source"):
        hub.load(str(repo), "tiny_mlp", source="ftp")
    (repo / "hubconf.py").write_text("dependencies = ['no_such_module_xyz']\n")
    with pytest.raises(RuntimeError, match="Missing dependencies: no_such_module_xyz"):
        hub.load(str(repo), "tiny_mlp", source="local")


def test_cache_dir_follows_torch_home(monkeypatch, tmp_path):
    before = hub._hub_dir
    hub._hub_dir = None
    try:
        monkeypatch.setenv("TORCH_HOME", str(tmp_path / "th"))
        assert hub.get_dir() == str(tmp_path / "th" / "hub")
        monkeypatch.delenv("TORCH_HOME")
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert hub.get_dir() == str(tmp_path / "xdg" / "torch" / "hub")
    finally:
        hub._hub_dir = before
