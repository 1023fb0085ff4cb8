"""The columns of the fleet's tables, one list each: the stats table's Arrow schema
(:func:`sessiontree.fleet.stats_schema`) is built from :data:`STATS_COLUMNS`, whichever path
computes the rows (the Python rows of ``_rows.py`` or the core), and
``tests/fleet/test_columns.py`` checks the rows, the schema's docstring and docs/fleet.md
against it. A light module: no pyarrow, no Session (the problem kinds are the core's, through
:mod:`sessiontree.entries`, which ``import sessiontree`` loads anyway). CONTRIBUTING.md lists
the steps to add a column."""

from __future__ import annotations

#: The scanner's problem kinds, one ``problems_<kind>`` column each (plus ``problems_other``):
#: the core's list (``rust/src/index/problems.rs``, ``_core.PROBLEM_KINDS``).
from ..entries import PROBLEM_KINDS

__all__ = ["ENTRY_COLUMNS", "PROBLEM_KINDS", "ROLES", "STATS_COLUMNS", "column_names", "core_entry_columns"]

#: Message roles counted in their own column: (Pi's role, the column's suffix).
ROLES = (
    ("user", "user"),
    ("assistant", "assistant"),
    ("toolResult", "tool_result"),
    ("bashExecution", "bash_execution"),
    ("custom", "custom"),
)

#: The stats table's columns in order: (name, type), the type one of ``string``, ``binary``,
#: ``int64``, ``float64``, ``bool``, ``timestamp`` (UTC ms).
STATS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("path", "string"),
    ("path_bytes", "binary"),
    ("session_id", "string"),
    ("cwd", "string"),
    ("parent_session", "string"),
    ("parent_session_id", "string"),
    ("name", "string"),
    ("created", "timestamp"),
    ("modified", "timestamp"),
    ("file_modified", "timestamp"),
    ("bytes", "int64"),
    ("entries", "int64"),
    ("distinct_ids", "int64"),
    ("messages", "int64"),
    *[(f"messages_{col}", "int64") for _, col in ROLES],
    ("messages_other", "int64"),
    ("tool_calls", "int64"),
    ("compactions", "int64"),
    ("branch_summaries", "int64"),
    ("labels", "int64"),
    ("leaves", "int64"),
    ("leaf_id", "string"),
    ("leaf_type", "string"),
    ("active_path_length", "int64"),
    ("context_messages", "int64"),
    ("context_tokens", "float64"),
    ("should_compact", "bool"),
    ("context_window", "int64"),
    ("context_error", "string"),
    ("input_tokens", "float64"),
    ("output_tokens", "float64"),
    ("cache_read_tokens", "float64"),
    ("cache_write_tokens", "float64"),
    ("total_tokens", "float64"),
    ("cost", "float64"),
    ("summary_tokens", "float64"),
    ("summary_cost", "float64"),
    ("problems", "int64"),
    *[(f"problems_{k}", "int64") for k in PROBLEM_KINDS],
    ("problems_other", "int64"),
    ("needs_migration", "bool"),
    ("source_format", "string"),
    ("error_kind", "string"),
    ("error", "string"),
)


def column_names(columns: tuple[tuple[str, str], ...] = STATS_COLUMNS) -> list[str]:
    """The names of ``columns``, in order."""
    return [c[0] for c in columns]


#: The entry table's columns in order (:func:`sessiontree.fleet.entries_schema` is built from
#: it): (name, type as in :data:`STATS_COLUMNS`, who makes it): ``core`` for a column the
#: core makes (``rust/src/columns.rs``, asked for by name through ``Session.fleet_columns``,
#: whose ``FLEET_ENTRY_COLUMNS`` must be these names), ``job`` for one the fleet job adds
#: (``on_active_path`` from the core's bits). With ``scrub``, a ``secrets`` column follows.
ENTRY_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("path", "string", "job"),
    ("path_bytes", "binary", "job"),
    ("session_id", "string", "job"),
    ("entry_index", "int64", "job"),
    ("entry_id", "string", "core"),
    ("parent_id", "string", "core"),
    ("type", "string", "core"),
    ("role", "string", "core"),
    ("timestamp", "timestamp", "core"),
    ("line", "int64", "core"),
    ("offset", "int64", "core"),
    ("bytes", "int64", "core"),
    ("tokens", "float64", "core"),
    ("input_tokens", "float64", "core"),
    ("output_tokens", "float64", "core"),
    ("cache_read_tokens", "float64", "core"),
    ("cache_write_tokens", "float64", "core"),
    ("cost", "float64", "core"),
    ("on_active_path", "bool", "job"),
    ("label", "string", "core"),
    ("error_kind", "string", "job"),
    ("error", "string", "job"),
)


def core_entry_columns() -> tuple[str, ...]:
    """The entry table's columns the core makes, in :data:`ENTRY_COLUMNS` order."""
    return tuple(name for name, _kind, by in ENTRY_COLUMNS if by == "core")
