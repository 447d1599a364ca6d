# peers.mk - benchmarks against peers (included by the Makefile).
#
#   make bench-peers                       the full run (~22 min), writes bench/REPORT.md and plots
#   make bench-peers PEERS_ARGS="--dur 2 --reps 5"            quicker and noisier
#   make bench-peers PEERS_ARGS=--report-only                 report from the last raw results
#   make bench-peers PEERS_ARGS="--skip-kernel --skip-service" only the race against
#                                   Triton, KServe and MLServer (~10 min)
#
# Installs what it needs (bench/peers/setup.sh): Debian's python3-numpy,
# python3-torch, python3-fastapi, python3-uvicorn, gnuplot-nox, wrk, nginx,
# onnxruntime + onnx from PyPI in $(PEERS_VENV), and for the race
# nvidia-pytriton, kserve and mlserver from PyPI, each in a venv of its own
# beside it. perf_analyzer comes from scripts/perf_analyzer.sh, h2load from
# Debian's nghttp2-client. Not part of `make test`.
PEERS_VENV ?= $(BUILD)/venv-peers
PEERS_ARGS ?=

.PHONY: bench-peers
bench-peers: $(BUILD)/tiled $(BUILD)/bench/bench_peers $(BUILD)/bench/mhd_floor
	@sh bench/peers/setup.sh $(PEERS_VENV)
	$(PEERS_VENV)/bin/python bench/peers/run.py --tiled $(BUILD)/tiled --driver $(BUILD)/bench/bench_peers \
	    --mhd-floor $(BUILD)/bench/mhd_floor --work $(BUILD)/bench-peers $(PEERS_ARGS)
