/* text.c - JSON strings from bytes a client sent (see text.h). */
#include "text.h"

#include <stdlib.h>
#include <string.h>

#include "numfmt.h"
#include "utf8.h"

json_t *tiled_json_text(const char *s)
{
    size_t len = strlen(s);
    json_t *j = json_stringn(s, len); /* the common case: already valid */
    if (j)
        return j;
    char *fixed = malloc(len * 3 + 1); /* each bad byte grows to the 3 bytes of U+FFFD */
    if (!fixed)
        return NULL;
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t seq = *p < 0x80 ? 1 : tile_utf8_seq(p, len - (size_t)(p - (const unsigned char *)s));
        if (seq == 0) {
            memcpy(fixed + n, "\xef\xbf\xbd", 3);
            n += 3;
            p++;
        } else {
            memcpy(fixed + n, p, seq);
            n += seq;
            p += seq;
        }
    }
    j = json_stringn(fixed, n);
    free(fixed);
    return j;
}

char *tiled_json_dump(json_t *doc)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT) : NULL;
    json_decref(doc);
    return text;
}

size_t tiled_json_quote(char *out, const char *s)
{
    return tiled_json_quote_n(out, s, strlen(s));
}

size_t tiled_json_quote_n(char *out, const char *s, size_t len)
{
    return (size_t)tile_json_escape_text(s, len, out, TILED_JSON_QUOTED_MAX(len));
}

char *tiled_copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
    return dst;
}
