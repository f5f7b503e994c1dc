# SPDX-License-Identifier: BSD-3-Clause
"""The PEP 517 build backend of Remora's Python package (pyproject.toml).

`pip install .` (or `pip wheel .`) calls build_wheel here: CMake configures
and builds the module remora._C with the Remora libraries copied beside it
(REMORA_PYTHON_BUNDLE, RPATH $ORIGIN), then a wheel (a zip with a .dist-info:
METADATA, WHEEL, RECORD) is written holding remora/*.py, the op table, the
module and libremora*.so. It needs nothing from PyPI: only the standard
library, CMake, a C++ compiler and the Debian packages of
tools/scripts/setup.sh (pybind11-dev, python3-dev, libopenblas-dev, ...).

Settings (pip's --config-settings / -C, or the environment):
  build-dir   (REMORA_WHEEL_BUILD_DIR)  CMake build folder; default build-wheel/ in the sources
  cuda        (REMORA_WHEEL_CUDA)       AUTO, ON or OFF (default OFF)
  build-type  (REMORA_WHEEL_BUILD_TYPE) default Release
  cmake-args  (REMORA_WHEEL_CMAKE_ARGS) extra configure arguments, space-separated
  jobs        (CMAKE_BUILD_PARALLEL_LEVEL) parallel build jobs; default: the CPU count
"""
import base64
import glob
import hashlib
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import zipfile

SOURCE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
NAME = "remora"


def _version():
    with open(os.path.join(SOURCE, "CMakeLists.txt"), encoding="utf-8") as f:
        m = re.search(r"project\(Remora VERSION ([0-9.]+)", f.read())
    return m.group(1) if m else "0.0.0"


def _setting(cs, key, env, default):
    if cs and key in cs:
        return cs[key]
    return os.environ.get(env, default)


def _tag():
    impl = "cp%d%d" % sys.version_info[:2]
    abi = impl + getattr(sys, "abiflags", "")
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (impl, abi, plat)


def _metadata():
    return ("Metadata-Version: 2.1\n"
            "Name: %s\n"
            "Version: %s\n"
            "Summary: Remora from Python: tensors, RSA attention and Transformer-XL, zero-copy with NumPy "
            "and PyTorch\n"
            "License: BSD-3-Clause\n"
            "Requires-Python: >=3.8\n"
            "Provides-Extra: numpy\n"
            "Provides-Extra: torch\n" % (NAME, _version()))


def _build(cs):
    build_dir = os.path.abspath(_setting(cs, "build-dir", "REMORA_WHEEL_BUILD_DIR",
                                         os.path.join(SOURCE, "build-wheel")))
    cuda = _setting(cs, "cuda", "REMORA_WHEEL_CUDA", "OFF")
    build_type = _setting(cs, "build-type", "REMORA_WHEEL_BUILD_TYPE", "Release")
    extra = shlex.split(_setting(cs, "cmake-args", "REMORA_WHEEL_CMAKE_ARGS", ""))
    jobs = str(_setting(cs, "jobs", "CMAKE_BUILD_PARALLEL_LEVEL", os.cpu_count() or 1))
    configure = ["cmake", "-S", SOURCE, "-B", build_dir, "-DCMAKE_BUILD_TYPE=" + build_type,
                 "-DREMORA_PYTHON=ON", "-DREMORA_PYTHON_BUNDLE=ON", "-DREMORA_BUILD_TESTS=OFF",
                 "-DREMORA_BUILD_TOOLS=OFF", "-DREMORA_CUDA=" + cuda, "-DREMORA_MPI=OFF", "-DREMORA_NCCL=OFF",
                 "-DPython3_EXECUTABLE=" + sys.executable] + extra
    print("remora_build:", " ".join(configure), file=sys.stderr)
    subprocess.check_call(configure)
    subprocess.check_call(["cmake", "--build", build_dir, "--target", "remora_python", "-j", jobs])
    return os.path.join(build_dir, "python", "remora")


def _files(built):
    """(archive name, path) of every file of the package."""
    out = []
    for f in sorted(glob.glob(os.path.join(SOURCE, "python", "remora", "*.py"))):
        out.append(("remora/" + os.path.basename(f), f))
    out.append(("remora/ops.def", os.path.join(SOURCE, "ops", "ops.def")))
    mods = glob.glob(os.path.join(built, "_C*.so"))
    if not mods:
        raise RuntimeError("remora_build: the module remora._C was not built in " + built)
    libs = [f for f in glob.glob(os.path.join(built, "lib*.so*")) if not os.path.islink(f)]
    for f in sorted(mods + libs):
        out.append(("remora/" + os.path.basename(f), f))
    return out


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(wheel_directory, files):
    version = _version()
    tag = _tag()
    dist_info = "%s-%s.dist-info" % (NAME, version)
    wheel_name = "%s-%s-%s.whl" % (NAME, version, tag)
    path = os.path.join(wheel_directory, wheel_name)
    record = []
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for arc, src in files:
            with open(src, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(arc)
            info.external_attr = (0o755 if arc.endswith(".so") or ".so." in arc else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.append(_record_line(arc, data))
        meta = {
            dist_info + "/METADATA": _metadata().encode(),
            dist_info + "/WHEEL": ("Wheel-Version: 1.0\nGenerator: remora_build\nRoot-Is-Purelib: false\n"
                                   "Tag: %s\n" % tag).encode(),
            dist_info + "/top_level.txt": b"remora\n",
        }
        for arc, data in meta.items():
            z.writestr(arc, data)
            record.append(_record_line(arc, data))
        record.append(dist_info + "/RECORD,,")
        z.writestr(dist_info + "/RECORD", "\n".join(record) + "\n")
    return wheel_name


# ---- PEP 517 hooks ----
def get_requires_for_build_wheel(config_settings=None):
    """Nothing from PyPI."""
    return []


def get_requires_for_build_sdist(config_settings=None):
    """Nothing from PyPI."""
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    """The .dist-info (METADATA, WHEEL) without building."""
    dist_info = "%s-%s.dist-info" % (NAME, _version())
    d = os.path.join(metadata_directory, dist_info)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    with open(os.path.join(d, "WHEEL"), "w", encoding="utf-8") as f:
        f.write("Wheel-Version: 1.0\nGenerator: remora_build\nRoot-Is-Purelib: false\nTag: %s\n" % _tag())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    """Builds the module with CMake and writes the wheel; returns its file name."""
    built = _build(config_settings)
    return _write_wheel(wheel_directory, _files(built))


def build_sdist(sdist_directory, config_settings=None):
    """A source archive of the tracked files (git ls-files)."""
    import tarfile

    version = _version()
    base = "%s-%s" % (NAME, version)
    names = subprocess.check_output(["git", "ls-files"], cwd=SOURCE, text=True).split("\n")
    path = os.path.join(sdist_directory, base + ".tar.gz")
    with tarfile.open(path, "w:gz") as tar:
        for n in names:
            if n and os.path.isfile(os.path.join(SOURCE, n)):
                tar.add(os.path.join(SOURCE, n), arcname=base + "/" + n)
        pkg = "Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (NAME, version)
        import io

        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size = len(pkg)
        tar.addfile(info, io.BytesIO(pkg.encode()))
    return base + ".tar.gz"
