/* error.c - see error.h. */
#include "error.h"

#include <stdio.h>
#include <string.h>

void tile_error_clear(struct tile_error *e)
{
    if (e) {
        e->code = TILE_OK;
        e->text[0] = '\0';
    }
}

int tile_error_vset(struct tile_error *e, enum tile_errcode code, const char *fmt, va_list ap)
{
    if (!e || e->code != TILE_OK)
        return -1;
    e->code = code;
    vsnprintf(e->text, sizeof(e->text), fmt, ap);
    return -1;
}

int tile_error_set(struct tile_error *e, enum tile_errcode code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tile_error_vset(e, code, fmt, ap);
    va_end(ap);
    return -1;
}

const char *tile_errcode_name(enum tile_errcode code)
{
    static const char *const names[TILE_ERRCODE_COUNT] = {
        [TILE_OK] = "ok",
        [TILE_EINVAL] = "invalid",
        [TILE_ETOOBIG] = "too_big",
        [TILE_ENOMEM] = "no_memory",
        [TILE_EIO] = "io",
        [TILE_EUNSUPPORTED] = "unsupported",
        [TILE_ENOTACCEPT] = "not_acceptable",
    };
    if ((unsigned)code >= TILE_ERRCODE_COUNT)
        return "unknown";
    return names[code];
}
