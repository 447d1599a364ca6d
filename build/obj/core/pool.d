build/obj/core/pool.o: core/pool.c core/pool.h core/error.h
core/pool.h:
core/error.h:
