"""The summarizer providers, one row each: a light module (it imports nothing), so
the CLI builds its ``--summarizer`` choices and hints from it without loading the summarizers.
:mod:`sessiontree.summarizers` (``get_summarizer``, the lazy class names) and the RPC server
(Pi ``models.json`` ``api`` values) read the same rows. CONTRIBUTING.md lists the steps to add
a provider; ``tests/summarizers/test_provider_table.py`` fails when a place is forgotten."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["Provider", "PROVIDERS", "SUMMARIZER_NAMES", "provider", "provider_for_pi_api", "names_text"]


class Provider(NamedTuple):
    """One summarizer provider, in one row: everything that names it is made from
    :data:`PROVIDERS` (``get_summarizer``, :data:`SUMMARIZER_NAMES`, the lazy class names, the
    CLI's ``--summarizer`` choices and hints, Pi's ``models.json`` ``api`` values the RPC server
    summarizes with). CONTRIBUTING.md lists the steps to add one."""

    name: str  #: what ``get_summarizer`` and ``--summarizer`` take
    module: str  #: ``sessiontree.summarizers.<module>``
    cls: str  #: the class in it
    env: str  #: ``$<env>_API_KEY``, ``$<env>_BASE_URL``, ``$<env>_MODEL``
    sdk_import: str  #: the module's function that imports the SDK (ImportError naming the extra)
    extra: str  #: the pip extra (``sessiontree[<extra>]``)
    aliases: tuple[str, ...] = ()  #: other names ``get_summarizer`` accepts
    pi_apis: tuple[str, ...] = ()  #: Pi ``models.json`` ``api`` values this provider serves


#: The providers (the offline summarizer needs none of this: no SDK, no settings).
PROVIDERS: tuple[Provider, ...] = (
    Provider(
        "openai",
        "openai_compat",
        "OpenAICompatSummarizer",
        "OPENAI",
        "import_openai",
        "openai",
        aliases=("openai-compatible", "openai_compat"),
        pi_apis=("openai-completions", "openai-responses"),
    ),
    Provider(
        "anthropic",
        "anthropic",
        "AnthropicSummarizer",
        "ANTHROPIC",
        "import_anthropic",
        "anthropic",
        aliases=("claude",),
        pi_apis=("anthropic-messages",),
    ),
)

#: Names accepted by :func:`get_summarizer` (and ``--summarizer``).
SUMMARIZER_NAMES = ("offline", *(p.name for p in PROVIDERS))

_BY_NAME = {n: p for p in PROVIDERS for n in (p.name, *p.aliases)}


def provider(name: str) -> Provider | None:
    """The :class:`Provider` ``get_summarizer(name)`` would use (aliases included), or None
    (``offline``, or an unknown name)."""
    return _BY_NAME.get((name or "").strip().lower())


def provider_for_pi_api(api: str | None) -> Provider | None:
    """The :class:`Provider` that summarizes for a Pi model whose ``models.json`` ``api`` is
    ``api`` (None: Pi's default, ``openai-completions``), or None when none does."""
    api = "openai-completions" if api is None else api
    return next((p for p in PROVIDERS if api in p.pi_apis), None)


def names_text(sep: str = " or ", fmt: str = "{name}") -> str:
    """The providers joined for a message: ``names_text()`` is ``"openai or anthropic"``,
    ``names_text(" / ", "${env}_MODEL")`` is ``"$OPENAI_MODEL / $ANTHROPIC_MODEL"``."""
    return sep.join(fmt.format(name=p.name, env=p.env) for p in PROVIDERS)
