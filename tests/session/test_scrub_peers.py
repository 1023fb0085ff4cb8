"""The scrubber against the peers on their own samples (gitleaks' rule tests, our labelled set).

A small draw of tests/support/peer_samples.json (one sample per gitleaks rule and look-alike
set) and of tests/support/secrets.py, planted in every place a session holds text; the full
comparison is benches/scrub_compare.py.
"""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.support.peer_compare import build_session, compare, gitleaks_binary, load_samples, ours, totals


def test_ours_on_the_peers_samples_in_every_place_of_a_session(tmp_path):
    """Fast: ours alone on one sample per gitleaks rule and 2 per kind of our set."""
    samples = load_samples(per_rule=1, seed=31)
    path = tmp_path / "s.jsonl"
    where = build_session(samples, path)
    found, tree_ok = ours(path)
    assert tree_ok
    tp = [line in found for s, line in zip(samples, where) if s["label"] == "tp"]
    assert sum(tp) / len(tp) >= 0.97, (sum(tp), len(tp))
    per_kind: dict[str, list[bool]] = defaultdict(list)
    for s, line in zip(samples, where):
        if s["label"] == "tp" and s["rule"].startswith("ours:"):
            per_kind[s["rule"]].append(line in found)
    assert {k for k, v in per_kind.items() if not all(v)} == set()
    flagged = [
        s["text"]
        for s, line in zip(samples, where)
        if s["label"] == "fp" and s["rule"].startswith("ours:") and line in found
    ]
    assert flagged == []


@pytest.fixture(scope="module")
def result(tmp_path_factory):
    """The comparison with detect-secrets (and gitleaks when present): slow (detect-secrets)."""
    pytest.importorskip("detect_secrets")
    return compare(load_samples(per_rule=1, seed=30), tmp_path_factory.mktemp("peers"))


def _rows(result, label):
    for key, row in result["per"].items():
        rule, lab = key.rsplit("|", 1)
        if lab == label:
            yield rule, row


@pytest.mark.slow
def test_recall_is_at_least_each_peers_on_every_kind(result):
    worse = [
        (rule, peer, row[peer], row["ours"])
        for rule, row in _rows(result, "tp")
        for peer in result["tools"][1:]
        if row[peer] > row["ours"]
    ]
    assert worse == []
    t = totals(result)["tp"]
    assert t["ours"] / t["n"] >= 0.97, t


@pytest.mark.slow
def test_false_alarms_are_no_more_than_the_peers_and_none_on_our_look_alikes(result):
    t = totals(result)["fp"]
    for peer in result["tools"][1:]:
        assert t["ours"] <= t[peer], t
    ours = [(rule, row["ours"]) for rule, row in _rows(result, "fp") if rule.startswith("ours:") and row["ours"]]
    assert ours == []


@pytest.mark.slow
def test_the_tree_is_unchanged_in_the_compared_session(result):
    assert result["tree_ok"]


@pytest.mark.slow
@pytest.mark.skipif(gitleaks_binary() is None, reason="no gitleaks binary (no PyPI wheel ships it)")
def test_gitleaks_is_compared_when_present(result):
    assert "gitleaks" in result["tools"]
