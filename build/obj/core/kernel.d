build/obj/core/kernel.o: core/kernel.c core/tile.h core/dtype.h \
 core/error.h core/plan.h core/tensor.h core/pool.h
core/tile.h:
core/dtype.h:
core/error.h:
core/plan.h:
core/tensor.h:
core/pool.h:
