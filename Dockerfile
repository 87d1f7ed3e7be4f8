# The sluice service as an image: built with cargo in a Rust image, run from a distroless base
# (glibc, CA roots, no shell, no package manager) as a non-root user.
#
#   docker build --build-arg SLUICE_BUILD_COMMIT=$(git rev-parse HEAD) -t sluice:0.1.0 .
#   docker run -p 8080:8080 sluice:0.1.0
#
# Settings come from the environment (`sluice serve --help` lists every variable): the image
# listens on 0.0.0.0:8080 and reads /etc/sluice/sluice.yaml; mount your rules there (a directory
# mount, so that edits reload) and set SLUICE_STORE=redis://... to share limits between replicas.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# .git is not sent to the build (.dockerignore): the commit `sluice --version` prints and
# `sluice_build_info{commit}` carries comes in here, through the one variable the build reads.
ARG SLUICE_BUILD_COMMIT=
ENV SLUICE_BUILD_COMMIT=${SLUICE_BUILD_COMMIT}
RUN cargo build --release --locked -p sluice-ratelimit-cli \
    && objcopy --strip-debug target/release/sluice /sluice

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /sluice /usr/bin/sluice
COPY deploy/sluice.yaml /etc/sluice/sluice.yaml
ENV SLUICE_LISTEN=0.0.0.0:8080 \
    SLUICE_CONFIG=/etc/sluice/sluice.yaml \
    SLUICE_LOG_FORMAT=json
# 8081: Envoy's rate-limit service over gRPC, when SLUICE_GRPC_LISTEN is set (off by default).
EXPOSE 8080 8081
# distroless' nonroot user (65532); the manifests in deploy/kubernetes run as the same.
USER 65532:65532
# On SIGTERM the service stops accepting and finishes requests in flight (SLUICE_SHUTDOWN_TIMEOUT).
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/sluice"]
CMD ["serve"]
