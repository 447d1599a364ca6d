# tiled container image: `make image` builds it (docker, podman or buildah).
#
#   build    Debian 12 with the compiler and -dev packages; builds build/tiled
#            with the project Makefile and strips it.
#   runtime  Debian 12 slim with the three runtime libraries and the binary,
#            running as uid 10001: HTTP on 0.0.0.0:8080, gRPC on 0.0.0.0:8081.
ARG DEBIAN_IMAGE=debian:bookworm-slim

FROM ${DEBIAN_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
# The packages of `scripts/deps.sh build`, installed here so that make finds
# them all present and never runs apt itself.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      gcc libc6-dev make pkg-config binutils \
      libjansson-dev zlib1g-dev libcmocka-dev libnghttp2-dev libgnutls28-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
ARG GIT_COMMIT=unknown
RUN make -j"$(nproc)" build/tiled GIT_COMMIT="$GIT_COMMIT" \
 && install -D -s -m 0755 build/tiled /out/usr/local/bin/tiled \
 && /out/usr/local/bin/tiled serve --print-config >/dev/null

FROM ${DEBIAN_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends libjansson4 zlib1g libnghttp2-14 libgnutls30 \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log \
 && groupadd --gid 10001 tiled \
 && useradd --uid 10001 --gid 10001 --no-create-home \
      --home-dir /nonexistent --shell /usr/sbin/nologin tiled
# Numeric so that Kubernetes can check runAsNonRoot without /etc/passwd.
USER 10001:10001
# gRPC next to HTTP, as KServe's model servers pair 8080 with 8081 (the bare
# binary leaves gRPC off: --grpc-port -1).
ENV TILED_HOST=0.0.0.0 \
    TILED_PORT=8080 \
    TILED_GRPC_PORT=8081
EXPOSE 8080 8081
# SIGTERM drains in-flight requests (TILED_DRAIN_TIMEOUT, 20 s by default),
# then the process exits 0: give `docker stop -t` more than that.
STOPSIGNAL SIGTERM
# The probe asks the daemon on TILED_PORT, over https when TLS is on
# (TILED_TLS_CERT set): --insecure, since the certificate names the service,
# not 127.0.0.1, and what is checked is that the daemon answers ready. With
# TILED_TLS_CLIENT_CA (mutual TLS) it needs a client certificate: replace this
# with `tiled probe --cert FILE --key FILE ...` (docs/operations.md, Health checks).
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
  CMD if [ -n "$TILED_TLS_CERT" ]; \
      then exec /usr/local/bin/tiled probe --insecure "https://127.0.0.1:${TILED_PORT:-8080}/v2/health/ready"; \
      else exec /usr/local/bin/tiled probe "http://127.0.0.1:${TILED_PORT:-8080}/v2/health/ready"; fi
ENTRYPOINT ["/usr/local/bin/tiled"]
CMD ["serve"]
# Last, so that a new binary reuses every layer above.
ARG GIT_COMMIT=unknown
LABEL org.opencontainers.image.title="tiled" \
      org.opencontainers.image.description="HTTP inference microservice for the ONNX Tile operator" \
      org.opencontainers.image.revision="${GIT_COMMIT}"
COPY --from=build /out/ /
