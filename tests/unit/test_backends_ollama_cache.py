"""Ollama's prompt counts net of its cache, made whole (`backends.ollama.cache`)."""

from __future__ import annotations

from acp_server.backends.ollama.cache import PromptCache
from acp_server.messages import Usage, text_message

ASK = (text_message("user", "read a.py"),)
LONGER = (*ASK, text_message("assistant", "It begins with x."), text_message("user", "and b?"))


def test_a_count_net_of_the_cache_gets_the_cached_part_back() -> None:
    cache = PromptCache()
    assert cache.read("sys", ASK, Usage(3000, 10)) == Usage(3000, 10)
    assert cache.read("sys", LONGER, Usage(400, 10)) == Usage(3400, 10, cached_tokens=3000)


def test_a_full_count_is_left_as_it_is() -> None:
    cache = PromptCache()
    cache.read("sys", ASK, Usage(3000, 10))
    assert cache.read("sys", LONGER, Usage(3400, 10)) == Usage(3400, 10)


def test_a_history_that_does_not_extend_the_last_one_is_not_taken_for_cached() -> None:
    cache = PromptCache()
    cache.read("sys", LONGER, Usage(3400, 10))
    assert cache.read("sys", ASK, Usage(700, 10)) == Usage(700, 10)  # compacted: a new prefix
    cache.read("sys", ASK, Usage(3000, 10))
    assert cache.read("another system prompt", LONGER, Usage(400, 10)) == Usage(400, 10)
