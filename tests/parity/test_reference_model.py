"""There is one reference model (tests/support/reference_model.py): the golden helpers and the property
tests share its loader, by-id index and branch walk, and the package ships none."""

from __future__ import annotations

import importlib
import json

import pytest

from tests.support import goldens, reference_model
from tests.support.reference_model import ReferenceCycle, ReferenceSession, index_by_id, load_values, walk

HEADER = json.dumps({"type": "session", "version": 3, "id": "h", "timestamp": "2026-01-01T00:00:00.000Z"}).encode()


def test_the_package_ships_no_reference_model():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("sessiontree._reference")


def test_the_golden_helpers_use_the_model():
    assert goldens.index_by_id is reference_model.index_by_id
    assert goldens.walk is reference_model.walk
    assert goldens.load_values is reference_model.load_values


def test_loading_follows_pis_load_entries_from_file():
    data = b"\n".join(
        [
            HEADER + b"\r",
            b"",
            b"   ",
            b"null",
            b"0",
            b"false",
            b'""',
            b"NaN",
            b"[1,2",
            b'{"type":"message","id":"a","parentId":null}\r',
            b'{"type":"session","id":"later"}',
            b'{"type":"label","id":"b","parentId":"a"}',
            b"7",
        ]
    )
    header, values = load_values(data)
    assert header["id"] == "h"
    assert values == [
        {"type": "message", "id": "a", "parentId": None},
        {"type": "session", "id": "later"},
        {"type": "label", "id": "b", "parentId": "a"},
        7,
    ]
    ref = ReferenceSession.load(data)
    assert ref is not None
    assert ref.entries == [values[0], values[2], 7]  # a later session value is not an entry
    assert ref.leaf_id is None  # the last entry (7) has no id
    assert load_values(b'{"type":"message","id":"x"}\n') is None  # no header first
    assert load_values(b"") is None


def test_the_by_id_index_and_the_walk():
    a = {"type": "message", "id": "a", "parentId": None}
    b = {"type": "message", "id": "b", "parentId": "a"}
    b2 = {"type": "message", "id": "b", "parentId": ""}  # last one with an id wins; "" is no parent
    n = {"type": "message", "id": 5, "parentId": "b"}  # non-string ids are never found by id
    by_id = index_by_id([a, b, {"type": "session", "id": "a"}, n, b2])
    assert by_id == {"a": a, "b": b2}
    assert walk(by_id, n) == [b2, n]
    assert walk(by_id, None) == []
    loop_a = {"id": "x", "parentId": "y"}
    loop_b = {"id": "y", "parentId": "x"}
    with pytest.raises(ReferenceCycle):
        walk(index_by_id([loop_a, loop_b]), loop_a)
