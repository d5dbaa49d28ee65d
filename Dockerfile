# The Horologe node image: `docker build -t horologe .`; docker-compose.yml runs three.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY horologe horologe
COPY storage storage
COPY wheel wheel
COPY cluster cluster
COPY node node
COPY pipeline pipeline
RUN pip install . && rm -rf /src \
    && useradd --system --home-dir /var/lib/horologe --create-home horologe
USER horologe
WORKDIR /var/lib/horologe
VOLUME /var/lib/horologe
# 8080: HTTP API; 7000: Raft.
EXPOSE 8080 7000
ENTRYPOINT ["horologe"]
CMD ["node", "--config", "/etc/horologe/node.toml"]
