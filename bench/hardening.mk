# hardening.mk - soak, overload and slow-client runs (included by the Makefile).
#
#   make soak          1,000,000 mixed valid/invalid requests with wrk; checks statuses,
#                      socket errors and RSS drift (SOAK_REQUESTS=100000 for a quick run)
#   make overload      --workers 1 --queue 2 flooded: 503 latency, throughput around it
#   make slowloris     a normal client's latency beside 1000 header-trickling connections
#
# Each builds the daemon first and runs against $(BUILD)/tiled (build/tiled
# unless a variant is chosen, e.g. make SAN=address soak). Loopback only.
.PHONY: soak overload slowloris

soak: $(BUILD)/tiled
	@sh scripts/deps.sh bench
	TILED_BIN=$(BUILD)/tiled sh bench/soak.sh

overload: $(BUILD)/tiled
	@sh scripts/deps.sh bench
	TILED_BIN=$(BUILD)/tiled sh bench/overload.sh

slowloris: $(BUILD)/tiled
	@sh scripts/deps.sh bench
	TILED_BIN=$(BUILD)/tiled /usr/bin/python3 bench/slowloris.py
