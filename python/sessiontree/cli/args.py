"""argparse value types shared by every subcommand (the fleet's too) and the commands'
help epilogs."""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Sequence

if TYPE_CHECKING:
    from .commands import RegisteredSubparsers


def documented_parser(
    sub: RegisteredSubparsers,
    name: str,
    *,
    description: str,
    epilog: str,
    parents: Sequence[argparse.ArgumentParser] = (),
) -> argparse.ArgumentParser:
    """The subparser of a command with a written help text, its ``epilog`` shown as written.

    ``epilog`` (its rules and exit codes) keeps its lines (``RawDescriptionHelpFormatter``);
    ``sub`` is :class:`~sessiontree.cli.commands.RegisteredSubparsers`, which gives the help line
    of the command's registry row. Every such command (compact, navigate, stats, compact-all,
    scrub, scrub-all, otel, convert) is made here."""
    return sub.add_parser(
        name,
        parents=list(parents),
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def progress_flags(p: argparse.ArgumentParser) -> None:
    """Add ``--progress`` and ``--no-progress``: the store-wide commands' progress-bar switches.

    The bar shows when stderr is a terminal, with ``--progress`` always, with ``--no-progress``
    never (:func:`sessiontree.cli.render.progress_wanted`)."""
    p.add_argument("--progress", action="store_true", help="a progress bar even when stderr is not a terminal")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def ray_flags(p: argparse.ArgumentParser, engine_help: str | None = None) -> None:
    """Add ``--engine {local,ray}`` (default local; help ``engine_help``) and ``--address ADDR``."""
    p.add_argument("--engine", choices=("local", "ray"), default="local", help=engine_help)
    p.add_argument("--address", metavar="ADDR", help="a running Ray cluster's address (engine ray)")


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _nonneg_int(text: str) -> int:
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}")
    return value


def _pos_int(text: str, negative: str | None = None) -> int:
    """argparse type for an integer > 0, shared by both CLIs (``cli/fleet.py`` imports it).

    Errors: ``not an integer: 'x'``; ``must be > 0`` for 0; for a negative value ``negative``
    when given, else this CLI's ``must be >= 0, not -3`` (the text of :func:`_nonneg_int`).
    """
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, not {value}" if negative is None else negative)
    if value == 0:
        raise argparse.ArgumentTypeError("must be > 0")
    return value


def _nonneg_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value >= 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, not {text}")
    return value


_NAVIGATE_EPILOG = """Selecting a user message moves the leaf to its parent and prints the message as editor text
(Pi puts it back in the editor); selecting anything else moves the leaf to it.

Pi's file format stores no leaf pointer: a session reopens at its last entry. So a bare move
is not persisted, and navigate refuses it (exit 1) unless something is written: --summarize
appends a branch_summary of the abandoned branch at the new position, --label TEXT appends a
label on the target (either becomes the last entry, so Pi reopens there). --dry-run shows
the move and writes nothing.

exit codes: 0 done; 1 nothing would be written (no --summarize/--label/--dry-run);
2 unknown id, bad file, locked file, summarizer misconfigured or its request failed"""

_COMPACT_EPILOG = """A real run appends one compaction entry (Pi's /compact): the history before the cut point is
summarized, the last --keep-recent-tokens of context is kept verbatim. --dry-run prints the
cut point and what would be summarized, and writes nothing.

Summarizers: offline (default; extractive, no model, no network), openai (any OpenAI-compatible
chat-completions server: $OPENAI_API_KEY, $OPENAI_BASE_URL, $OPENAI_MODEL), anthropic
($ANTHROPIC_API_KEY, $ANTHROPIC_BASE_URL, $ANTHROPIC_MODEL). --model/--base-url override the
environment. Progress goes to stderr when it is a terminal, or with --progress.

exit codes: 0 done; 1 nothing to compact (session too small, or already compacted);
2 bad file, locked file, summarizer misconfigured or its request failed"""
