"""One row per summarizer provider (issue 21): ``sessiontree.providers.PROVIDERS``. Every place
that names a provider is made from the row or checked against it here, so a provider added to
one place and forgotten in another fails."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from sessiontree import providers, rpc, summarizers
from sessiontree.cli import build_parser
from sessiontree.cli.args import _COMPACT_EPILOG

ROOT = Path(__file__).resolve().parent.parent.parent
ROWS = providers.PROVIDERS


def test_names_are_the_rows():
    assert summarizers.SUMMARIZER_NAMES == ("offline", *(p.name for p in ROWS))
    assert providers.names_text() == " or ".join(p.name for p in ROWS)


@pytest.mark.parametrize("p", ROWS, ids=[p.name for p in ROWS])
def test_each_row_names_real_things(p):
    mod = importlib.import_module(f"sessiontree.summarizers.{p.module}")
    cls = getattr(mod, p.cls)
    assert getattr(summarizers, p.cls) is cls and p.cls in summarizers.__all__
    assert callable(getattr(mod, p.sdk_import))
    assert cls.name == p.name
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert p.extra in extras
    for alias in (p.name, *p.aliases, p.name.upper()):
        assert providers.provider(alias) is p
    assert f"${p.env}_API_KEY" in _COMPACT_EPILOG and f"${p.env}_MODEL" in _COMPACT_EPILOG


@pytest.mark.parametrize("p", ROWS, ids=[p.name for p in ROWS])
def test_get_summarizer_reads_the_rows_environment(p, monkeypatch):
    monkeypatch.setenv(f"{p.env}_API_KEY", "k")
    monkeypatch.setenv(f"{p.env}_MODEL", "m-from-env")
    monkeypatch.setenv(f"{p.env}_BASE_URL", "http://127.0.0.1:9")
    try:
        s = summarizers.get_summarizer(p.name)
    except ImportError:
        pytest.skip(f"the {p.extra} SDK is not installed")
    assert type(s).__name__ == p.cls and s.model == "m-from-env"


def _choices(parser, command: str) -> tuple:
    sub = next(a for a in parser._actions if a.dest == "command")
    action = next(a for a in sub.choices[command]._actions if a.dest == "summarizer")
    return tuple(action.choices)


@pytest.mark.parametrize("command", ["compact", "navigate", "compact-all"])
def test_the_cli_offers_every_provider(command):
    assert _choices(build_parser(), command) == summarizers.SUMMARIZER_NAMES


@pytest.mark.parametrize("api", [a for p in ROWS for a in p.pi_apis] + [None])
def test_rpc_summarizes_every_pi_api_of_the_rows_with_the_rows_class(api, monkeypatch):
    p = providers.provider_for_pi_api(api)
    assert p is not None
    model = {"id": "m", "provider": "x", "api": api, "baseUrl": "http://127.0.0.1:9", "_apiKey": "k"}
    model["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    if api is None:
        del model["api"]
    try:
        got = rpc.summarizer_for(model)
    except ImportError:
        pytest.skip(f"the {p.extra} SDK is not installed")
    assert type(got).__name__ == p.cls
    assert providers.provider_for_pi_api("no-such-api") is None


def test_sdk_errors_are_classified_in_one_module():
    # the SDK exception shapes are read in summarizers/sdk.py only (convert_sdk_error)
    pkg = Path(summarizers.__file__).parent
    names = ("APIStatusError", "APITimeoutError", "APIConnectionError")
    readers = sorted(f.name for f in pkg.glob("*.py") if any(n in f.read_text() for n in names))
    assert readers == ["sdk.py"]


def test_rpc_reads_the_pi_api_names_from_the_rows(monkeypatch):
    # summarizer_for maps a Pi ``api`` through providers.provider_for_pi_api, never a list of its own:
    # a name added to a row is summarized with that row's class; an api no row names is an RpcError
    # with the text the server has always sent
    anthropic = next(p for p in ROWS if p.name == "anthropic")
    grown = anthropic._replace(pi_apis=(*anthropic.pi_apis, "x-new-api"))
    monkeypatch.setattr(providers, "PROVIDERS", tuple(grown if p is anthropic else p for p in ROWS))
    model = {"id": "m", "provider": "x", "api": "x-new-api", "baseUrl": "http://127.0.0.1:9", "_apiKey": "k"}
    model["cost"] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0}
    try:
        got = rpc.summarizer_for(model)
    except ImportError:
        pytest.skip("the anthropic SDK is not installed")
    assert type(got).__name__ == anthropic.cls
    model["api"] = "no-such-api"
    with pytest.raises(rpc.RpcError) as err:
        rpc.summarizer_for(model)
    assert str(err.value) == "model x/m: api 'no-such-api' is not supported for summaries"


def test_what_the_providers_share_about_their_sdks_is_in_one_module():
    # the output budget, the client's options (no SDK retries, timeout, base URL, headers), the
    # retried call with the key redacted and the SDK object -> dict step are written once, in
    # summarizers/sdk.py; a provider module passes what differs
    pkg = Path(summarizers.__file__).parent
    shared = ("output_budget(", "retry_call(", "redact_error(", '"default_headers":', "model_dump")
    for p in ROWS:
        text = (pkg / f"{p.module}.py").read_text()
        assert not [s for s in shared if s in text], p.module
    sdk = (pkg / "sdk.py").read_text()
    assert all(s in sdk for s in shared)


def test_every_provider_module_is_a_row():
    # CONTRIBUTING, "A summarizer provider", step 2: a module whose summarizer class has no row
    # is reachable from nowhere (get_summarizer, --summarizer, the RPC server), and nothing else fails
    import inspect
    import pkgutil

    rows = {(p.module, p.cls) for p in ROWS}
    found = set()
    for info in pkgutil.iter_modules(summarizers.__path__):
        mod = importlib.import_module(f"sessiontree.summarizers.{info.name}")  # SDKs load lazily
        for cls_name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ != mod.__name__ or inspect.isabstract(cls) or cls_name == "Summarizer":
                continue
            if isinstance(getattr(cls, "name", None), str) and inspect.iscoroutinefunction(
                getattr(cls, "summarize", None)
            ):  # the Summarizer protocol (base.py)
                found.add((info.name, cls_name))
    found.discard(("offline", "OfflineSummarizer"))  # needs no row: no SDK, no settings
    assert rows <= found, "the scan finds the providers' classes"
    assert found - rows == set(), f"add a row to PROVIDERS in providers.py for {sorted(found - rows)}"


@pytest.mark.parametrize("p", ROWS, ids=[p.name for p in ROWS])
def test_the_test_extra_and_the_readme_cover_each_row(p):
    # CONTRIBUTING, "A summarizer provider", steps 2 and 3: the SDK in the `test` extra (so the
    # suite tests it), the README's extras row and its environment variables
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    missing = [req for req in extras[p.extra] if req not in extras["test"]]
    assert missing == [], f"pyproject.toml: add {missing} to the test extra"
    readme = (ROOT / "README.md").read_text()
    assert f"| `{p.extra}` |" in readme, f"README.md, 'Optional extras': a row for the {p.extra!r} extra"
    for var in ("API_KEY", "BASE_URL", "MODEL"):
        assert f"`{p.env}_{var}`" in readme, f"README.md, 'Environment variables': `{p.env}_{var}`"
