# fuzz.mk - libFuzzer targets (included by the Makefile).
.PHONY: fuzz
fuzz:
	@echo "no fuzz targets yet"
