"""trainrun.hub, as torch.hub: pretrained weights by URL, cached on disk, and models from a repository's
hubconf.py.

    state = trainrun.hub.load_state_dict_from_url(url, check_hash=True)   # cached under get_dir()/checkpoints
    model = trainrun.hub.load("path/to/repo", "resnet_tiny", source="local", pretrained=False)

The cache directory is $TORCH_HOME/hub (TORCH_HOME defaults to $XDG_CACHE_HOME/torch, then ~/.cache/torch), as
PyTorch's, so files PyTorch downloaded are found. URLs are fetched with urllib (http, https, file); a failed
download leaves no partial file in the cache. A "github" source downloads the repository's archive; with no
network that fails with urllib's error, and "local" needs none."""
import errno
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import urllib.parse
import urllib.request
import warnings
import zipfile

import trainrun

__all__ = ["download_url_to_file", "get_dir", "help", "list", "load", "load_state_dict_from_url", "set_dir"]

ENV_TORCH_HOME = "TORCH_HOME"
ENV_XDG_CACHE_HOME = "XDG_CACHE_HOME"
DEFAULT_CACHE_DIR = "~/.cache"
MODULE_HUBCONF = "hubconf.py"
VAR_DEPENDENCY = "dependencies"
HASH_REGEX = re.compile(r"-([a-f0-9]*)\.")
READ_DATA_CHUNK = 128 * 1024
_hub_dir = None


def _get_torch_home():
    return os.path.expanduser(os.getenv(ENV_TORCH_HOME, os.path.join(
        os.getenv(ENV_XDG_CACHE_HOME, DEFAULT_CACHE_DIR), "torch")))


def get_dir():
    """Where hub keeps repositories and checkpoints: set_dir's, else $TORCH_HOME/hub."""
    if os.getenv("TORCH_HUB"):
        warnings.warn("TORCH_HUB is deprecated, please use env TORCH_HOME instead")
    return _hub_dir if _hub_dir is not None else os.path.join(_get_torch_home(), "hub")


def set_dir(d):
    global _hub_dir
    _hub_dir = os.path.expanduser(os.fspath(d))


def download_url_to_file(url, dst, hash_prefix=None, progress=True):
    """Downloads `url` to `dst` through a temporary file beside it, checking (if given) that the SHA-256 of the
    content starts with hash_prefix; `dst` appears only when the download is whole and checked."""
    dst = os.path.expanduser(dst)
    directory = os.path.dirname(dst) or "."
    with urllib.request.urlopen(urllib.request.Request(url, headers={"User-Agent": "trainrun.hub"}),
                                timeout=60) as response:
        f = tempfile.NamedTemporaryFile(delete=False, dir=directory, prefix=os.path.basename(dst) + ".",
                                        suffix=".partial")
        try:
            sha256 = hashlib.sha256() if hash_prefix is not None else None
            while True:
                chunk = response.read(READ_DATA_CHUNK)
                if not chunk:
                    break
                f.write(chunk)
                if sha256 is not None:
                    sha256.update(chunk)
            f.close()
            if sha256 is not None:
                digest = sha256.hexdigest()
                if digest[:len(hash_prefix)] != hash_prefix:
                    raise RuntimeError(f'invalid hash value (expected "{hash_prefix}", got "{digest}")')
            shutil.move(f.name, dst)
        finally:
            f.close()
            if os.path.exists(f.name):
                os.remove(f.name)


def _is_legacy_zip_format(filename):
    if zipfile.is_zipfile(filename):
        infolist = zipfile.ZipFile(filename).infolist()
        return len(infolist) == 1 and not infolist[0].is_dir()
    return False


def _legacy_zip_load(filename, model_dir, map_location, weights_only):
    with zipfile.ZipFile(filename) as f:
        members = f.infolist()
        if len(members) != 1:
            raise RuntimeError("Only one file(not dir) is allowed in the zipfile")
        f.extractall(model_dir)
        extracted = os.path.join(model_dir, members[0].filename)
    return trainrun.load(extracted, map_location=map_location, weights_only=weights_only)


def load_state_dict_from_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
                             file_name=None, weights_only=False):
    """The object saved at `url` (a state dict), downloaded once into model_dir (get_dir()/checkpoints). With
    check_hash, the file name's "-<hex>." part must prefix the content's SHA-256 (PyTorch's naming)."""
    if os.getenv("TORCH_MODEL_ZOO"):
        warnings.warn("TORCH_MODEL_ZOO is deprecated, please use env TORCH_HOME instead")
    model_dir = model_dir if model_dir is not None else os.path.join(get_dir(), "checkpoints")
    try:
        os.makedirs(model_dir)
    except OSError as e:
        if e.errno != errno.EEXIST:
            raise
    filename = file_name or os.path.basename(urllib.parse.urlparse(url).path)
    cached_file = os.path.join(model_dir, filename)
    if not os.path.exists(cached_file):
        sys.stderr.write(f'Downloading: "{url}" to {cached_file}\n')
        hash_prefix = None
        if check_hash:
            match = HASH_REGEX.search(filename)
            hash_prefix = match.group(1) if match else None
        download_url_to_file(url, cached_file, hash_prefix, progress=progress)
    if _is_legacy_zip_format(cached_file):
        return _legacy_zip_load(cached_file, model_dir, map_location, weights_only)
    return trainrun.load(cached_file, map_location=map_location, weights_only=weights_only)


