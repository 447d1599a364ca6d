# deploy.mk - image, install and deployment checks (included by the Makefile).
#
#   make image        container image tiled:latest from ./Dockerfile (docker
#                     when a daemon answers, else daemonless buildah on a
#                     debootstrapped Debian 12 base cached in build-image/)
#   make image-test   runs the built image: health, a tile request, the
#                     HEALTHCHECK, read-only root, SIGTERM and exit status 0
#   make deploy-test  Kubernetes and KServe manifests, nginx failover over three
#                     replicas under load (HTTP and gRPC), systemd unit; fast, no image or
#                     cluster needed (needs kubectl, nginx, wrk, systemd)

.PHONY: image image-test deploy-test clean-image

image:
	@sh deploy/image.sh

image-test:
	@sh tests/deploy/test_image.sh

deploy-test: $(BUILD)/tiled
	@sh scripts/deps.sh test
	@sh scripts/venv.sh build/venv
	@status=0; for t in k8s nginx_failover systemd; do \
	  TILED_BIN=$(BUILD)/tiled sh tests/deploy/test_$$t.sh || status=1; \
	done; \
	cd tests/deploy && TILED_BIN=../../$(BUILD)/tiled ../../build/venv/bin/python -m unittest -v test_kserve \
	    test_grpc_failover || status=1; \
	exit $$status

# The debootstrapped base image tarball (images stay in the engine's store).
clean-image:
	rm -rf build-image

# SIGTERM of one of three replicas behind nginx grpc_pass while h2load keeps
# 64 streams in flight: every one of 40,000 calls must succeed. Part of the
# nginx-grpc suite of `make test`; this runs it alone, e.g. many times over.
.PHONY: grpc-drain-stress
grpc-drain-stress: $(BUILD)/tiled
	TILED_BIN=$(BUILD)/tiled build/venv/bin/python -W ignore -m unittest -v \
	    tests.deploy.test_grpc_failover.NginxGrpc.test_sigterm_under_h2load_fails_no_call
