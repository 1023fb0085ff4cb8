"""Packaging and the developer loop stay as issue 22 set them: CI runs the README's commands (the
second as written, the first from the wheel), the Makefile has the loop's targets and `make lint`
runs every check, and the wheel check refuses wheels no index would take."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Two commands") : text.index("\n## ", text.index("## Two commands") + 1)]
    return re.findall(r"```bash\n(.*?)\n```", section, re.S)


def test_ci_runs_readme_command_2_as_written():
    first, second = readme_commands()
    assert "pip install ." in first and "sessiontree compact" in first
    assert second in (ROOT / ".ci" / "run").read_text()
    # every test: all but the ratio tests on both cores, then tests/perf alone (nothing beside a
    # measurement), and no folder of tests left out of both
    assert "pytest -q -n 2 --ignore=tests/perf && pytest -q tests/perf" in second
    assert second.count("--ignore") == 1 and "pytest -q -m" not in second and "--deselect" not in second
    # a failure before the list's last `&&` does not stop a `set -e` script: CI guards the line
    line = next(x for x in (ROOT / ".ci" / "run").read_text().splitlines() if second in x)
    assert line.startswith(second) and line[len(second) :].startswith(" || { "), line
    assert line.rstrip().endswith("exit 1; }"), line


def test_the_wheel_smoke_runs_readme_command_1s_main_job():
    first, _ = readme_commands()
    job = first[first.index("cp examples/session.jsonl") :]
    job = job.replace("examples/session.jsonl", '"$EXAMPLE"').replace("/tmp/sessiontree-demo.jsonl", "demo.jsonl")
    assert job in (ROOT / ".ci" / "wheel_smoke.sh").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make wheel" in ci and ".ci/wheel_smoke.sh" in ci and "make sdist-check" in ci and "make lint" in ci


def _make_targets() -> dict[str, str]:
    """target -> its recipe (the lines after ``target:``)."""
    out: dict[str, str] = {}
    current = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        m = re.match(r"^([a-z][a-z-]*):", line)
        if m:
            current = m.group(1)
            out[current] = ""
        elif current and line.startswith("\t"):
            out[current] += line + "\n"
        elif not line.strip() or line.startswith("#"):
            continue
        elif not line.startswith(("ifeq", "else", "endif")):
            current = None
    return out


def test_the_makefile_has_the_loop():
    targets = _make_targets()
    for name in ("dev", "test", "test-all", "lint", "bench", "wheel", "sdist"):
        assert name in targets, name
    assert "--profile dev-fast" in targets["dev"]
    assert '-m "not slow"' in targets["test"]
    for check in (
        "ruff check",
        "ruff format --check",
        "cargo fmt --check",
        "cargo clippy --all-targets --features python -- -D warnings",
        "mypy.stubtest sessiontree._core",
        "mypy --strict python/sessiontree",
    ):
        assert check in targets["lint"], check
    assert "--zig --compatibility manylinux2014" in targets["wheel"] and "check_wheel.py" in targets["wheel"]


def test_the_release_tools_are_an_extra():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    names = {re.split(r"[<>=\[;]", r, maxsplit=1)[0].strip() for r in extras["release"]}
    assert {"maturin", "ziglang", "auditwheel"} <= names
    assert any(r.startswith("pytest-xdist") for r in extras["test"])


@pytest.fixture(scope="module")
def check_wheel():
    spec = importlib.util.spec_from_file_location("check_wheel", ROOT / ".ci" / "check_wheel.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_wheel_check_reads_the_tags(check_wheel):
    name = "sessiontree-0.1.0-cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    assert check_wheel.platform_tags(Path(name)) == ["manylinux2014_x86_64", "manylinux_2_17_x86_64"]
    assert check_wheel.glibc_of("manylinux2014_aarch64") == (2, 17)
    assert check_wheel.glibc_of("manylinux_2_28_x86_64") == (2, 28)
    assert check_wheel.glibc_of("linux_x86_64") is None


@pytest.mark.parametrize(
    "name, why",
    [
        ("sessiontree-0.1.0-cp311-abi3-linux_x86_64.whl", "not a manylinux tag"),  # what `pip wheel .` gives
        ("sessiontree-0.1.0-cp311-abi3-manylinux_2_34_x86_64.whl", "needs glibc 2.34"),
        ("sessiontree-0.1.0-cp311-cp311-manylinux_2_17_x86_64.whl", "expected cp311-abi3"),
    ],
)
def test_the_wheel_check_refuses_what_no_index_or_old_system_takes(check_wheel, name, why):
    with pytest.raises(SystemExit, match=why):
        check_wheel.check(Path(name))


def test_make_wheel_installs_the_release_extra_first(tmp_path):
    """``make wheel`` installs what it needs (the ``release`` extra, read from pyproject.toml) into
    the venv before building, as ``make dev`` installs its extras."""
    import shutil
    import subprocess

    if shutil.which("make") is None:
        pytest.skip("no make")
    root = Path(__file__).resolve().parent.parent.parent
    out = subprocess.run(
        ["make", "-n", "wheel", "HAVE_AARCH64="], capture_output=True, text=True, cwd=root, timeout=60
    ).stdout.splitlines()
    install = next(i for i, line in enumerate(out) if "optional-dependencies']['release']" in line)
    pip = next(i for i, line in enumerate(out) if "pip install" in line and "release-requirements.txt" in line)
    build = next(i for i, line in enumerate(out) if "maturin build --release" in line)
    assert install < pip < build
