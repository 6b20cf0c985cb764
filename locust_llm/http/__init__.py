"""The gevent HTTP/1.1 streaming client: :func:`~locust_llm.http.stream.run_stream` and its result.

Every private name of geventhttpclient and gevent that locust-llm relies on is used in this package and only here
(docs/architecture.md, "Private names").
"""
