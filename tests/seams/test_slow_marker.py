"""The ``slow`` marker's lists (``tests/conftest.py``) name tests that exist, so that a renamed or
moved slow test does not silently slip back into ``make test`` (issue 22)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests import conftest

ROOT = Path(__file__).resolve().parent.parent.parent


def test_every_slow_path_exists():
    for path in conftest.SLOW_PATHS:
        assert (ROOT / path).exists(), path


@pytest.mark.parametrize("nodeid", conftest.SLOW_TESTS)
def test_every_slow_test_names_a_test(nodeid):
    path, _, name = nodeid.partition("::")
    function = name.split("[", 1)[0]
    source = (ROOT / path).read_text()
    assert re.search(rf"^(async )?def {re.escape(function)}\(", source, re.M), nodeid
    assert not nodeid.startswith(conftest.SLOW_PATHS), f"{nodeid} is already under a slow path"


def test_is_slow_matches_functions_parameters_and_paths():
    assert conftest.is_slow("tests/perf/test_perf_ratios.py::test_anything")
    assert conftest.is_slow("tests/seams/test_module_layout.py::test_module_imports_alone_in_a_fresh_interpreter[x]")
    one = "tests/session/test_session_goldens.py::test_tree_matches_pi"
    assert conftest.is_slow(one + "[scale/gen-8mb-seed3]") and not conftest.is_slow(one + "[pi-generated/mix_06]")
    assert not conftest.is_slow("tests/seams/test_slow_marker.py::test_every_slow_path_exists")


def test_the_marker_is_registered(pytestconfig):
    assert any(m.startswith("slow:") for m in pytestconfig.getini("markers"))


def test_ratio_tests_are_measured_again_when_they_fail(request):
    # every ratio module under tests/perf gets the rerun marker; no other test does (a correctness
    # test that fails once has failed)
    ratio_modules = sorted(p.name for p in (ROOT / "tests/perf").glob("test_*ratio*.py"))
    assert len(ratio_modules) >= 5, ratio_modules
    for name in ratio_modules:
        assert conftest.is_ratio_test(f"tests/perf/{name}::test_x[p]"), name
    assert not conftest.is_ratio_test("tests/seams/test_benches_smoke.py::test_x")
    assert not conftest.is_ratio_test("tests/session/test_ratio_of_things.py::test_x")
    assert not conftest.is_ratio_test(request.node.nodeid)
    assert not request.node.get_closest_marker("flaky")
    # the plugin that reads the marker is installed with the test extra
    assert request.config.pluginmanager.hasplugin("rerunfailures")
