"""What a user installs: the wheel holds the library (with its kernels and validation claims) and nothing of the
benchmark machinery or the test oracles; a checkout that is not installed refuses to import with advice instead of
running one tree's Python with another tree's kernels."""

import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def _clean_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    return env


def test_an_uninstalled_copy_of_the_package_refuses_to_import(tmp_path):
    """A copy of ``flowlib/`` without its kernels next to it: either no ``flowlib.kernels`` is found (no install)
    or the one found belongs to another tree (the editable install of this checkout). Both are refused."""
    (tmp_path / "flowlib").mkdir()
    shutil.copy(ROOT / "flowlib" / "__init__.py", tmp_path / "flowlib" / "__init__.py")
    proc = subprocess.run([sys.executable, "-c", "import flowlib"], cwd=tmp_path, env=_clean_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: flowlib was imported from ")
    assert str(tmp_path / "flowlib") in last and "pip install -e ." in last


def test_the_installed_package_has_its_kernels_and_claims():
    import flowlib
    import flowlib.validation.core

    here = pathlib.Path(flowlib.__file__).resolve().parent
    assert pathlib.Path(flowlib.kernels.__file__).resolve().parent.parent in (here, here.parent)
    assert pathlib.Path(flowlib.validation.core.__file__).resolve().parent.parent in (here, here.parent)


@pytest.mark.slow
def test_the_wheel_holds_the_library_and_nothing_else(tmp_path):
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns(".git", "_build", "build", "__pycache__",
                                                                 "*.egg-info", ".hypothesis", ".pytest_cache"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                           "-w", str(tmp_path / "dist"), str(source)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (tmp_path / "dist").glob("flowlib-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    package = [name for name in names if not name.startswith("flowlib-")]
    assert "flowlib/kernels/driver.py" in package and "flowlib/kernels/tolerances.py" in package
    assert "flowlib/validation/core.py" in package and "flowlib/mp/flow.py" in package
    assert any(name.startswith("flowlib/configs/") and name.endswith(".toml") for name in package)
    assert all(name.startswith("flowlib/") for name in package), package
    unwanted = [name for name in package if "peers" in name or name.endswith(("bench.py", ".json"))
                or name.startswith(("flowlib/benchmarks", "flowlib/tests"))]
    assert unwanted == []


def test_nothing_imports_the_top_level_folders_as_packages():
    """``kernels`` and ``validation`` are importable only as ``flowlib.kernels`` and ``flowlib.validation``: a
    second import under the bare name would load a second copy of the claim registry and of the kernels."""
    import re

    pattern = re.compile(r"^\s*(from|import)\s+(kernels|validation)\b", re.MULTILINE)
    sources = [path for folder in ("flowlib", "kernels", "validation", "tests", "benchmarks", "docs")
               for path in (ROOT / folder).rglob("*.py") if "_build" not in path.parts]
    assert len(sources) > 100
    hits = [f"{path.relative_to(ROOT)}" for path in sources if pattern.search(path.read_text())]
    assert hits == []
