"""The ``slow`` marker (issue 22): ``make test`` runs ``pytest -m "not slow"``, the one-minute loop;
README command 2 (CI) runs everything: ``pytest -q -n 2 --ignore=tests/perf`` on both cores, then
``pytest -q tests/perf`` alone (the ratio tests measure the machine, so nothing runs beside them).

Slow tests are marked here, by path, so the test files themselves stay as they are:

* ``SLOW_PATHS``: whole modules or folders (the fleet: a 1,000-session store, pools, a real Ray,
  a moto S3 server; Chromium; the perf ratios; the benchmarks' smoke run; the fuzz pass; the
  RPC replays through the real process, sockets and kills);
* ``SLOW_TESTS``: single tests (a function, or one parameter of it) that took over ~1.3 s on
  the 2-core machine under load (about 0.5 s quiet): SIGKILL, deep chains, fresh interpreters,
  the largest corpus files.

A test may also say ``@pytest.mark.slow`` itself. ``tests/seams/test_slow_marker.py`` checks that
every name here still names a test.

And one suite-wide concern: no test reads or writes the user's real folders: the index cache
(the fixtures below), Pi's agent folder (``~/.pi/agent``: settings, models, sessions), and what
the real components the tests drive keep under the home folder (Ray's ``~/.ray/auth_token``,
Chromium's ``~/.config/chromium`` and ``~/.cache/dconf``): ``_suite_home`` points ``HOME``, the XDG
folders and ``PI_CODING_AGENT_DIR`` at temporary ones and unsets ``PI_CODING_AGENT_SESSION_DIR``
for the whole run (``tests/seams/test_suite_hygiene.py``). A test that sets one itself
(``monkeypatch.setenv``) still does.

Hypothesis runs under the ``suite`` profile: no per-example deadline and no ``too_slow`` health
check, because the CI machines have 2 noisy cores and the time an example takes is not what a
property test checks (speed has its own ratio tests in ``tests/perf``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

ROOT = Path(__file__).resolve().parent.parent

SLOW_PATHS = (
    "tests/perf/",  # ratios measured in one run
    "tests/seams/test_benches_smoke.py",  # every benchmark once; the report script
    "tests/html/",  # headless Chromium
    "tests/fleet/",  # a generated 1,000-session store, process pools, a local Ray, a moto S3 server
    "tests/core/test_fuzz_short.py",  # the fuzz pass (atheris)
    "tests/rpc/test_rpc_replay.py",  # every *.rpc.json through the real process
    "tests/rpc/test_rpc_compact_replay.py",  # every *.compact.json through the real process
    "tests/rpc/test_rpc_socket.py",  # socket servers, clients and writers killed
)

SLOW_TESTS = (
    # search of Claude Code and Codex files (tests/search/test_search_converted.py): the largest
    # Codex captures converted per query, children, every prefix of a hostile file
    "tests/search/test_search_converted.py::test_hits_in_a_codex_file_are_those_of_its_conversion[localpush__rollout-2026-02-23T12-40-23-019c8a4c-ed]",
    "tests/search/test_search_converted.py::test_hits_in_a_codex_file_are_those_of_its_conversion[localpush__rollout-2026-02-23T12-47-42-019c8a53-a0]",
    "tests/search/test_search_converted.py::test_hits_in_a_codex_file_are_those_of_its_conversion[localpush__rollout-2026-02-23T12-41-04-019c8a4d-8f]",
    "tests/search/test_search_converted.py::test_hits_in_a_codex_file_are_those_of_its_conversion[localpush__rollout-2026-02-23T12-54-34-019c8a59-e9]",
    "tests/search/test_search_converted.py::test_hostile_lines_give_no_traceback",
    "tests/search/test_search_converted.py::test_an_append_to_a_claude_code_file_is_found_on_the_next_search[cli]",
    "tests/search/test_search_converted.py::test_a_mixed_store_names_each_hits_format",
    # a warm search against a fresh process's after each of seven changes (7 interpreters)
    "tests/search/test_search_warm.py::test_warm_answers_equal_cold_ones_after_each_change",
    # the conversion (tests/convert): the 1 MB Codex capture, an 8 MiB line
    "tests/convert/test_convert_fixtures.py::test_codex_round_trips_and_validates[localpush__rollout-2026-02-23T12-54-34-019c8a59-e9dd-71f0-9ae3-4079fe9726a9]",
    "tests/convert/test_convert_hostile.py::test_a_huge_line_is_carried",
    # the CLI in child processes over converted files, a store's stats
    "tests/convert/test_convert_reads.py::test_read_commands_take_the_file_and_say_it_was_converted",
    "tests/convert/test_convert_reads.py::test_stats_reads_claude_code_and_codex_files_and_names_the_format",
    "tests/convert/test_convert_all.py::test_cli_lines_json_and_exit_codes",
    "tests/cli/test_cli.py::test_branch_of_a_200k_deep_chain",
    "tests/cli/test_cli.py::test_installed_script_runs",
    "tests/cli/test_cli.py::test_output_into_a_closed_pipe_is_quiet",
    "tests/cli/test_cli.py::test_python_dash_m_runs_and_escapes_on_a_real_terminal_stream",
    "tests/cli/test_cli.py::test_tree_and_context_succeed_on_every_real_file[pimono-before-compaction.jsonl]",
    "tests/cli/test_cli.py::test_tree_json_of_a_200k_deep_chain",
    "tests/cli/test_cli.py::test_tree_of_a_200k_deep_chain",
    "tests/cli/test_cli_compact.py::test_readme_first_command",
    "tests/core/test_append_bytes_js_exact.py::test_rust_pass_matches_python_writer",
    "tests/core/test_append_path.py::test_a_forgotten_session_still_writes_its_buffer",
    "tests/core/test_append_path.py::test_a_session_shared_by_threads",
    "tests/core/test_hostile_inputs.py::test_a_very_deep_chain_never_recurses",
    "tests/core/test_hostile_inputs.py::test_millions_of_problem_lines_stay_bounded",
    "tests/core/test_hostile_inputs.py::test_one_node_with_many_children",
    "tests/core/test_hostile_inputs.py::test_the_cli_never_passes_terminal_controls_from_the_file",
    "tests/core/test_reliability.py::test_sigkill_during_appends_loses_no_reported_entry",
    # a Pi-style writer process appending every millisecond while a large session is rewritten
    "tests/core/test_scrub_safety.py::test_in_place_scrub_keeps_every_append_of_a_writer_that_takes_no_lock",
    "tests/core/test_scrub_safety.py::test_session_scrub_in_place_keeps_every_append_of_a_writer_that_takes_no_lock",
    "tests/core/test_reliability.py::test_threads_opening_sessions_at_once_share_the_scan_pool",
    "tests/parity/test_latest_compaction_home.py::test_the_session_and_the_pure_rule_agree_on_random_files",
    "tests/parity/test_parity_js_rules.py::test_date_parse_index_and_python_agree_on_generated_values",
    "tests/parity/test_properties.py::test_core_matches_reference_model_on_random_files",
    "tests/parity/test_properties.py::test_operation_sequences_match_the_reference_after_reopen",
    "tests/parity/test_rust_cut_point.py::test_rust_estimates_match_pis_path_message_tokens[scale/gen-8mb-seed3]",
    "tests/parity/test_rust_cut_point.py::test_session_find_cut_point_agrees_with_prepare_compaction[scale/gen-8mb-seed3]",
    "tests/pi_rules/test_branch_summary_goldens.py::test_branch_summaries_match_pi[scale/gen-8mb-seed3]",
    "tests/pi_rules/test_compaction_goldens.py::test_cut_never_starts_at_tool_result_nor_orphans_one",
    "tests/pi_rules/test_compaction_goldens.py::test_preparation_summarizes_exactly_the_messages_before_the_cut",
    "tests/pi_rules/test_jsjson.py::test_number_to_string_matches_node",
    "tests/pi_rules/test_jsjson.py::test_stringify_equals_compact_json_dumps_without_floats_or_surrogates",
    "tests/pi_rules/test_jsjson.py::test_stringify_matches_node",
    "tests/pi_rules/test_jsjson.py::test_stringify_round_trips_through_json_loads",
    "tests/pi_rules/test_one_home.py::test_js_truthy_is_js_boolean_over_json_values",
    "tests/rpc/test_rpc_server.py::test_continue_starts_a_new_session_written_with_its_first_entry_then_resumes_it",
    "tests/rpc/test_rpc_server.py::test_deep_tree_is_encoded_without_recursion",
    "tests/rpc/test_rpc_server.py::test_huge_line_over_a_pipe",
    "tests/rpc/test_rpc_server.py::test_new_session_fork_clone_switch",
    "tests/rpc/test_rpc_server.py::test_no_session_and_session_dir",
    "tests/rpc/test_rpc_server.py::test_version_and_launch_flags",
    "tests/seams/test_module_layout.py::test_module_imports_alone_in_a_fresh_interpreter",
    "tests/seams/test_module_layout.py::test_no_import_cycles_between_package_modules",
    "tests/seams/test_readme.py::test_the_readme_api_tour_runs_as_written",
    "tests/seams/test_stub_and_lint.py::test_core_stub_matches_the_extension",
    "tests/session/test_entry_objects.py::test_pure_functions_answer_the_same_for_entries_and_dicts[real/pimono-before-compaction.jsonl]",
    "tests/session/test_entry_objects.py::test_pure_functions_answer_the_same_for_entries_and_dicts[real/pimono-large-session.jsonl]",
    "tests/session/test_entry_objects.py::test_the_abandoned_branch_from_the_index_matches_the_pure_rule[real/pimono-before-compaction.jsonl]",
    "tests/session/test_entry_objects.py::test_the_abandoned_branch_from_the_index_matches_the_pure_rule[real/pimono-large-session.jsonl]",
    "tests/session/test_entry_objects.py::test_the_context_span_gives_the_answers_of_the_whole_branch[real/pimono-large-session.jsonl]",
    "tests/session/test_hardening.py::test_a_file_changed_in_place_under_a_reader_raises_never_a_signal",
    "tests/session/test_hardening.py::test_a_forked_child_drops_the_writer_it_inherited",
    "tests/session/test_hardening.py::test_create_on_a_full_disk_leaves_no_empty_file",
    "tests/session/test_hardening.py::test_threads_sharing_a_session_never_see_already_borrowed_on_a_cycle_error",
    "tests/session/test_hostile_text_and_listing.py::test_a_failed_append_is_one_line_and_exit_2",
    "tests/session/test_hostile_text_and_listing.py::test_a_long_string_orjson_refuses_costs_a_small_multiple_of_its_size",
    "tests/session/test_hostile_text_and_listing.py::test_every_json_failure_prints_a_json_error_document",
    "tests/session/test_hostile_text_and_listing.py::test_many_blank_lines_cost_no_memory_per_line",
    "tests/session/test_hostile_text_and_listing.py::test_offline_rolling_updates_are_linear_in_the_previous_summary",
    "tests/session/test_hostile_text_and_listing.py::test_problem_runs_answer_the_same_per_line_facts",
    "tests/session/test_hostile_text_and_listing.py::test_stdout_full_or_closed_is_one_line_and_exit_2",
    "tests/session/test_hostile_text_and_listing.py::test_the_js_serializers_do_not_recurse_on_depth",
    "tests/session/test_orchestration.py::test_compaction_keeps_the_provider_context_valid",
    "tests/session/test_orchestration.py::test_usage_totals_match_pi_session_stats[real/pimono-large-session]",
    "tests/session/test_session_api.py::test_deep_chain_does_not_recurse",
    "tests/session/test_session_api.py::test_many_siblings_with_invalid_timestamps_sort_without_quadratic_cost",
    "tests/session/test_session_goldens.py::test_context_through_session_matches_pi[real/pimono-before-compaction]",
    "tests/session/test_session_goldens.py::test_context_through_session_matches_pi[scale/gen-8mb-seed3]",
    "tests/session/test_session_goldens.py::test_tree_matches_pi[scale/gen-8mb-seed3]",
    "tests/summarizers/test_summarizer_http.py::test_request_bodies_have_pis_shape_for_every_golden_request",
    "tests/summarizers/test_summarizers.py::test_offline_is_linear_and_fast",
    "tests/summarizers/test_summarizers.py::test_offline_summarizes_every_corpus_file_deterministically",
)


def is_slow(nodeid: str) -> bool:
    """Whether ``nodeid`` (``path::function[param]``) is listed in ``SLOW_PATHS`` or ``SLOW_TESTS``:
    a listed function covers all its parameters; a listed ``function[param]`` only that one."""
    if nodeid.startswith(SLOW_PATHS):
        return True
    function = nodeid.split("[", 1)[0]
    return function in _SLOW_TESTS or nodeid in _SLOW_TESTS


_SLOW_TESTS = frozenset(SLOW_TESTS)


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Under ``-m "not slow"`` (``make test``), modules under ``SLOW_PATHS`` are not even imported
    (their imports: Ray, pyarrow, moto, Playwright, take seconds); otherwise pytest decides."""
    if config.getoption("markexpr", "") != "not slow":
        return None
    try:
        rel = collection_path.resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return None
    if collection_path.is_dir():
        rel += "/"
    return True if rel.startswith(SLOW_PATHS) else None


