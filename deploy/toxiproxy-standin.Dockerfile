# The chaos suite's toxiproxy stand-in (chaos_tests/toxiproxy_standin.py) as an image, for
# machines that cannot pull ghcr.io/shopify/toxiproxy; deploy/compose/host/ chooses it.
# Build from the repository root: docker build -f deploy/toxiproxy-standin.Dockerfile .
ARG BASE=python:3.11-slim
FROM ${BASE}

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python3 -m venv /opt/standin && /opt/standin/bin/pip install --quiet "aiohttp>=3.9,<4"
COPY chaos_tests/toxiproxy_standin.py /opt/standin/toxiproxy_standin.py
USER nobody
ENTRYPOINT ["/opt/standin/bin/python", "/opt/standin/toxiproxy_standin.py"]
CMD ["--host", "0.0.0.0", "--port", "8474"]
