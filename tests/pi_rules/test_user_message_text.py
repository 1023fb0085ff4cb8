"""One home for the text Pi takes from a user message's content (Pi agent-session
``_extractUserMessageText``: the editor text after navigating to a user message, and RPC
``get_fork_messages``): :func:`sessiontree.orchestration.user_message_text`. The RPC server and
tree navigation had a copy each (``_user_text``)."""

from __future__ import annotations

import pytest

from sessiontree import orchestration, rpc
from sessiontree.orchestration import user_message_text


@pytest.mark.parametrize(
    "content,want",
    [
        ("plain", "plain"),
        ("", ""),
        ([{"type": "text", "text": "a"}, {"type": "image", "data": "x"}, {"type": "text", "text": "b"}], "ab"),
        ([{"type": "text", "text": 5}, {"type": "text"}, None, "s", {"type": "text", "text": "c"}], "c"),
        ([], ""),
        (None, ""),
        (7, ""),
        ({"type": "text", "text": "x"}, ""),
    ],
)
def test_the_rule(content, want):
    assert user_message_text(content) == want


def test_the_rpc_server_and_navigation_share_it():
    assert rpc.user_message_text is orchestration.user_message_text
    assert not hasattr(rpc, "_user_text") and not hasattr(orchestration, "_user_text")
