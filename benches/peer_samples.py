"""Extracts the peers' test samples into tests/support/peer_samples.json (test data, not code).

    python benches/peer_samples.py GITLEAKS_CHECKOUT [--detect-secrets DS_CHECKOUT]
        [--out tests/support/peer_samples.json]

GITLEAKS_CHECKOUT: a checkout of gitleaks' repository. Reads its rule tests
(cmd/generate/config/rules/*.go): each rule's true positives (``tps``: literal strings, and
``utils.GenerateSampleSecrets(identifier, secret)``, which places one secret in the contexts of
cmd/generate/config/utils/generate.go: INI, JSON, multi-line XML, YAML, C#, Go, Java, Kotlin,
PHP, Python, ``System.setProperty``, logstash, Make) and its false positives (``fps``). A
secret built with ``secrets.NewSecret(pattern)`` is drawn here from that pattern with a fixed
seed, as gitleaks' tests draw theirs. Every sample keeps its source (file, rule id, commit).
Nothing of gitleaks' code is kept: only the sample strings.

DS_CHECKOUT: a checkout of detect-secrets' repository. Reads its plugin tests
(tests/plugins/*_test.py) without running them: each ``@pytest.mark.parametrize("<payload>,
should_flag", [...])`` whose cases are literals gives samples (``should_flag`` True: a true
positive, False: a look-alike), rule ``ds:<plugin>``. Left out: ``ip_public`` (a public IP
address is not a credential) and the cases built by code (``.format``: the keyword plugin's,
whose labels depend on the file type the test names).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
from pathlib import Path

# The contexts of gitleaks' GenerateSampleSecrets (cmd/generate/config/utils/generate.go),
# {i}: the identifier, {I}: upper case, {s}: the secret.
CONTEXTS = {
    "ini - quoted1": '{i}Token="{s}"',
    "ini - quoted2": '{i}Token = "{s}"',
    "ini - unquoted1": "{i}Token={s}",
    "ini - unquoted2": "{i}Token = {s}",
    "json - string": '{\n    "{i}_token": "{s}"\n}',
    "json - escaped newline in string": '{"config.ini": "{I}_TOKEN={s}\\nBACKUP_ENABLED=true"}',
    "xml - element multiline": "<{i}Token>\n    {s}\n</{i}Token>",
    "yaml - singleline - unquoted": "{i}_token: {s}",
    "yaml - singleline - single quote": "{i}_token: '{s}'",
    "yaml - singleline - double quote": '{i}_token: "{s}"',
    "C#": 'string {i}Token = "{s}";',
    "go - normal": 'var {i}Token string = "{s}"',
    "go - short": '{i}Token := "{s}"',
    "go - backticks": "{i}Token := `{s}`",
    "java": 'String {i}Token = "{s}";',
    "kotlin - notype": 'var {i}Token = "{s}"',
    "php - string concat": '${i}Token .= "{s}"',
    "python - single quote": "{i}Token = '{s}'",
    "python - double quote": '{i}Token = "{s}"',
    "misc - comma operator": 'System.setProperty("{I}_TOKEN", "{s}")',
    "logstash": '  "{i}Token" => "{s}"',
    "make - recursive assignment": '{i}_TOKEN = "{s}"',
    "make - simple assignment": '{i}_TOKEN := "{s}"',
    "make - shell assignment": '{i}_TOKEN ::= "{s}"',
    "make - evaluated shell assignment": '{i}_TOKEN :::= "{s}"',
    "make - conditional assignment": '{i}_TOKEN ?= "{s}"',
}

UTILS = {
    "Numeric": "[0-9]{%s}",
    "Hex": "[a-f0-9]{%s}",
    "AlphaNumeric": "[a-z0-9]{%s}",
    "AlphaNumericExtendedShort": "[a-z0-9_-]{%s}",
    "AlphaNumericExtended": "[a-z0-9=_-]{%s}",
    "AlphaNumericExtendedLong": "[a-z0-9/=_+-]{%s}",
}

TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|`[^`]*`|[A-Za-z_][A-Za-z0-9_.]*|\.\.\.|[(){}\[\],+]|\s+|//[^\n]*|.', re.S)


def go_string(tok: str) -> str:
    if tok.startswith("`"):
        return tok[1:-1]
    return json.loads(tok) if "\\x" not in tok else bytes(tok[1:-1], "utf-8").decode("unicode_escape")


def draw(pattern: str, rng: random.Random) -> str | None:
    """A string matching a simple pattern: literals, classes `[...]`, `{n}`, `{n,m}`, `+`."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "[":
            j = pattern.index("]", i + 2)
            body = pattern[i + 1 : j].replace("\\-", "\x00").replace("\\/", "/").replace("\\+", "+")
            body = body.replace("\\w", "a-zA-Z0-9_").replace("\\d", "0-9").replace("\\.", ".")
            chars: list[str] = []
            k = 0
            while k < len(body):
                if k + 2 < len(body) and body[k + 1] == "-":
                    chars += [chr(x) for x in range(ord(body[k]), ord(body[k + 2]) + 1)]
                    k += 3
                else:
                    chars.append("-" if body[k] == "\x00" else body[k])
                    k += 1
            i = j + 1
            lo = hi = 1
            m = re.match(r"\{(\d+)(?:,(\d+))?\}|\+", pattern[i:])
            if m:
                if m.group(0) == "+":
                    lo, hi = 1, 8
                else:
                    lo = int(m.group(1))
                    hi = int(m.group(2)) if m.group(2) else lo
                i += len(m.group(0))
            out.append("".join(rng.choice(chars) for _ in range(rng.randint(lo, hi))))
        elif c == "\\" and i + 1 < len(pattern):
            out.append(pattern[i + 1])
            i += 2
        elif c in "(|)?*{":
            return None
        else:
            m = re.match(r"\{(\d+)(?:,(\d+))?\}", pattern[i + 1 :])
            if m:
                lo = int(m.group(1))
                out.append(c * rng.randint(lo, int(m.group(2)) if m.group(2) else lo))
                i += 1 + len(m.group(0))
            else:
                out.append(c)
                i += 1
    return "".join(out)


class Expr:
    """Evaluates the Go expressions of the rule tests that build strings."""

    def __init__(self, toks: list[str], rng: random.Random):
        self.t = [x for x in toks if not x.isspace() and not x.startswith("//")]
        self.i = 0
        self.rng = rng

    def peek(self) -> str | None:
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self) -> str:
        self.i += 1
        return self.t[self.i - 1]

    def skip_call(self) -> None:
        depth = 0
        while self.peek() is not None:
            x = self.take()
            if x in "([{":
                depth += 1
            elif x in ")]}":
                depth -= 1
                if depth == 0:
                    return

    def value(self) -> str | None:
        """A `+`-joined string, or None (and the tokens skipped) when not evaluable."""
        parts: list[str | None] = [self.atom()]
        while self.peek() == "+":
            self.take()
            parts.append(self.atom())
        return None if any(p is None for p in parts) else "".join(parts)  # type: ignore[arg-type]

    def atom(self) -> str | None:
        x = self.peek()
        if x is None:
            return None
        if x[0] in '"`':
            return go_string(self.take())
        if x == "secrets.NewSecret":
            self.take()
            self.take()  # (
            pat = self.pattern()
            if self.peek() == ")":
                self.take()
            return draw(pat, self.rng) if pat else None
        if x.startswith("utils.") and x[6:] in UTILS:
            pat = self.pattern()
            return draw(pat, self.rng) if pat else None
        if x == "strings.Repeat":
            self.take()
            self.take()
            s = self.value()
            self.take()  # ,
            n = self.take()
            self.take()
            return s * int(n) if s is not None and n.isdigit() else None
        if x[0].isalpha():
            self.take()
            if self.peek() == "(":
                self.i -= 1
                self.skip_call()
            return None
        self.take()
        return None

    def pattern(self) -> str | None:
        x = self.peek()
        if x is None:
            return None
        if x[0] in '"`':
            parts = [go_string(self.take())]
            while self.peek() == "+":
                self.take()
                p = self.pattern()
                if p is None:
                    return None
                parts.append(p)
            return "".join(parts)
        if x.startswith("utils.") and x[6:] in UTILS:
            f = self.take()[6:]
            self.take()
            arg = go_string(self.take())
            self.take()
            return UTILS[f] % arg
        if x.startswith("utils.Hex8_4_4_4_12"):
            self.take()
            self.take()
            self.take()
            return "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
        self.skip_call() if self.t[self.i + 1 : self.i + 2] == ["("] else self.take()
        return None


