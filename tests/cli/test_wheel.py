"""The built wheel holds every mapped package and the catalog.

package-dir mapping mistakes (a missed subpackage, a missing __init__.py,
package data left out) show only in a wheel, never in the editable install.
Building needs setuptools from the package index, hence `network`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SKIP = shutil.ignore_patterns(".git", "build", "dist", "*.egg-info", "__pycache__", ".venv", ".pytest_cache", ".hypothesis")

CHECK = """
import sys
sys.path.insert(0, sys.argv[1])
import specchat, specchat.drafters, specchat.themes
from specchat.store.catalog import load_catalog
assert specchat.__file__.startswith(sys.argv[1]), specchat.__file__
for module in (specchat.drafters, specchat.themes):
    assert module.__file__.startswith(sys.argv[1]), module.__file__
print(load_catalog().default)
"""


def pip(*args: str) -> None:
    """Run pip quietly, without dependencies; its error's tail if it fails."""
    done = subprocess.run([sys.executable, "-m", "pip", *args, "--no-deps", "-q"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    src = work / "src"
    shutil.copytree(REPO, src, ignore=SKIP)  # build a copy: no build/ in the clone
    out = work / "dist"
    pip("wheel", "-w", str(out), str(src))
    (whl,) = out.glob("specchat-*.whl")
    return whl


@pytest.mark.network
def test_wheel_holds_the_mapped_packages_and_the_catalog(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for member in ("specchat/__init__.py", "specchat/drafters/__init__.py", "specchat/themes/__init__.py", "specchat/store/catalog.toml",
                   "specchat/cli/main.py", "specchat/decoding/__init__.py", "specchat/tui/specchat.tcss",
                   "specchat/tui/chat/chatscreen.py", "specchat/tui/parts/view.py", "specchat/tui/state/controller.py"):
        assert member in names
    assert not any(n.startswith(("app/", "drafters/", "themes/", "tests/")) for n in names)


@pytest.mark.network
def test_installed_wheel_imports_from_its_own_files(wheel, tmp_path):
    target = tmp_path / "site"
    pip("install", "--target", str(target), str(wheel))
    # -I: no cwd and no user site on sys.path, so the clone cannot stand in
    check = subprocess.run([sys.executable, "-I", "-c", CHECK, str(target)], capture_output=True, text=True, cwd=tmp_path)
    assert check.returncode == 0, check.stderr[-2000:]
    assert check.stdout.strip() == "qwen2.5-coder-1.5b"
