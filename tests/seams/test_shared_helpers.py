"""Small helpers that used to be written twice, now with one home each: ``hooks._camel``
(also used by ``rpc.py``), ``fleet._rows._num`` (also used by ``fleet._compact``) and
``cli._pos_int`` (also used by ``cli/fleet.py``, with its own text for a negative value)."""

from __future__ import annotations

import argparse

import pytest

from sessiontree import cli, hooks, rpc
from sessiontree.cli import fleet as _fleet_cli
from sessiontree.fleet import _compact, _rows


def test_one_home_each():
    assert rpc._camel is hooks._camel
    assert _compact._num is _rows._num
    assert _fleet_cli._pos_int.func is cli._pos_int


@pytest.mark.parametrize(
    ("snake", "camel"),
    [
        ("tokens_before", "tokensBefore"),
        ("first_kept_entry_id", "firstKeptEntryId"),
        ("summary", "summary"),
        ("", ""),
        ("_private", "Private"),
        ("a__b", "aB"),
        ("trailing_", "trailing"),
    ],
)
def test_camel(snake, camel):
    assert hooks._camel(snake) == camel


def test_camel_as_the_two_callers_use_it():
    # hooks: a hook result may spell a field either way
    assert hooks._field({"tokensBefore": 5}, "tokens_before") == 5
    assert hooks._field({"tokens_before": 6, "tokensBefore": 5}, "tokens_before") == 6


@pytest.mark.parametrize(("value", "out"), [(None, None), (3, 3.0), (2.5, 2.5), (True, 1.0), ("7", 7.0)])
def test_num(value, out):
    got = _rows._num(value)
    assert got == out and (got is None or type(got) is float)


def _err(parse, text: str) -> str:
    with pytest.raises(argparse.ArgumentTypeError) as info:
        parse(text)
    return str(info.value)


@pytest.mark.parametrize("parse", [cli._pos_int, _fleet_cli._pos_int])
def test_pos_int_accepts_positive_integers(parse):
    assert parse("1") == 1
    assert parse(" 42 ") == 42
    assert parse("+7") == 7


@pytest.mark.parametrize("parse", [cli._pos_int, _fleet_cli._pos_int])
def test_pos_int_shared_errors(parse):
    assert _err(parse, "x") == "not an integer: 'x'"
    assert _err(parse, "1.5") == "not an integer: '1.5'"
    assert _err(parse, "0") == "must be > 0"


def test_pos_int_negative_text_differs_by_cli():
    assert _err(cli._pos_int, "-3") == "must be >= 0, not -3"
    assert _err(_fleet_cli._pos_int, "-3") == "must be > 0"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["compact", "x.jsonl", "--max-tokens", "-3"], "argument --max-tokens: must be >= 0, not -3"),
        (["compact", "x.jsonl", "--max-tokens", "0"], "argument --max-tokens: must be > 0"),
        (["compact-all", "d", "--context-window", "-3"], "argument --context-window: must be > 0"),
        (["stats", "d", "--parquet", "o", "--workers", "two"], "argument --workers: not an integer: 'two'"),
    ],
)
def test_pos_int_through_the_parsers(capsys, argv, message):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err