def block(toks: list[str], start: int) -> tuple[int, int]:
    """The tokens of the bracketed group opening at or after `start`."""
    i = start
    while toks[i] not in "({":
        i += 1
    depth = 0
    for j in range(i, len(toks)):
        if toks[j] in "({[":
            depth += 1
        elif toks[j] in ")}]":
            depth -= 1
            if depth == 0:
                return i + 1, j
    return i + 1, len(toks)


def elements(toks: list[str]) -> list[list[str]]:
    out: list[list[str]] = [[]]
    depth = 0
    for x in toks:
        if x in "({[":
            depth += 1
        elif x in ")}]":
            depth -= 1
        if x == "," and depth == 0:
            out.append([])
        else:
            out[-1].append(x)
    return [e for e in out if any(not y.isspace() for y in e)]


def extract(src: str, rng: random.Random) -> list[dict]:
    toks = TOKEN.findall(src)
    rule_id = None
    out: list[dict] = []
    i = 0
    while i < len(toks):
        x = toks[i]
        if x == "RuleID":
            j = i + 1
            while toks[j].isspace() or toks[j] == ":":
                j += 1
            if toks[j][0] == '"':
                rule_id = go_string(toks[j])
        if x in ("tps", "fps") and rule_id:
            label = "tp" if x == "tps" else "fp"
            j = i + 1
            while toks[j].isspace():
                j += 1
            if toks[j] in (":=", "=") or toks[j] == ":" or toks[j] == "=":
                # tps := []string{...} | tps = append(tps, ...) | tps := utils.GenerateSampleSecrets(...)
                rest = "".join(toks[j : j + 12])
                if "GenerateSampleSecrets" in rest or "append(" in rest:
                    a, b = block(toks, j)
                    inner = toks[a:b] if "append(" in rest else toks[j : b + 1]
                    out += samples_in(inner, label, rule_id, rng)
                    i = b
                    continue
                if "[]string" in rest:
                    a, b = block(toks, toks.index("{", j))
                    for el in elements(toks[a:b]):
                        v = Expr(el, rng).value()
                        if v:
                            out.append(_sample(rule_id, label, v, el))
                    i = b
                    continue
        i += 1
    return out


