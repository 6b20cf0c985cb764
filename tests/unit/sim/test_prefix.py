import pytest

from locust_llm.sim.prefix import PrefixCache, cache_prefix, prefix_key

S = 1_000_000_000
SYSTEM = {"role": "system", "content": "You are terse."}
USER = {"role": "user", "content": "hi"}
MARKED = {"role": "user", "content": "long shared context", "cache_control": {"type": "ephemeral"}}
PART_MARKED = {"role": "user", "content": [{"type": "text", "text": "ctx", "cache_control": {"type": "ephemeral"}}]}


@pytest.mark.parametrize(
    ("messages", "mode", "expected"),
    [
        ([SYSTEM, USER], "auto", [SYSTEM]),  # a leading system prompt is cacheable
        ([SYSTEM, USER], "hint", []),  # ... but not in hint mode, without a mark
        ([SYSTEM, USER], "off", []),
        ([SYSTEM], "auto", []),  # a system prompt alone is the whole request, not a prefix
        ([SYSTEM, MARKED, USER], "auto", [SYSTEM, MARKED]),  # up to the last marked message
        ([SYSTEM, MARKED, USER], "hint", [SYSTEM, MARKED]),
        ([PART_MARKED, USER], "hint", [PART_MARKED]),  # a mark on a content part counts
        ([USER, USER], "auto", []),
    ],
)
def test_cache_prefix(messages, mode, expected):
    assert cache_prefix(messages, mode) == expected


def test_prefix_key_is_stable_and_distinguishes_prefixes():
    assert prefix_key([SYSTEM]) == prefix_key([dict(SYSTEM)])
    assert prefix_key([SYSTEM]) != prefix_key([SYSTEM, MARKED])
    assert len(prefix_key([SYSTEM])) == 24


def test_a_hit_within_the_ttl_refreshes_the_entry():
    cache = PrefixCache(capacity_tokens=100, ttl_s=10)
    assert not cache.lookup("a", 0)
    cache.insert("a", 40, 0)
    assert cache.lookup("a", 9 * S)
    assert cache.lookup("a", 18 * S)  # refreshed at 9 s
    assert not cache.lookup("a", 29 * S) and len(cache) == 0 and cache.tokens == 0  # expired, removed


def test_inserting_beyond_capacity_evicts_the_least_recently_used():
    cache = PrefixCache(capacity_tokens=100, ttl_s=60)
    cache.insert("a", 40, 0)
    cache.insert("b", 40, 1)
    cache.lookup("a", 2)  # a is now the most recently used
    cache.insert("c", 40, 3)
    assert cache.lookup("a", 4) and cache.lookup("c", 4) and not cache.lookup("b", 4)
    assert cache.tokens == 80


def test_a_prefix_larger_than_the_cache_is_not_kept():
    cache = PrefixCache(capacity_tokens=10, ttl_s=60)
    cache.insert("big", 11, 0)
    assert len(cache) == 0 and not cache.lookup("big", 0)
