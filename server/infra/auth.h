/* auth.h - API keys: Authorization: Bearer KEY against --api-key-file. */
#ifndef TILED_AUTH_H
#define TILED_AUTH_H

#include <stdbool.h>

#include "error.h"

/* Loads (or reloads) the key file; an empty path disables authentication. */
int tiled_auth_load(const char *path, struct tile_error *e);
void tiled_auth_free(void);
bool tiled_auth_enabled(void);
/* True when `authorization` is "Bearer KEY" with a configured key. */
bool tiled_auth_check(const char *authorization);

#endif
