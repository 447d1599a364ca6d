# deploy.mk - image, install and deployment checks (included by the Makefile).
#
#   make image        container image tiled:latest from ./Dockerfile
#                     (docker when a daemon answers, else daemonless buildah)
#   make image-test   runs the built image: health, a tile request, SIGTERM
#   make deploy-test  Kubernetes manifests, nginx failover over three
#                     replicas, systemd unit; fast, no image or cluster needed

.PHONY: image image-test deploy-test

image:
	@sh deploy/image.sh

image-test:
	@sh tests/deploy/test_image.sh

deploy-test: $(BUILD)/tiled
	@TILED_BIN=$(BUILD)/tiled sh tests/deploy/test_k8s.sh
	@TILED_BIN=$(BUILD)/tiled sh tests/deploy/test_nginx_failover.sh
	@TILED_BIN=$(BUILD)/tiled sh tests/deploy/test_systemd.sh
