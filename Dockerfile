# The Horologe node image: `docker build -t horologe .`; docker-compose.yml runs three.
# BASE is any Debian-like image with python3 (>= 3.11) and its venv module: the official
# python:3.11-slim, or where no registry answers, the one deploy/base-image.sh makes
# from Debian packages (docs/deploy.md).
ARG BASE=python:3.11-slim
FROM ${BASE}

# A venv on PATH: the Debian base has python3 but no `python`, and its pip is Debian's.
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/horologe/bin:$PATH
WORKDIR /src
COPY pyproject.toml README.md ./
COPY horologe horologe
COPY storage storage
COPY wheel wheel
COPY cluster cluster
COPY node node
COPY pipeline pipeline
RUN python3 -m venv /opt/horologe && pip install --quiet . && rm -rf /src \
    && useradd --system --home-dir /var/lib/horologe --create-home horologe
USER horologe
WORKDIR /var/lib/horologe
VOLUME /var/lib/horologe
# 8080: HTTP API; 7000: Raft.
EXPOSE 8080 7000
ENTRYPOINT ["horologe"]
CMD ["node", "--config", "/etc/horologe/node.toml"]
