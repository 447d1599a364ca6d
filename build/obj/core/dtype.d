build/obj/core/dtype.o: core/dtype.c core/dtype.h
core/dtype.h:
