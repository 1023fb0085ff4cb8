"""No parameter of the public API is typed a bare ``Any`` (issue 33 item 12).

The public API: what ``sessiontree``, ``sessiontree.fleet``, ``sessiontree.convert`` and
``sessiontree.otel`` export in ``__all__``, functions and the public methods (``__init__``
included) of the classes. A parameter annotated ``Any`` (or ``Any | None``) says nothing to a
caller or to ``mypy --strict`` in their code; give it its real type. The lists below are what is
left: parameters that take any JSON value as Pi stores it (hostile files included), and the
ones still to type. Each entry must still be a bare ``Any``, so the lists only shrink.
"""

from __future__ import annotations

import importlib
import inspect
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

MODULES = ("sessiontree", "sessiontree.fleet", "sessiontree.convert", "sessiontree.otel")
_BARE = {"Any", "typing.Any", "Any | None", "None | Any", "Optional[Any]", "typing.Optional[typing.Any]"}

#: Parameters that take any JSON value (Pi's data: ids, details, content and messages as a file
#: holds them, whatever their type).
JSON_VALUES = {
    "sessiontree.CompactionResult.__init__(details)",
    "sessiontree.EntryNotFoundError.of(entry_id)",
    "sessiontree.PiError.at_entry(entry_id)",
    "sessiontree.Session.append_compaction(details)",
    "sessiontree.Session.append_custom_entry(data)",
    "sessiontree.Session.append_custom_message_entry(content)",
    "sessiontree.Session.append_custom_message_entry(details)",
    "sessiontree.Session.branch_with_summary(details)",
    "sessiontree.Session.entry_index(entry_id)",
    "sessiontree.TreeNode.__init__(label)",
    "sessiontree.estimate_tokens(message)",
}

#: Still to type (a summarizer: ``Summarizer`` lives beside asyncio, which ``import sessiontree``
#: does not load, and ``typing.get_type_hints(Session.compact)`` must resolve; an OTel mapper,
#: an exception, a compaction's preparation and token counts, a pyarrow.Table: pyarrow is an
#: extra, and the hints must resolve without it).
NOT_YET = {
    "sessiontree.AutoCompactor.arecover_from_overflow(error)",
    "sessiontree.AutoCompactor.recover_from_overflow(error)",
    "sessiontree.CompactionResult.__init__(estimated_tokens_after)",
    "sessiontree.CompactionResult.__init__(estimated_tokens_before)",
    "sessiontree.CompactionResult.__init__(preparation)",
    "sessiontree.CompactionResult.__init__(tokens_before)",
    "sessiontree.Session.acompact(summarizer)",
    "sessiontree.Session.anavigate_tree(summarizer)",
    "sessiontree.Session.compact(summarizer)",
    "sessiontree.Session.navigate_tree(summarizer)",
    "sessiontree.Session.append_compaction(expected_leaf_id)",
    "sessiontree.Session.otel_feed(mapper)",
    "sessiontree.Session.otel_finish_chunk(mapper)",
    "sessiontree.Session.otel_mapper(meta)",
    "sessiontree.fleet.write_parquet(table)",
}


def _bare(annotation: Any) -> bool:
    if annotation is typing.Any:
        return True
    return isinstance(annotation, str) and annotation.strip() in _BARE


def _public_callables(module: types.ModuleType) -> Iterator[tuple[str, Callable[..., Any]]]:
    for name in module.__all__:
        obj = getattr(module, name)
        if inspect.isfunction(obj):
            yield f"{module.__name__}.{name}", obj
        elif inspect.isclass(obj):
            for member in dir(obj):
                if member.startswith("_") and member != "__init__":
                    continue
                raw = inspect.getattr_static(obj, member)
                fn = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
                if inspect.isfunction(fn) and fn.__module__.startswith(module.__name__.split(".")[0]):
                    yield f"{module.__name__}.{name}.{member}", fn


def bare_any_parameters(modules: list[types.ModuleType]) -> set[str]:
    """``module.name(param)`` for each public parameter annotated a bare ``Any``."""
    found = set()
    for module in modules:
        for qual, fn in _public_callables(module):
            for p in inspect.signature(fn).parameters.values():
                if _bare(p.annotation):
                    found.add(f"{qual}({p.name})")
    return found


def test_no_public_parameter_is_a_bare_any_but_the_listed_ones():
    found = bare_any_parameters([importlib.import_module(m) for m in MODULES])
    assert found - JSON_VALUES - NOT_YET == set(), "give these their real types"
    assert (JSON_VALUES | NOT_YET) - found == set(), "typed now: take them off the lists"


def test_the_check_finds_a_planted_any(tmp_path):
    planted = types.ModuleType("sessiontree_planted")
    exec(
        "from __future__ import annotations\n"
        "from typing import Any\n"
        "__all__ = ['load', 'Reader']\n"
        "def load(source: Any, n: int, *, fs: Any | None = None) -> Any: ...\n"
        "class Reader:\n"
        "    def __init__(self, data: bytes, hint: Any) -> None: ...\n"
        "    def read(self, size: int = -1) -> bytes: ...\n",
        planted.__dict__,
    )
    for fn in (planted.load, planted.Reader.__init__, planted.Reader.read):
        fn.__module__ = "sessiontree_planted"
    assert bare_any_parameters([planted]) == {
        "sessiontree_planted.load(source)",
        "sessiontree_planted.load(fs)",
        "sessiontree_planted.Reader.__init__(hint)",
    }


def test_the_types_given_here_resolve_at_runtime():
    """``typing.get_type_hints`` (pydantic, typeguard, docs tools) resolves the parameters typed
    for this list: their names are importable where the functions live, without the extras."""
    import sessiontree
    import sessiontree.convert
    import sessiontree.fleet
    import sessiontree.otel

    for fn in (
        sessiontree.Session.from_bytes,
        sessiontree.Session.search,
        sessiontree.Session.find_cut_point,
        sessiontree.fleet.entries_table,
        sessiontree.fleet.scrub_sessions,
        sessiontree.fleet.compact_sessions,
        sessiontree.fleet.resolve_source,
        sessiontree.convert.convert_all,
        sessiontree.otel.export,
    ):
        hints = typing.get_type_hints(fn)
        assert all(h is not typing.Any for name, h in hints.items() if name != "return"), fn
