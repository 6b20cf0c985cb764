"""Stream chat completions and step concurrency 8 -> 128 (see README). No --host: an embedded simulator is used."""

import locust_llm
from locust_llm import ChatStreamUser, StepShape  # noqa: F401  (Locust picks up the user and the shape)

locust_llm.install()
