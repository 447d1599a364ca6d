build/obj/core/plan.o: core/plan.c core/plan.h core/dtype.h core/error.h \
 core/tensor.h
core/plan.h:
core/dtype.h:
core/error.h:
core/tensor.h:
