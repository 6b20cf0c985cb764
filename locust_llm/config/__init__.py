"""The run's settings: the flag table, value parsers, ``RunConfig``, TLS, secrets, GC settings. Pure."""
