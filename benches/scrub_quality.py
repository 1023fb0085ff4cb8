"""Recall and false positives of the secret scrubber on the labelled set (issue 20).

    python benches/scrub_quality.py [--per-kind N] [--seed S] [--json]

The set (tests/support/secrets.py): synthetic, format-valid secrets of every kind the rules
name and hard negatives (look-alikes), planted into every kind of string of the real corpus
sessions (tests/corpus/real/). Prints recall overall, per kind and per kind of string, the
false-positive rate overall and per look-alike kind, and whether every scrubbed file kept its
tree. Exit 1 when recall < 0.98 (overall or for a kind) or false positives > 1%.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.secrets import evaluate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-kind", type=int, default=40, help="samples per kind (default 40)")
    ap.add_argument("--seed", type=int, default=20)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    r = evaluate(seed=a.seed, per_kind=a.per_kind)
    worst = min(ok / n for ok, n in r["per_kind"].values())
    bad = r["recall"] < 0.98 or worst < 0.98 or r["false_positive_rate"] > 0.01 or not r["tree_ok"]
    if a.json:
        doc = {k: v for k, v in r.items() if k not in ("misses", "false_positives")}
        doc["misses"] = [(p["label"], p["slot"]) for p in r["misses"]]
        doc["false_positives"] = [(p["label"], p["slot"]) for p in r["false_positives"]]
        print(json.dumps(doc, indent=2))
        return int(bad)
    print(
        f"positives {r['positives']} ({len(r['per_kind'])} kinds), negatives {r['negatives']} ({len(r['per_negative'])} kinds)"
    )
    print(f"recall {r['recall']:.4f} (lowest per kind {worst:.4f}); false positives {r['false_positive_rate']:.4%}")
    print(f"tree, ids and leaf kept in every file: {r['tree_ok']}")
    print("\nrecall per kind:")
    for k, (ok, n) in sorted(r["per_kind"].items()):
        print(f"  {k:28s} {ok:4d}/{n:<4d} {ok / n:.3f}")
    print("\nrecall per kind of string:")
    for k, (ok, n) in sorted(r["per_slot"].items()):
        print(f"  {k:28s} {ok:4d}/{n:<4d} {ok / n:.3f}")
    print("\nfalse positives per look-alike:")
    for k, (fp, n) in sorted(r["per_negative"].items()):
        print(f"  {k:28s} {fp:4d}/{n:<4d}")
    for p in r["misses"]:
        print(f"  miss: {p['label']} in {p['slot']} ({p['file']}:{p['line']} {p['pointer'][:60]})")
    for p in r["false_positives"]:
        print(f"  false positive: {p['label']} in {p['slot']} ({p['file']}:{p['line']})")
    return int(bad)


if __name__ == "__main__":
    sys.exit(main())
