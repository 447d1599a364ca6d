/* mhd.h - the libmicrohttpd transport (mhd.c), serving HTTPS until the
 * project's own loops (loop.c) read TLS sessions. Same contract as the
 * functions of http.h, which call these when TLS is configured. */
#ifndef TILED_MHD_H
#define TILED_MHD_H

#include <stdbool.h>

#include "error.h"

struct tiled_server;

int tiled_mhd_start(struct tiled_server *srv, struct tile_error *e);
void tiled_mhd_quiesce(struct tiled_server *srv);
bool tiled_mhd_drained(struct tiled_server *srv);
void tiled_mhd_stop(struct tiled_server *srv);
const char *tiled_mhd_library(void);

#endif
