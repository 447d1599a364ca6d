build/obj/server/main.o: server/main.c
