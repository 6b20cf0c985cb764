"""Like locustfile.py, but every request goes through the official openai SDK (see README: it costs more CPU)."""

import locust_llm
from locust_llm import OpenAISdkUser, StepShape  # noqa: F401  (Locust picks up the user and the shape)

locust_llm.install()
