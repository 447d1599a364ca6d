# transport.mk - the two designs that keep strict framing in front of
# libmicrohttpd without interposing recv(), against the library's own floor
# (included by the Makefile).
#
#   make bench-transport-options   nginx `return 200`, bench/mhd_floor.c,
#                                  bench/relay_floor.c (design A: the
#                                  application's socket, h1wire.c, a socketpair
#                                  to libmicrohttpd in external epoll mode) and
#                                  bench/own_floor.c (design B: its own reader
#                                  and writer, no library), same run
#   make bench-transport-syscalls  system calls per request of the three floors
#
# Both link server/http/h1wire.c (pure C) and nothing else of tiled.
# Needs wrk, nginx, curl and python3 (scripts/deps.sh bench installs them,
# with more); the syscall count needs perf or strace. TRANSPORT_ARGS passes
# options to bench/transport_options.sh (e.g. TRANSPORT_ARGS="--rounds 2 --dur 2").
TRANSPORT_ARGS ?=

$(BUILD)/bench/relay_floor: bench/relay_floor.c bench/floor.h server/http/h1wire.c server/http/h1wire.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Iserver/http $(MHD_CFLAGS) -o $@ bench/relay_floor.c server/http/h1wire.c \
	    $(MHD_LIBS) $(LDLIBS)

$(BUILD)/bench/own_floor: bench/own_floor.c bench/floor.h server/http/h1wire.c server/http/h1wire.h
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -Iserver/http -o $@ bench/own_floor.c server/http/h1wire.c $(LDLIBS)

.PHONY: bench-transport-options
bench-transport-options: $(BUILD)/bench/mhd_floor $(BUILD)/bench/relay_floor $(BUILD)/bench/own_floor
	sh bench/transport_options.sh --bin $(BUILD)/bench $(TRANSPORT_ARGS)

# System calls per request of the three floors under wrk (perf stat on the
# syscall tracepoints; TRANSPORT_SYSCALLS_ARGS=--strace counts with strace -c).
TRANSPORT_SYSCALLS_ARGS ?=
.PHONY: bench-transport-syscalls
bench-transport-syscalls: $(BUILD)/bench/mhd_floor $(BUILD)/bench/relay_floor $(BUILD)/bench/own_floor
	sh bench/transport_syscalls.sh --bin $(BUILD)/bench $(TRANSPORT_SYSCALLS_ARGS)
