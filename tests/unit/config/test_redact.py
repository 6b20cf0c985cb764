from hypothesis import given
from hypothesis import strategies as st

from locust_llm.config.redact import redact


def test_every_secret_is_replaced_everywhere():
    assert redact("key sk-1 and again sk-1, other k-2", ["sk-1", "k-2"]) == "key *** and again ***, other ***"


def test_bearer_tokens_are_removed_even_when_unknown():
    assert redact("Authorization: Bearer abc.def-123") == "Authorization: Bearer ***"
    assert redact('{"auth": "bearer xyz"}') == '{"auth": "bearer ***"}'


def test_empty_secrets_are_ignored():
    assert redact("nothing to hide", ["", ""]) == "nothing to hide"


NO_STAR = st.characters(blacklist_characters="*")


@given(st.text(NO_STAR, min_size=1), st.text(NO_STAR), st.text(NO_STAR))
def test_a_secret_never_survives(secret, before, after):
    assert secret not in redact(before + secret + after, [secret])
