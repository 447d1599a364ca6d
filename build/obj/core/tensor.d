build/obj/core/tensor.o: core/tensor.c core/tensor.h core/dtype.h \
 core/error.h
core/tensor.h:
core/dtype.h:
core/error.h:
