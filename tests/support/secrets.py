"""The labelled scrub set (issue 20): synthetic, format-valid secrets of every kind the rules
name, hard negatives (look-alikes that must stay), and planting both into every kind of string
of the real corpus sessions. Shared by ``tests/session/test_scrub_quality.py`` and
``benches/scrub_quality.py`` (which prints recall and false positives).

Every secret here is random (seeded) and was made for this file: none is a real credential.
Each generator returns ``(text, value)``: ``text`` is what is planted into a string (the secret
with the context a real session shows it in), ``value`` the part that must not survive.
"""

from __future__ import annotations

import base64
import glob
import json
import os
import random
import string
from pathlib import Path
from typing import Any, Callable, Iterator

import orjson

from sessiontree._jsjson import js_stringify_bytes

CORPUS = Path(__file__).resolve().parent.parent / "corpus" / "real"

ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
HEX = "0123456789abcdef"


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _mixed(rng: random.Random, n: int) -> str:
    # random alnum with at least one digit, one lower and one upper letter
    while True:
        s = _r(rng, ALNUM, n)
        if any(c.isdigit() for c in s) and any(c.islower() for c in s) and any(c.isupper() for c in s):
            return s


def _password(rng: random.Random) -> str:
    return _mixed(rng, 10) + rng.choice("!#%^*-_+") + _r(rng, ALNUM, 3)


def _pem(rng: random.Random, label: str) -> str:
    body = "\n".join(_r(rng, B64, 64) for _ in range(6)) + "\n" + _r(rng, B64, 20) + "=="
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----"


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _jwt(rng: random.Random) -> str:
    head = _b64url(b'{"alg":"HS256","typ":"JWT"}')
    body = _b64url(json.dumps({"sub": _r(rng, HEX, 12), "iat": rng.randrange(1 << 31)}).encode())
    return f"{head}.{body}.{_r(rng, URLSAFE, 43)}"


def _uuid(rng: random.Random) -> str:
    return "-".join(_r(rng, HEX, n) for n in (8, 4, 4, 4, 12))


def _same(f: Callable[[random.Random], str]) -> Callable[[random.Random], tuple[str, str]]:
    def g(rng: random.Random) -> tuple[str, str]:
        v = f(rng)
        return v, v

    return g


def _ctx(fmt: str, f: Callable[[random.Random], str]) -> Callable[[random.Random], tuple[str, str]]:
    def g(rng: random.Random) -> tuple[str, str]:
        v = f(rng)
        return fmt.format(v=v), v

    return g


