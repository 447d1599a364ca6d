/* jsontext.c - JSON strings from bytes a client sent (see jsontext.h). */
#include "jsontext.h"

#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at p (0 if invalid). */
static size_t utf8_seq(const unsigned char *p)
{
    size_t n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 && p[0] < 0xf0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
    }
    if ((n == 3 && p[0] == 0xe0 && p[1] < 0xa0) || (n == 3 && p[0] == 0xed && p[1] >= 0xa0) ||
        (n == 4 && p[0] == 0xf0 && p[1] < 0x90) || (n == 4 && p[0] == 0xf4 && p[1] >= 0x90))
        return 0; /* overlong, surrogate or above U+10FFFF */
    return n;
}

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
        size_t seq = *p < 0x80 ? 1 : utf8_seq(p);
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
    static const char hex[] = "0123456789ABCDEF"; /* jansson writes upper case */
    char *o = out;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        unsigned char c = *p;
        if (c >= 0x80) {
            size_t seq = utf8_seq(p);
            if (seq == 0) {
                memcpy(o, "\xef\xbf\xbd", 3); /* U+FFFD, as tiled_json_text() */
                o += 3;
                p++;
            } else {
                memcpy(o, p, seq);
                o += seq;
                p += seq;
            }
            continue;
        }
        p++;
        if (c == '"' || c == '\\') {
            *o++ = '\\';
            *o++ = (char)c;
        } else if (c >= 0x20) {
            *o++ = (char)c;
        } else if (c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f') {
            *o++ = '\\';
            *o++ = c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't' : c == '\b' ? 'b' : 'f';
        } else {
            memcpy(o, "\\u00", 4);
            o[4] = hex[c >> 4];
            o[5] = hex[c & 15];
            o += 6;
        }
    }
    *o++ = '"';
    return (size_t)(o - out);
}
