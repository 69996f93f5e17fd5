# syntax=docker/dockerfile:1
# One image, both processes: `gpu-exporter` (DaemonSet) and `gpu-autoscaler` (Deployment); `gpu-fleet`, the
# fleet CLI, comes with it (e.g. `kubectl run` it next to Prometheus).
#   docker build -t ghcr.io/gpu-autoscaler/gpu-autoscaler:0.1.0 --build-arg VERSION=0.1.0 .
#   docker run --rm -p 9400:9400 ghcr.io/gpu-autoscaler/gpu-autoscaler:0.1.0 gpu-exporter --simulate 2
# The build stage installs the project and its dependencies into a virtualenv; the final stage copies only
# that virtualenv onto a fresh slim base: no compiler, no pip cache, no sources, a non-root user.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# Behind a proxy with its own certificate authority, pass the host's trust store instead of turning
# verification off: --volume /etc/ssl/certs/ca-certificates.crt:/run/host-ca.crt:ro --build-arg
# PIP_CERT=/run/host-ca.crt (an ARG is in the environment of every RUN: pip reads PIP_CERT; uv is given it
# as SSL_CERT_FILE).
ARG PIP_CERT
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never \
    UV_COMPILE_BYTECODE=1 \
    UV_PYTHON=/opt/venv/bin/python
# uv installs into the virtualenv, in a fraction of pip's time: the uv all.txt pins (requirements/build.txt,
# hash-checked), kept in /opt/uv, which the final stage does not copy.
WORKDIR /src
COPY requirements/build.txt requirements/runtime.txt ./requirements/
RUN python -m venv /opt/venv \
    && /opt/venv/bin/pip install --require-hashes --no-deps --target /opt/uv -r requirements/build.txt
# The dependencies first, from the lock (every version and hash pinned, scripts/lock.sh writes it): a layer
# that changes only when the lock does, and an image that installs what the suite ran against. Binary wheels
# where there are some (every dependency has them on amd64 and arm64), compiled to bytecode (the final image
# never writes it); a compiler only in this stage, and only on an architecture where a dependency (grpcio)
# has none.
RUN uv() { env ${PIP_CERT:+"SSL_CERT_FILE=$PIP_CERT"} /opt/uv/bin/uv "$@"; } \
    && { uv pip install --require-hashes --no-deps --only-binary :all: -r requirements/runtime.txt \
         || { apt-get update \
              && apt-get install -y --no-install-recommends gcc g++ \
              && rm -rf /var/lib/apt/lists/* \
              && uv pip install --require-hashes --no-deps -r requirements/runtime.txt; }; }
COPY pyproject.toml README.md LICENSE ./
COPY exporter ./exporter
COPY autoscaler ./autoscaler
COPY plumbing ./plumbing
COPY fleet ./fleet
# The project alone: --no-deps, so nothing outside the lock is installed (`uv pip check` proves nothing is
# missing).
RUN uv() { env ${PIP_CERT:+"SSL_CERT_FILE=$PIP_CERT"} /opt/uv/bin/uv "$@"; } \
    && uv pip install --no-deps /src \
    && uv pip check

FROM ${PYTHON_IMAGE} AS runtime
ARG VERSION=0.1.0
ARG SOURCE=https://github.com/gpu-autoscaler/gpu-autoscaler
LABEL org.opencontainers.image.title="gpu-autoscaler" \
      org.opencontainers.image.description="NVIDIA GPU Prometheus exporter and an HPA-exact autoscaler for GPU services" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=build /opt/venv /opt/venv
# Fail the build if a console script cannot start.
RUN gpu-exporter --help >/dev/null \
    && gpu-autoscaler --help >/dev/null \
    && gpu-fleet --help >/dev/null \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin nonroot
USER 65532:65532
EXPOSE 9400 9401
CMD ["gpu-exporter"]
