# hardening.mk - soak, overload and slow-client runs (included by the Makefile).
.PHONY: soak overload slowloris
