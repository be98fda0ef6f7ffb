# The image `kubectl meta deploy` runs: the kubectl-meta binary, static (musl), on distroless's
# static base (no shell, no package manager), as the non-root user 65532.
#
#   docker build -t registry.example.com/kubectl-meta:1 .
#   kubectl meta deploy -f controllers/ --image registry.example.com/kubectl-meta:1 --apply
#
# Exec hooks run from the image's filesystem: add the runtime they need with FROM + COPY (see
# README, "From dev to production").
FROM rust:1.89-alpine AS build
RUN apk add --no-cache musl-dev cmake make perl clang
WORKDIR /src
COPY . .
# The dist profile: LTO, one codegen unit, stripped (see Cargo.toml).
RUN cargo build --profile dist --locked --bin kubectl-meta \
 && cp target/dist/kubectl-meta /kubectl-meta

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /kubectl-meta /usr/local/bin/kubectl-meta
USER 65532:65532
EXPOSE 9090
ENTRYPOINT ["/usr/local/bin/kubectl-meta"]
CMD ["run"]
