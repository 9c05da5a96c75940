# syntax=docker/dockerfile:1
# One image for every process of hami-scheduler-py:
#   extender (Gunicorn):   gunicorn -c config/gunicorn.conf.py wsgi:app      (the default command; every route
#                          on 127.0.0.1:8443 unless HAMI_ROUTES/HAMI_BIND say otherwise: the Helm chart runs
#                          HAMI_ROUTES=scheduler on 8444 and HAMI_ROUTES=public on 8443, docs/security.md)
#   registration worker:   python -m workers
# Build:  docker build -t hami-scheduler-py:0.1.0 .        (docs/install.md), or `make image` (buildah, no
#         Docker engine; docs/container-image.md)
# Runs as a numeric non-root user with a read-only root filesystem: the only writable paths are the volumes the
# Helm chart mounts (/var/run/hami for shared state and Prometheus multiprocess files, /tmp).

ARG PYTHON_IMAGE=python:3.11-slim

# --- builder: the locked runtime dependencies (requirements/runtime.txt, hashes checked), then the project ----
FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
COPY requirements/runtime.txt requirements/build.txt ./requirements/
# Exactly the versions and hashes `make lock` recorded; --no-deps so nothing unlocked is resolved.
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --require-hashes --no-deps \
        --requirement requirements/build.txt --requirement requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY app ./app
COPY workers ./workers
COPY config ./config
# The project itself, for the `hami-scheduler` console script (docs/cli.md); the services run from /app. The
# locked setuptools builds it; it and the venv's pip are removed afterwards (nothing installs at run time).
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps --no-build-isolation /src \
    && /opt/venv/bin/python -m pip uninstall --yes setuptools pip

# --- runtime --------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
ARG PYTHON_IMAGE
ARG VERSION=0.1.0
ARG REVISION=unknown
ARG CREATED=unknown
LABEL org.opencontainers.image.title="hami-scheduler-py" \
      org.opencontainers.image.description="HAMi-compatible GPU-sharing scheduler extender, admission webhook and registration worker" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"

# A passwd entry for the numeric user keeps libraries that look the user up (getpass, ~ expansion) happy. The
# base's own pip (python:3.11-slim ships one; Debian's python3 does not) goes: nothing installs at run time.
RUN groupadd --system --gid 10001 hami \
    && useradd --system --no-log-init --uid 10001 --gid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin hami \
    && if python -m pip --version >/dev/null 2>&1; then python -m pip uninstall --yes pip setuptools wheel; fi

# PROMETHEUS_MULTIPROC_DIR is Gunicorn's aggregated metrics directory (created by config/gunicorn.conf.py);
# the Helm chart points the registration worker at its own /tmp instead. HAMI_BUILD_* label hami_build_info.
ENV PATH=/opt/venv/bin:$PATH \
    HAMI_BUILD_VERSION=${VERSION} \
    HAMI_BUILD_REVISION=${REVISION} \
    HAMI_BUILD_DATE=${CREATED} \
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
EXPOSE 8443 8444 9395
CMD ["gunicorn", "-c", "config/gunicorn.conf.py", "wsgi:app"]