#: kind -> generator of (planted text, secret value). Shapes from the providers' documented
#: formats (see docs/scrub.md).
SECRETS: dict[str, Callable[[random.Random], tuple[str, str]]] = {
    "openssh_private_key": _same(lambda r: _pem(r, "OPENSSH PRIVATE KEY")),
    "pgp_private_key": _same(lambda r: _pem(r, "PGP PRIVATE KEY BLOCK")),
    "pem_private_key": _same(lambda r: _pem(r, r.choice(["RSA PRIVATE KEY", "PRIVATE KEY", "EC PRIVATE KEY"]))),
    "aws_access_key_id": _same(lambda r: r.choice(["AKIA", "ASIA"]) + _r(r, string.ascii_uppercase + "234567", 16)),
    "aws_secret_access_key": _ctx("aws_secret_access_key = {v}", lambda r: _r(r, B64, 40)),
    "gcp_service_account": _ctx(
        '{{"type": "service_account", "project_id": "demo-1", "private_key_id": "{v}", "client_email": '
        '"svc@demo-1.iam.gserviceaccount.com"}}',
        lambda r: _r(r, HEX, 40),
    ),
    "google_api_key": _same(lambda r: "AIza" + _r(r, URLSAFE, 35)),
    "google_oauth_client_secret": _same(lambda r: "GOCSPX-" + _r(r, URLSAFE, 28)),
    "google_oauth_token": _same(lambda r: "ya29." + _r(r, URLSAFE, 80)),
    "azure_storage_key": _ctx(
        "DefaultEndpointsProtocol=https;AccountName=demo;AccountKey={v};EndpointSuffix=core.windows.net",
        lambda r: _r(r, B64, 86) + "==",
    ),
    "azure_sas_token": _ctx(
        "https://demo.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-01-01T00:00:00Z&sig={v}",
        lambda r: _r(r, ALNUM, 43) + "%3D",
    ),
    "github_token": _same(lambda r: r.choice(["ghp_", "gho_", "ghs_", "ghu_", "ghr_"]) + _mixed(r, 36)),
    "github_fine_grained_pat": _same(lambda r: "github_pat_" + _mixed(r, 22) + "_" + _mixed(r, 59)),
    "gitlab_token": _same(lambda r: "glpat-" + _r(r, URLSAFE, 20)),
    "slack_webhook": _same(
        lambda r: (
            f"https://hooks.slack.com/services/T{_r(r, string.ascii_uppercase + string.digits, 8)}/"
            f"B{_r(r, string.ascii_uppercase + string.digits, 10)}/{_r(r, ALNUM, 24)}"
        )
    ),
    "slack_token": _same(
        lambda r: f"xox{r.choice('bp')}-{_r(r, string.digits, 12)}-{_r(r, string.digits, 13)}-{_r(r, ALNUM, 24)}"
    ),
    "stripe_secret_key": _same(
        lambda r: r.choice(["sk_live_", "rk_live_", "sk_test_"]) + _mixed(r, 24 + r.randrange(76))
    ),
    "stripe_webhook_secret": _same(lambda r: "whsec_" + _mixed(r, 32)),
    "anthropic_api_key": _same(lambda r: "sk-ant-api03-" + _r(r, URLSAFE, 93) + "AA"),
    "openai_api_key": _same(lambda r: "sk-proj-" + _r(r, URLSAFE, 40) + "T3BlbkFJ" + _r(r, URLSAFE, 40)),
    "npm_token": _same(lambda r: "npm_" + _mixed(r, 36)),
    "pypi_token": _same(lambda r: "pypi-AgEIcHlwaS5vcmc" + _r(r, URLSAFE, 70)),
    "huggingface_token": _same(lambda r: "hf_" + _mixed(r, 34)),
    "sendgrid_api_key": _same(lambda r: "SG." + _r(r, URLSAFE, 22) + "." + _r(r, URLSAFE, 43)),
    "twilio_api_key": _same(lambda r: "SK" + _r(r, HEX, 31) + r.choice("0123456789")),
    "mailgun_api_key": _same(lambda r: "key-" + _r(r, HEX, 31) + r.choice("0123456789")),
    "telegram_bot_token": _same(lambda r: f"{r.randrange(10**8, 10**10)}:AA{_r(r, URLSAFE, 33)}"),
    "discord_webhook": _same(
        lambda r: f"https://discord.com/api/webhooks/{r.randrange(10**17, 10**19)}/{_r(r, URLSAFE, 68)}"
    ),
    "discord_bot_token": _ctx(
        "discord bot token: {v}", lambda r: "M" + _r(r, ALNUM, 25) + "." + _r(r, URLSAFE, 6) + "." + _r(r, URLSAFE, 38)
    ),
    "jwt": _same(_jwt),
    "url_password": _ctx("postgres://app:{v}@db.internal:5432/prod", _password),
    "connection_string_password": _ctx("Server=tcp:db,1433;Database=app;User Id=sa;Password={v};", _password),
    "bearer_token": _ctx("curl -H 'Authorization: Bearer {v}' https://api.internal", lambda r: _mixed(r, 40)),
    "basic_auth_header": _ctx(
        "Authorization: Basic {v}", lambda r: base64.b64encode(f"admin:{_password(r)}".encode()).decode()
    ),
    "env_secret_assignment": _ctx("export DEPLOY_TOKEN={v}", lambda r: _mixed(r, 24)),
    "password_assignment": _ctx('db_password: "{v}"', _password),
    "secret_keyed_value": _ctx('client_secret = "{v}"', lambda r: _mixed(r, 32)),
    # the peers' kinds (gitleaks' default rules and detect-secrets' plugins; see docs/scrub.md)
    "age_secret_key": _same(lambda r: "AGE-SECRET-KEY-1" + _r(r, "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58)),
    "putty_private_key": _ctx(
        "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: none\nComment: k\nPublic-Lines: 1\n"
        "AAAAC3NzaC1lZDI1NTE5AAAAIHbZXhhbXBsZQ\n{v}",
        lambda r: f"Private-Lines: 1\n{_r(r, B64, 44)}=\nPrivate-MAC: {_r(r, HEX, 64)}",
    ),
    "ansible_vault": _same(lambda r: "$ANSIBLE_VAULT;1.1;AES256\n" + "\n".join(_r(r, HEX, 80) for _ in range(4))),
    "onepassword_token": _same(
        lambda r: "A3-" + "-".join(_r(r, string.ascii_uppercase + string.digits, n) for n in (6, 11, 5, 5, 5))
    ),
    "aws_bedrock_api_key": _same(lambda r: "ABSK" + _r(r, ALNUM + "+/", 132)),
    "alibaba_access_key_id": _same(lambda r: "LTAI" + _mixed(r, 20)),
    "azure_ad_client_secret": _ctx(
        "AZURE_CLIENT_SECRET: {v}",
        lambda r: _r(r, ALNUM, 3) + r.choice("0123456789") + "Q~" + _r(r, ALNUM + "_~.-", 34),
    ),
    "teams_webhook": _same(
        lambda r: (
            f"https://acme.webhook.office.com/webhookb2/{_uuid(r)}@{_uuid(r)}/IncomingWebhook/"
            f"{_r(r, HEX, 32)}/{_uuid(r)}"
        )
    ),
    "databricks_token": _same(lambda r: "dapi" + _r(r, HEX, 32)),
    "digitalocean_token": _same(lambda r: r.choice(["dop_v1_", "doo_v1_", "dor_v1_"]) + _r(r, HEX, 64)),
    "shopify_token": _same(lambda r: r.choice(["shpat_", "shpca_", "shppa_", "shpss_"]) + _r(r, HEX, 32)),
    "linear_api_key": _same(lambda r: "lin_api_" + _mixed(r, 40)),
    "notion_token": _same(lambda r: "ntn_" + _r(r, string.digits, 11) + _mixed(r, 35)),
    "sourcegraph_token": _same(lambda r: "sgp_" + _r(r, HEX, 16) + "_" + _r(r, HEX, 40)),
    "mailchimp_api_key": _same(lambda r: _r(r, HEX, 32) + f"-us{r.randint(1, 21)}"),
    "harness_api_key": _same(lambda r: f"pat.{_mixed(r, 22)}.{_mixed(r, 24)}.{_mixed(r, 20)}"),
    "doppler_token": _same(lambda r: "dp.pt." + _mixed(r, 43)),
    "mapbox_token": _ctx("MAPBOX_ACCESS_TOKEN: {v}", lambda r: f"pk.eyJ1{_mixed(r, 60)}.{_mixed(r, 22)}"),
    "twitter_bearer_token": _same(lambda r: "A" * 22 + _mixed(r, 90)),
    "slack_app_token": _same(
        lambda r: (
            f"xapp-1-A{_r(r, string.ascii_uppercase + string.digits, 10)}-{_r(r, string.digits, 13)}-{_r(r, HEX, 64)}"
        )
    ),
    "sidekiq_secret": _ctx(
        "export BUNDLE_ENTERPRISE__CONTRIBSYS__COM={v}", lambda r: f"{_r(r, HEX, 8)}:{_r(r, HEX, 8)}"
    ),
    "sidekiq_sensitive_url": _ctx(
        "source 'https://{v}@enterprise.contribsys.com/'", lambda r: f"{_r(r, HEX, 8)}:{_r(r, HEX, 8)}"
    ),
    "docker_config_auth": _ctx(
        '{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{v}"}}}}}}',
        lambda r: base64.b64encode(f"dev:{_password(r)}".encode()).decode(),
    ),
    "netrc_password": _ctx("machine api.heroku.com\n  login me@example.org\n  password {v}", _password),
    "pgpass_password": _ctx("$ cat ~/.pgpass\ndb.internal:5432:app:alice:{v}", _password),
    "grafana_token": _same(lambda r: "glsa_" + _mixed(r, 32) + "_" + _r(r, HEX, 8)),
    "vault_token": _same(lambda r: "hvs." + _r(r, URLSAFE, 95)),
    "terraform_cloud_token": _same(lambda r: f"{_mixed(r, 14)}.atlasv1.{_r(r, URLSAFE, 67)}"),
    "heroku_api_key": _same(lambda r: "HRKU-AA" + _r(r, URLSAFE, 58)),
    "sentry_token": _same(lambda r: "sntryu_" + _r(r, HEX, 64)),
    "planetscale_token": _same(lambda r: r.choice(["pscale_tkn_", "pscale_pw_", "pscale_oauth_"]) + _mixed(r, 43)),
    "new_relic_key": _same(lambda r: "NRAK-" + _r(r, string.ascii_uppercase + string.digits, 27)),
    "flyio_token": _same(lambda r: "fo1_" + _r(r, URLSAFE, 43)),
    "gitlab_other_token": _same(lambda r: r.choice(["glsoat-", "glffct-"]) + _r(r, URLSAFE, 20)),
    "square_token": _same(lambda r: "sq0atp-" + _mixed(r, 22)),
    "sumologic_access_id": _ctx("SUMO_ACCESS_ID={v}", lambda r: "su" + _mixed(r, 12)),
    "facebook_page_token": _same(lambda r: "EAAM" + _mixed(r, 120)),
    "prefixed_api_token": _same(
        lambda r: r.choice(
            [
                "pplx-" + _mixed(r, 48),
                "pnu_" + _mixed(r, 36),
                "rubygems_" + _r(r, HEX, 48),
                "xkeysib-" + _r(r, HEX, 64) + "-" + _mixed(r, 16),
                "PMAK-" + _r(r, HEX, 24) + "-" + _r(r, HEX, 34),
                "dt0c01." + _mixed(r, 24) + "." + _mixed(r, 64),
                "gsk_" + _mixed(r, 52),
            ]
        )
    ),
    "curl_auth_user": _ctx("curl -u deploy:{v} https://ci.internal/api", _password),
    "authorization_header": _ctx('-H "Authorization: Token {v}"', lambda r: _mixed(r, 40)),
    "facebook_access_token": _ctx("facebook app token {v}", lambda r: f"{r.randrange(10**14, 10**15)}|{_mixed(r, 27)}"),
}

_PNG = base64.b64encode(
    bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + os.urandom(0) + bytes(range(256)) * 8
).decode()


def _neg(f: Callable[[random.Random], str]) -> Callable[[random.Random], str]:
    return f


#: kind -> generator of look-alikes that must stay as they are.
NEGATIVES: dict[str, Callable[[random.Random], str]] = {
    "git_sha": lambda r: f"commit {_r(r, HEX, 40)}",
    "uuid": lambda r: "-".join(_r(r, HEX, n) for n in (8, 4, 4, 4, 12)),
    "sha256_digest": lambda r: f"sha256:{_r(r, HEX, 64)}",
    "sha512_hex": lambda r: _r(r, HEX, 128),
    "npm_integrity": lambda r: '"integrity": "sha512-' + base64.b64encode(r.randbytes(64)).decode() + '"',
    "base64_image": lambda r: "data:image/png;base64," + base64.b64encode(r.randbytes(3000)).decode(),
    "aws_documented_example": lambda r: r.choice(
        ["AKIAIOSFODNN7EXAMPLE", "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"]
    ),
    "placeholder": lambda r: r.choice(
        [
            "OPENAI_API_KEY=YOUR_API_KEY_HERE",
            "export ANTHROPIC_API_KEY=<your-key>",
            "export GITHUB_TOKEN=${{ secrets.GITHUB_TOKEN }}",
            "password: ********",
            'api_key = "sk-..."',
            "export ANTHROPIC_API_KEY=sk-ant-...",
            "DB_PASSWORD=changeme",
            "token: xxxxxxxxxxxxxxxx",
        ]
    ),
    "path": lambda r: (
        r.choice(
            [
                "/home/dev/.ssh/id_rsa",
                "~/.aws/credentials",
                "/etc/ssl/private/server.key",
                "C:\\Users\\dev\\secrets.json",
            ]
        )
        + f" {_r(r, string.ascii_lowercase, 6)}"
    ),
    "long_identifier": lambda r: r.choice(
        [
            "AbstractSingletonProxyFactoryBeanTokenProvider",
            "TOKEN_REFRESH_INTERVAL_MILLISECONDS_DEFAULT",
            "test_password_reset_flow_sends_email",
            "SecretManagerServiceClientBuilderFactory",
        ]
    ),
    "code_reference": lambda r: r.choice(
        [
            "password = getpass()",
            "api_key = os.environ['OPENAI_API_KEY']",
            "secret_key = settings.SECRET_KEY",
            "token = request.headers.get('Authorization')",
            "const apiKey = process.env.API_KEY;",
            "max_tokens=4096",
            '"totalTokens": 94578',
        ]
    ),
    "public_key": lambda r: r.choice(
        [
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + _r(r, B64, 43) + " dev@host",
            "-----BEGIN PUBLIC KEY-----\n" + _r(r, B64, 64) + "\n-----END PUBLIC KEY-----",
        ]
    ),
    "url_without_password": lambda r: r.choice(
        [
            f"https://git@github.com/org/{_r(r, string.ascii_lowercase, 8)}.git",
            "postgres://app@db.internal:5432/prod",
            f"https://example.com/search?q={_r(r, string.ascii_lowercase, 6)}&page=2",
        ]
    ),
    "prose_about_secrets": lambda r: r.choice(
        [
            "Bearer tokens are sent in the Authorization header.",
            "the password: is never logged",
            "Set the secret: see the README",
            "rotate the token: it expires after 1 hour",
        ]
    ),
}


# ---------------------------------------------------------------------------- planting


def corpus_files() -> list[Path]:
    return sorted(Path(p) for p in glob.glob(str(CORPUS / "*.jsonl")))


def string_slots(value: Any, pointer: str = "") -> Iterator[tuple[str, str]]:
    """(pointer, kind of string) for every string of a parsed line (iteratively)."""
    stack: list[tuple[Any, str]] = [(value, pointer)]
    while stack:
        v, p = stack.pop()
        if isinstance(v, dict):
            for k, x in v.items():
                stack.append((x, f"{p}/{k.replace('~', '~0').replace('/', '~1')}"))
        elif isinstance(v, list):
            for i, x in enumerate(v):
                stack.append((x, f"{p}/{i}"))
        elif isinstance(v, str):
            yield p, p


#: Fields the scrubber never changes by design (the tree, ids, replay data, the header's
#: cwd/parentSession unless asked): nothing is planted there.
_SKIP_LAST = {"id", "parentId", "timestamp", "type", "firstKeptEntryId", "fromId", "targetId", "toolCallId"}
_REPLAY = {"thinkingSignature", "textSignature", "thoughtSignature"}


def slot_kind(entry: dict, pointer: str) -> str | None:
    """Which kind of string a pointer names (None: a field never searched)."""
    parts = pointer.split("/")[1:]
    if not parts or parts[-1] in _SKIP_LAST or parts[-1] in _REPLAY or parts[-1] in ("role", "api", "provider"):
        return None
    t = entry.get("type")
    if t == "session":
        return None
    if parts[-1] in ("mimeType", "stopReason", "model", "modelId", "customType", "thinkingLevel"):
        return None
    msg = entry.get("message") if isinstance(entry.get("message"), dict) else {}
    role = msg.get("role")
    if t == "message":
        if "arguments" in parts:
            return "tool_call_arguments"
        if parts[-1] == "name":
            return "tool_call_name"
        if parts[-1] == "thinking":
            return "thinking"
        if role == "bashExecution":
            return f"bash_{parts[-1]}"
        if role == "toolResult":
            return "tool_result"
        return f"{role}_text"
    if t in ("compaction", "branch_summary"):
        return f"{t}_{'details' if 'details' in parts else parts[-1]}"
    if t == "custom":
        return "custom_data"
    if t == "session_info":
        return "session_name"
    if t == "label":
        return "label"
    if t == "custom_message":
        return "custom_message"
    return f"{t}_other"


def _set(obj: Any, pointer: str, value: Any) -> None:
    parts = [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]
    for p in parts[:-1]:
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    last = parts[-1]
    if isinstance(obj, list):
        obj[int(last)] = value
    else:
        obj[last] = value


def _get(obj: Any, pointer: str) -> Any:
    for p in [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]:
        obj = obj[int(p)] if isinstance(obj, list) else obj[p]
    return obj


class Plant(dict):
    """One planted sample: file, line (1-based), pointer, slot kind, label kind, secret value
    (positives) and whether it is a key."""


def planted_corpus(seed: int = 20, per_kind: int = 40) -> tuple[dict[str, bytes], list[Plant]]:
    """The real corpus with secrets and negatives planted: ``({file name: bytes}, plants)``.

    Every kind of secret and of negative is planted ``per_kind`` times, cycling through the
    kinds of string (message text, thinking, tool call names and arguments, tool results, bash
    commands and outputs, summaries and details, custom data, session names, labels and object
    keys), at most one sample per string, so a finding maps back to one sample. A label entry
    is appended to each session (the real corpus has none)."""
    rng = random.Random(seed)
    files: dict[str, list[Any]] = {}
    slots: dict[str, list[tuple[str, int, str]]] = {}
    for f in corpus_files():
        lines = f.read_bytes().split(b"\n")
        if lines and lines[-1] == b"":
            lines.pop()
        parsed: list[Any] = []
        last_id = None
        for ln in lines:
            try:
                parsed.append(orjson.loads(ln))
            except orjson.JSONDecodeError:
                parsed.append(ln)  # kept as bytes
            if isinstance(parsed[-1], dict) and isinstance(parsed[-1].get("id"), str):
                last_id = parsed[-1]["id"]
        if last_id is not None and isinstance(parsed[0], dict) and parsed[0].get("version") == 3:
            parsed.append(
                {
                    "type": "label",
                    "id": "lab0" + _r(rng, HEX, 4),
                    "parentId": last_id,
                    "timestamp": "2026-01-01T00:00:00.000Z",
                    "targetId": last_id,
                    "label": "checkpoint",
                }
            )
        files[f.name] = parsed
        for n, entry in enumerate(parsed, start=1):
            if not isinstance(entry, dict):
                continue
            for ptr, _ in string_slots(entry):
                kind = slot_kind(entry, ptr)
                if kind is not None:
                    slots.setdefault(kind, []).append((f.name, n, ptr))
            # a key slot: an object (tool call arguments or custom data) gets a new key
            for ptr, _ in string_slots(entry):
                k = slot_kind(entry, ptr)
                if k in ("tool_call_arguments", "custom_data"):
                    slots.setdefault("object_key", []).append((f.name, n, ptr.rsplit("/", 1)[0] + "/\0key"))
                    break
    for v in slots.values():
        rng.shuffle(v)
    kinds = sorted(slots)
    used: set[tuple[str, int, str]] = set()
    plants: list[Plant] = []
    cursor = {k: 0 for k in kinds}

    def next_slot(i: int, key_ok: bool) -> tuple[str, tuple[str, int, str]] | None:
        for j in range(len(kinds)):
            kind = kinds[(i + j) % len(kinds)]
            if kind == "object_key" and not key_ok:
                continue
            lst = slots[kind]
            while cursor[kind] < len(lst):
                s = lst[cursor[kind]]
                cursor[kind] += 1
                base = (s[0], s[1], s[2].rsplit("/", 1)[0] if kind == "object_key" else s[2])
                if base not in used:
                    used.add(base)
                    return kind, s
        return None

    i = 0
    samples: list[tuple[str, str, str | None]] = []
    for label, gen in SECRETS.items():
        for _ in range(per_kind):
            text, value = gen(rng)
            samples.append((label, text, value))
    for label, neg in NEGATIVES.items():
        for _ in range(per_kind):
            samples.append((label, neg(rng), None))
    for label, text, value in samples:
        # a key holds a bare one-line secret (a secret shown with its context is a string)
        key_ok = (value is None or text == value) and "\n" not in text and len(text) <= 200
        got = next_slot(i, key_ok)
        i += 1
        if got is None:
            break
        skind, (fname, line, ptr) = got
        entry = files[fname][line - 1]
        is_key = skind == "object_key"
        if is_key:
            parent = ptr.rsplit("/", 1)[0]
            obj = _get(entry, parent) if parent else entry
            if not isinstance(obj, dict):
                continue
            obj[text] = True
            ptr = f"{parent}/{text.replace('~', '~0').replace('/', '~1')}"
        else:
            old = _get(entry, ptr)
            _set(entry, ptr, f"{old}\n{text}\n" if old else text)
        plants.append(
            Plant(file=fname, line=line, pointer=ptr, slot=skind, label=label, value=value, positive=value is not None)
        )
    out: dict[str, bytes] = {}
    for fname, parsed in files.items():
        out[fname] = b"".join((js_stringify_bytes(e) if not isinstance(e, bytes) else e) + b"\n" for e in parsed)
    return out, plants


def evaluate(seed: int = 20, per_kind: int = 40) -> dict:
    """Scrub the planted corpus and score it against the plants.

    A positive is caught when its value is gone from the scrubbed string and a finding of its
    kind names its string (its line and pointer). A negative is a false positive when its
    string has more findings than the same string of the unplanted corpus. Also checked for
    every file: same entry count, ids, parent ids and leaf (opened in sessiontree)."""
    from sessiontree import Session
    from sessiontree.scrub import scrub_bytes

    files, plants = planted_corpus(seed, per_kind)
    baseline: dict[tuple[str, int, str | None], int] = {}
    for f in corpus_files():
        _, rep = scrub_bytes(f.read_bytes())
        for x in rep.findings:
            baseline[(f.name, x.line, x.pointer)] = baseline.get((f.name, x.line, x.pointer), 0) + 1
    outs: dict[str, bytes] = {}
    found: dict[tuple[str, int, str | None], list[str]] = {}
    tree_ok = True
    for name, data in files.items():
        out, rep = scrub_bytes(data)
        outs[name] = out
        for x in rep.findings:
            found.setdefault((name, x.line, x.pointer), []).append(x.kind)
        a, b = Session.from_bytes(data), Session.from_bytes(out)
        ta, tb = a.entry_table(), b.entry_table()
        if (ta.id, ta.parent_id, ta.type, a.leaf_id) != (tb.id, tb.parent_id, tb.type, b.leaf_id):
            tree_ok = False
    per: dict[str, list[int]] = {}
    slots: dict[str, list[int]] = {}
    misses: list[Plant] = []
    fps: list[Plant] = []
    for p in plants:
        key = (p["file"], p["line"], p["pointer"])
        line = outs[p["file"]].split(b"\n")[p["line"] - 1]
        if p["positive"]:
            if p["slot"] == "object_key":
                # the finding names the object's member by its placeholder
                parent = p["pointer"].rsplit("/", 1)[0]
                kinds = [
                    k
                    for (fn, ln, ptr), ks in found.items()
                    if (fn, ln) == key[:2] and ptr and ptr.startswith(parent + "/[REDACTED:")
                    for k in ks
                ]
            else:
                kinds = found.get(key, [])
            ok = p["label"] in kinds and orjson.dumps(p["value"])[1:-1] not in line
            per.setdefault(p["label"], [0, 0])[0] += ok
            per[p["label"]][1] += 1
            slots.setdefault(p["slot"], [0, 0])[0] += ok
            slots[p["slot"]][1] += 1
            if not ok:
                misses.append(p)
        else:
            n = len(found.get(key, []))
            fp = n > baseline.get(key, 0)
            per.setdefault(p["label"], [0, 0])[0] += fp
            per[p["label"]][1] += 1
            if fp:
                fps.append(p)
    pos = [p for p in plants if p["positive"]]
    neg = [p for p in plants if not p["positive"]]
    return {
        "positives": len(pos),
        "negatives": len(neg),
        "recall": (len(pos) - len(misses)) / max(1, len(pos)),
        "false_positive_rate": len(fps) / max(1, len(neg)),
        "per_kind": {k: v for k, v in per.items() if k in SECRETS},
        "per_negative": {k: v for k, v in per.items() if k in NEGATIVES},
        "per_slot": slots,
        "misses": misses,
        "false_positives": fps,
        "tree_ok": tree_ok,
    }


# ==== small hand-made sessions for the scrub tests =============================================

#: A synthetic GitHub token (format-valid: the scrub rules find it; no real credential).
GITHUB_TOKEN = "ghp_" + "Q1w2E3r4T5" * 3 + "yU7i8o"
#: A Pi session header line, with its newline.
SESSION_HEAD = b'{"type":"session","version":3,"id":"s","timestamp":"2026-01-01T00:00:00.000Z","cwd":"/w"}\n'


def user_entry(eid: str, parent: str | None, text: str) -> bytes:
    """A ``message`` entry line (no newline): a user message of ``text``, id ``eid`` under ``parent``."""
    return orjson.dumps(
        {
            "type": "message",
            "id": eid,
            "parentId": parent,
            "timestamp": "2026-01-01T00:00:01.000Z",
            "message": {"role": "user", "content": text, "timestamp": 1},
        }
    )
