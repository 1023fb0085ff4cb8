"""The entry types, one row each: what each layer does with a type, in one table.

The Rust core has its own list (``TYPE_NAMES`` in rust/src/index/codes.rs: the types with fixed
codes, ``sessiontree.entries.CORE_TYPE_NAMES``) and its projection of them (rust/src/entry_kind.rs:
what the cut-point search, the HTML digest and the fleet rows do with each);
``tests/pi_rules/test_entry_types.py`` checks that the two name the same types and that every
layer handles each row as it says (context building, content checks, usage sums, the core's
projection, the ``Session`` method that appends it, the CLI preview, the HTML view), and
``cargo test`` reads this table to check the projection too. A light module of the
bottom floor: it imports nothing. CONTRIBUTING.md lists the steps to add a type.
"""

# No ``from __future__ import annotations``: the NamedTuple's field annotations stay objects,
# not strings ``typing`` compiles into ForwardRefs at import (a light import).

from typing import NamedTuple

__all__ = ["EntryType", "ENTRY_TYPES", "CONTEXT_TYPES", "CONTENT_TYPES", "USAGE_TYPES", "entry_type_row"]


class EntryType(NamedTuple):
    """One entry type (the entry's ``type``) and what the package does with it."""

    name: str
    #: contributes messages to the model context (Pi ``buildSessionContext``:
    #: :func:`sessiontree.context.entry_to_context_messages`)
    context: bool
    #: its content reaches context building, estimates and summary serialization (what
    #: :func:`sessiontree.validation.entry_content_error` checks)
    content: bool
    #: Pi's ``get_session_stats`` sums a usage it carries (:mod:`sessiontree.usage`)
    usage: bool
    #: the :class:`~sessiontree.Session` method that appends one (None: we never write it)
    appended_by: str | None
    #: the CLI's one-line preview shows something of it (``sessiontree.cli.entry_preview``)
    preview: bool


ENTRY_TYPES: tuple[EntryType, ...] = (
    EntryType("message", context=True, content=True, usage=True, appended_by="append_message", preview=True),
    EntryType(
        "model_change", context=False, content=False, usage=False, appended_by="append_model_change", preview=True
    ),
    EntryType(
        "thinking_level_change",
        context=False,
        content=False,
        usage=False,
        appended_by="append_thinking_level_change",
        preview=True,
    ),
    EntryType("compaction", context=True, content=True, usage=True, appended_by="append_compaction", preview=True),
    EntryType(
        "branch_summary", context=True, content=True, usage=True, appended_by="branch_with_summary", preview=True
    ),
    EntryType("custom", context=False, content=False, usage=False, appended_by="append_custom_entry", preview=True),
    EntryType(
        "custom_message",
        context=True,
        content=True,
        usage=False,
        appended_by="append_custom_message_entry",
        preview=True,
    ),
    EntryType("label", context=False, content=False, usage=False, appended_by="append_label_change", preview=True),
    EntryType(
        "session_info", context=False, content=False, usage=False, appended_by="append_session_info", preview=True
    ),
    EntryType(
        "context_edit", context=False, content=False, usage=False, appended_by="append_context_edit", preview=False
    ),
    EntryType("usage", context=False, content=False, usage=True, appended_by=None, preview=False),
)

_BY_NAME = {t.name: t for t in ENTRY_TYPES}

#: Types that contribute context messages, in the table's order.
CONTEXT_TYPES: tuple[str, ...] = tuple(t.name for t in ENTRY_TYPES if t.context)
#: Types whose content Pi's context building, estimates and serialization read.
CONTENT_TYPES: tuple[str, ...] = tuple(t.name for t in ENTRY_TYPES if t.content)
#: Types whose usage Pi's stats sum.
USAGE_TYPES: tuple[str, ...] = tuple(t.name for t in ENTRY_TYPES if t.usage)


def entry_type_row(name: object) -> EntryType | None:
    """The row of the type ``name``, or None (an unknown type: every layer treats it as Pi does
    an entry it has no rule for)."""
    return _BY_NAME.get(name) if isinstance(name, str) else None