#: The ratio tests (speed and memory measured against a peer or a floor in the same run). On CI's
#: two noisy cores one measurement can land past its bound by chance (1.63x against 1.6x; 2.09x
#: against 2.0x), so a failing one is measured again, up to twice (pytest-rerunfailures): a real
#: regression fails all three, and each rerun is shown (``R``) in the summary.
RATIO_TESTS = ("tests/perf/test_",)
RATIO_RERUNS = 2


def is_ratio_test(nodeid: str) -> bool:
    """Whether ``nodeid`` is a ratio test (a ``tests/perf`` module named ``*ratio*``)."""
    path = nodeid.split("::", 1)[0]
    return path.startswith(RATIO_TESTS) and "ratio" in path.rsplit("/", 1)[-1]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)
        if is_ratio_test(item.nodeid):
            item.add_marker(pytest.mark.flaky(reruns=RATIO_RERUNS))


#: The variables ``_suite_home`` points at temporary folders for the whole run.
SUITE_HOME_VARS = (
    "HOME",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "PI_CODING_AGENT_DIR",
)


@pytest.fixture(scope="session", autouse=True)
def _suite_home(tmp_path_factory):
    """A temporary home for the whole run (set before any other fixture opens a session or
    starts a component): ``HOME``, the XDG folders below it, Pi's agent folder, and no
    ``PI_CODING_AGENT_SESSION_DIR`` (a developer's own would receive the sessions tests create)."""
    home = tmp_path_factory.mktemp("home")
    values = {
        "HOME": home,
        "XDG_CACHE_HOME": home / ".cache",
        "XDG_CONFIG_HOME": home / ".config",
        "XDG_DATA_HOME": home / ".local" / "share",
        "XDG_STATE_HOME": home / ".local" / "state",
        "PI_CODING_AGENT_DIR": home / ".pi" / "agent",
    }
    saved = {k: os.environ.get(k) for k in (*values, "PI_CODING_AGENT_SESSION_DIR")}
    os.environ.update({k: str(v) for k, v in values.items()})
    os.environ.pop("PI_CODING_AGENT_SESSION_DIR", None)
    yield home
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session", autouse=True)
def _suite_index_cache(_suite_home, tmp_path_factory):
    """The whole run's saved-index folder (``SESSIONTREE_INDEX_CACHE``), set before any fixture
    of a wider scope than a test opens a session (module fixtures run before function ones)."""
    old = os.environ.get("SESSIONTREE_INDEX_CACHE")
    os.environ["SESSIONTREE_INDEX_CACHE"] = str(tmp_path_factory.mktemp("suite-index-cache"))
    yield
    if old is None:
        os.environ.pop("SESSIONTREE_INDEX_CACHE", None)
    else:
        os.environ["SESSIONTREE_INDEX_CACHE"] = old


@pytest.fixture(autouse=True)
def _private_index_cache(_suite_index_cache, tmp_path_factory, monkeypatch):
    """Every test gets its own saved-index folder, so none reads or pollutes
    ``~/.cache/sessiontree`` or another test's saved indexes."""
    monkeypatch.setenv("SESSIONTREE_INDEX_CACHE", str(tmp_path_factory.mktemp("index-cache")))


@pytest.fixture(scope="module")
def ray_cluster():
    """A local Ray cluster (2 CPUs) for the test module that asks for it (``tests/support/ray_local.py``)."""
    from tests.support.ray_local import local_ray

    with local_ray(2):
        yield
