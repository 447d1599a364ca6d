# peers.mk - benchmarks against peers (included by the Makefile).
.PHONY: bench-peers
