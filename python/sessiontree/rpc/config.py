"""Pi's agent directory as the RPC server reads it.

``models.json`` (the models a compaction summary may use), ``settings.json``
(``compaction.keepRecentTokens``/``reserveTokens``), which model is selected, and the summarizer
that calls it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from ..session import Session
from ..settings import CompactionSettings
from .protocol import RpcError

#: the model Pi reports in ``get_state`` when none is configured
UNKNOWN_MODEL = {
    "id": "unknown",
    "name": "unknown",
    "api": "unknown",
    "provider": "unknown",
    "baseUrl": "",
    "reasoning": False,
    "input": [],
    "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
    "contextWindow": 0,
    "maxTokens": 0,
}


# ==== models and settings (Pi's agent directory) ====================================


def load_models(path: Path | None) -> list[dict[str, Any]]:
    """Models of a Pi ``models.json`` as Pi's full model objects (keys in Pi's order).

    The file: ``{"providers": {name: {baseUrl, api, apiKey, models: [...]}}}``; each model gets
    ``_apiKey`` too. Missing file: ``[]``.

    Raises:
        RpcError: the file is not valid JSON or not shaped like Pi's.
    """
    if path is None or not path.is_file():
        return []
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RpcError(f"cannot read models file {path}: {exc}") from None
    providers = doc.get("providers") if isinstance(doc, dict) else None
    if not isinstance(providers, dict):
        raise RpcError(f'models file {path}: no "providers" object')
    out = []
    for pname, p in providers.items():
        if not isinstance(p, dict):
            continue
        for m in p.get("models") or []:
            if not isinstance(m, dict) or not isinstance(m.get("id"), str):
                continue
            cost = m.get("cost")
            if not isinstance(cost, dict):
                cost = {}
            out.append(
                {
                    "id": m["id"],
                    "name": m.get("name", m["id"]),
                    "api": m.get("api", p.get("api", "openai-completions")),
                    "provider": pname,
                    "baseUrl": m.get("baseUrl", p.get("baseUrl", "")),
                    "reasoning": bool(m.get("reasoning", False)),
                    "input": m.get("input", ["text"]),
                    "cost": {k: cost.get(k, 0) for k in ("input", "output", "cacheRead", "cacheWrite")},
                    "contextWindow": m.get("contextWindow", 128000),
                    "maxTokens": m.get("maxTokens", 16384),
                    "_apiKey": m.get("apiKey", p.get("apiKey")),
                }
            )
    return out


def load_settings(path: Path | None) -> dict[str, Any]:
    """Pi's ``settings.json`` as a dict (``{}`` when missing or unreadable)."""
    if path is None or not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def merge_settings(global_settings: dict[str, Any], project_settings: dict[str, Any]) -> dict[str, Any]:
    """Pi's SettingsManager merge.

    Project keys over global ones, nested objects merged one level deep (``{"compaction":
    {...}}`` from both files combine key by key)."""
    out = dict(global_settings)
    for k, v in project_settings.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def settings_session_dir(settings: dict[str, Any], cwd: str) -> Path | None:
    """Pi's ``sessionDir`` setting (``settings.getSessionDir()``) as a folder.

    ``~`` expanded, relative to ``cwd`` when relative; None when absent, not a string or empty.
    It comes after ``--session-dir`` and ``PI_CODING_AGENT_SESSION_DIR`` (sessions.md)."""
    v = settings.get("sessionDir")
    if not isinstance(v, str) or not v.strip() or "\x00" in v:
        return None
    return Path(cwd) / Path(v).expanduser()


def compaction_settings(settings: dict[str, Any]) -> CompactionSettings:
    """``settings["compaction"]`` (``reserveTokens``, ``keepRecentTokens``) as CompactionSettings."""
    raw = settings.get("compaction")
    if not isinstance(raw, dict):
        raw = {}
    kw: dict[str, Any] = {}
    for src, dst in (("keepRecentTokens", "keep_recent_tokens"), ("reserveTokens", "reserve_tokens")):
        v = raw.get(src)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
            kw[dst] = v
    return CompactionSettings(**kw)


def public_model(model: dict[str, Any] | None) -> dict[str, Any]:
    """The model object Pi shows (``get_state.model``): the configured one, else Pi's placeholder."""
    if model is None:
        return dict(UNKNOWN_MODEL)
    return {k: v for k, v in model.items() if not k.startswith("_")}


def summarizer_for(model: dict[str, Any]) -> Any:
    """A summarizer calling ``model`` like Pi does, priced with the model's cost per million tokens.

    The provider whose row (:data:`sessiontree.providers.PROVIDERS`) names the model's Pi
    ``api`` (:func:`~sessiontree.providers.provider_for_pi_api`; no ``api``: Pi's default,
    ``openai-completions``).

    Raises:
        RpcError: no provider serves the model's ``api``.
        ImportError: the provider's SDK is not installed.
    """
    from .. import providers
    from ..summarizers import Pricing, provider_class

    api = model.get("api")
    row = providers.provider_for_pi_api(api)
    if row is None:
        raise RpcError(f"model {model['provider']}/{model['id']}: api {api!r} is not supported for summaries")
    key = model.get("_apiKey")
    if isinstance(key, str) and key in os.environ:
        key = os.environ[key]  # Pi resolves an environment variable's name
    return provider_class(row)(
        model["id"],
        api_key=key or None,
        base_url=model.get("baseUrl") or None,
        pricing=Pricing.from_pi(model["cost"]),
        max_output_tokens=model.get("maxTokens") or None,
        context_window=model.get("contextWindow") or None,
    )


def _select_model(
    models: list[dict[str, Any]],
    provider: str | None,
    model_id: str | None,
    session: Session | None,
    settings: dict[str, Any],
) -> dict[str, Any] | None:
    if model_id and "/" in model_id and provider is None:
        provider, model_id = model_id.split("/", 1)

    def find(p: Any, m: Any) -> dict[str, Any] | None:
        return next((x for x in models if x["id"] == m and (p is None or x["provider"] == p)), None)

    if model_id:
        return find(provider, model_id)
    if provider:
        return next((x for x in models if x["provider"] == provider), None)
    if session is not None:
        try:
            m = session.build_context().model
        except Exception:
            m = None
        if isinstance(m, dict):
            got = find(m.get("provider"), m.get("modelId"))
            if got is not None:
                return got
    got = find(settings.get("defaultProvider"), settings.get("defaultModel")) if settings.get("defaultModel") else None
    return got or (models[0] if models else None)
