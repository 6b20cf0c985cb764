# locust-llm: one image for the Locust master, its workers and the simulator.
#   docker build -t ghcr.io/OWNER/locust-llm:0.1.0 .
# Build stage: a virtualenv with locust-llm and its dependencies (all of them ship wheels for this platform).
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md ./
COPY locust_llm ./locust_llm
RUN /opt/venv/bin/pip install --no-compile .

# Final stage: the virtualenv and the locustfiles, a non-root user, no build tools.
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp
COPY --from=build /opt/venv /opt/venv
COPY locustfile.py locustfile_sdk.py /app/
RUN useradd --system --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin locust
USER 10001:10001
WORKDIR /app
EXPOSE 5557 8089 8000
ENTRYPOINT ["locust"]
CMD ["-f", "/app/locustfile.py", "--help"]