def _sample(rule_id: str, label: str, text: str, el: list[str]) -> dict:
    """One literal sample. A false positive under a `// False Negative` comment is a secret the
    rule misses (gitleaks' note, e.g. mailchimp.go): it is labelled a true positive here, with
    the note kept."""
    s: dict = {"rule": rule_id, "label": label, "text": text, "secret": None}
    if label == "fp" and any(x.startswith("//") and "false negative" in x.lower() for x in el):
        s["label"] = "tp"
        s["note"] = "gitleaks: False Negative (listed in its fps)"
    return s


def samples_in(inner: list[str], label: str, rule_id: str, rng: random.Random) -> list[dict]:
    out: list[dict] = []
    k = 0
    while k < len(inner):
        if inner[k] == "utils.GenerateSampleSecrets":
            a, b = block(inner, k)
            args = elements(inner[a:b])
            if len(args) == 2:
                ident = Expr(args[0], rng).value()
                secret = Expr(args[1], rng).value()
                if ident and secret:
                    for ctx, tpl in CONTEXTS.items():
                        text = tpl.replace("{i}", ident).replace("{I}", ident.upper()).replace("{s}", secret)
                        out.append({"rule": rule_id, "label": label, "text": text, "secret": secret, "context": ctx})
            k = b + 1
            continue
        if inner[k] == "[]string":
            a, b = block(inner, k)
            for el in elements(inner[a:b]):
                v = Expr(el, rng).value()
                if v:
                    out.append(_sample(rule_id, label, v, el))
            k = b + 1
            continue
        k += 1
    return out


def detect_secrets_samples(root: Path) -> list[dict]:
    """The literal ``(payload, should_flag)`` cases of detect-secrets' plugin tests."""
    import ast

    out: list[dict] = []
    for f in sorted((root / "tests/plugins").glob("*_test.py")):
        plugin = f.name[: -len("_test.py")]
        if plugin == "ip_public":
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "parametrize"
                and len(node.args) >= 2
                and isinstance(node.args[1], (ast.List, ast.Tuple))
            ):
                continue
            try:
                names = ast.literal_eval(node.args[0])
            except ValueError:
                continue
            if isinstance(names, str):
                names = [n.strip() for n in names.split(",")]
            if len(names) != 2 or names[1] != "should_flag":
                continue
            for el in node.args[1].elts:
                try:
                    v = ast.literal_eval(el)
                except ValueError:
                    continue
                if isinstance(v, tuple) and len(v) == 2 and isinstance(v[0], str) and isinstance(v[1], bool):
                    out.append(
                        {
                            "rule": f"ds:{plugin}",
                            "label": "tp" if v[1] else "fp",
                            "text": v[0],
                            "secret": None,
                            "source": f"detect-secrets tests/plugins/{f.name}",
                        }
                    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout")
    ap.add_argument("--commit", help="the checkout's commit (default: git rev-parse HEAD in it)")
    ap.add_argument("--detect-secrets", help="a checkout of detect-secrets (its plugin tests' samples)")
    ap.add_argument("--detect-secrets-commit", help="that checkout's commit (default: git rev-parse HEAD)")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "tests/support/peer_samples.json"))
    a = ap.parse_args()
    root = Path(a.checkout)
    commit = (
        a.commit
        or subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    )
    rng = random.Random(30)
    samples: list[dict] = []
    for f in sorted((root / "cmd/generate/config/rules").glob("*.go")):
        if f.name.endswith("_test.go"):
            continue
        for s in extract(f.read_text(), rng):
            s["source"] = f"gitleaks cmd/generate/config/rules/{f.name}"
            samples.append(s)
    doc: dict = {"gitleaks_commit": commit, "samples": samples}
    if a.detect_secrets:
        ds = Path(a.detect_secrets)
        doc["detect_secrets_commit"] = (
            a.detect_secrets_commit
            or subprocess.run(
                ["git", "-C", str(ds), "rev-parse", "HEAD"], capture_output=True, text=True
            ).stdout.strip()
        )
        samples += detect_secrets_samples(ds)
    Path(a.out).write_text(json.dumps(doc, indent=0, ensure_ascii=False) + "\n")
    tp = sum(s["label"] == "tp" for s in samples)
    print(
        f"{a.out}: {tp} true positives, {len(samples) - tp} false positives, {len({s['rule'] for s in samples})} rules"
    )


if __name__ == "__main__":
    main()