# ---- models from a hubconf.py ------------------------------------------------------------------------------------
def _parse_repo_info(github):
    """owner/name[:ref] -> (owner, name, ref); the ref defaults to "main"."""
    repo, _, ref = github.partition(":")
    if "/" not in repo:
        raise ValueError(f'Invalid input: repo_or_dir should be of the form "repo_owner/repo_name[:ref]", got '
                         f'"{github}"')
    owner, name = repo.split("/", 1)
    return owner, name, ref or "main"


def _get_cache_or_reload(github, force_reload, verbose=True):
    owner, name, ref = _parse_repo_info(github)
    hub_dir = get_dir()
    os.makedirs(hub_dir, exist_ok=True)
    repo_dir = os.path.join(hub_dir, "_".join([owner, name, ref.replace("/", "_")]))
    if os.path.exists(repo_dir) and not force_reload:
        if verbose:
            sys.stderr.write(f"Using cache found in {repo_dir}\n")
        return repo_dir
    archive = os.path.join(hub_dir, ref.replace("/", "_") + ".zip")
    url = f"https://github.com/{owner}/{name}/zipball/{ref}"
    if verbose:
        sys.stderr.write(f'Downloading: "{url}" to {archive}\n')
    download_url_to_file(url, archive, progress=False)
    with zipfile.ZipFile(archive) as z:
        top = z.infolist()[0].filename
        extracted = os.path.join(hub_dir, top)
        shutil.rmtree(extracted, ignore_errors=True)
        z.extractall(hub_dir)
    os.remove(archive)
    shutil.rmtree(repo_dir, ignore_errors=True)
    shutil.move(extracted, repo_dir)
    return repo_dir


def _import_hubconf(repo_dir):
    path = os.path.join(repo_dir, MODULE_HUBCONF)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: a hub repository has a {MODULE_HUBCONF} at its top")
    sys.path.insert(0, repo_dir)
    try:
        spec = importlib.util.spec_from_file_location("hubconf", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(repo_dir)
    missing = [d for d in getattr(module, VAR_DEPENDENCY, []) if importlib.util.find_spec(d) is None]
    if missing:
        raise RuntimeError(f"Missing dependencies: {', '.join(missing)}")
    return module


def _repo_dir(repo_or_dir, source, force_reload, verbose):
    source = source.lower()
    if source not in ("github", "local"):
        raise ValueError(f'Unknown source: "{source}". Allowed values: "github" | "local".')
    return _get_cache_or_reload(repo_or_dir, force_reload, verbose) if source == "github" else repo_or_dir


def _entrypoint(hubconf, model):
    if not isinstance(model, str):
        raise ValueError("Invalid input: model should be a string of function name")
    func = getattr(hubconf, model, None)
    if func is None or not callable(func):
        raise RuntimeError(f"Cannot find callable {model} in hubconf")
    return func


def list(github, force_reload=False, skip_validation=False, trust_repo=None, verbose=True, *,  # noqa: A001
         source="github"):
    """The entrypoints (public callables) of the repository's hubconf.py."""
    hubconf = _import_hubconf(_repo_dir(github, source, force_reload, verbose))
    return [f for f in dir(hubconf) if callable(getattr(hubconf, f)) and not f.startswith("_")]


def help(github, model, force_reload=False, skip_validation=False, trust_repo=None, *, source="github"):  # noqa: A001
    """The docstring of an entrypoint."""
    return _entrypoint(_import_hubconf(_repo_dir(github, source, force_reload, False)), model).__doc__


def load(repo_or_dir, model, *args, source="github", trust_repo=None, force_reload=False, verbose=True,
         skip_validation=False, **kwargs):
    """hubconf.<model>(*args, **kwargs) from a GitHub repository (owner/name[:ref]) or a local directory."""
    hubconf = _import_hubconf(_repo_dir(repo_or_dir, source, force_reload, verbose))
    return _entrypoint(hubconf, model)(*args, **kwargs)


def _load_local(hubconf_dir, model, *args, **kwargs):
    return load(hubconf_dir, model, *args, source="local", **kwargs)
