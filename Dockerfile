# syntax=docker/dockerfile:1
# One image for both processes of hami-scheduler-py:
#   extender (Gunicorn):   gunicorn -c config/gunicorn.conf.py wsgi:app      (the default command)
#   registration worker:   python -m workers
# Build:  docker build -t hami-scheduler-py:0.1.0 .        (docs/install.md)
# Runs as a numeric non-root user with a read-only root filesystem: the only writable paths are the volumes the
# Helm chart mounts (/var/run/hami for shared state and Prometheus multiprocess files, /tmp).

ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: runtime dependencies only (pyproject.toml [project].dependencies, no dev extras) -------------------
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY pyproject.toml ./
# The dependency list is read from pyproject.toml, so the image and `pip install -e .` never drift apart; the
# project itself is not installed (the code runs from /app, see below).
RUN python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; open('requirements.txt', 'w').write(chr(10).join(deps) + chr(10))" \
    && python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --requirement requirements.txt

# --- runtime --------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="hami-scheduler-py" \
      org.opencontainers.image.description="HAMi-compatible GPU-sharing scheduler extender, admission webhook and registration worker" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="python:3.11-slim"

# A passwd entry for the numeric user keeps libraries that look the user up (getpass, ~ expansion) happy.
RUN groupadd --system --gid 10001 hami \
    && useradd --system --no-log-init --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin hami

# PROMETHEUS_MULTIPROC_DIR is Gunicorn's aggregated metrics directory (created by config/gunicorn.conf.py);
# the Helm chart points the registration worker at its own /tmp instead.
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HAMI_STATE_DIR=/var/run/hami \
    PROMETHEUS_MULTIPROC_DIR=/var/run/hami/metrics

COPY --from=builder /opt/venv /opt/venv
WORKDIR /app
COPY pyproject.toml wsgi.py ./
COPY app ./app
COPY workers ./workers
COPY config ./config
# Byte-compile at build time: at run time the root filesystem is read-only and PYTHONDONTWRITEBYTECODE is set.
RUN python -m compileall -q /app

USER 10001:10001
EXPOSE 8443 9395
CMD ["gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"]
