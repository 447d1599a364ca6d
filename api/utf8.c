/* utf8.c - UTF-8 validation, encoding and decoding (see utf8.h). */
#include "utf8.h"

#include <string.h>

#include "swar.h"

static bool is_cont(unsigned char c)
{
    return (c & 0xC0) == 0x80;
}

size_t tile_utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0xC2 || c > 0xF4)
        return 0;
    if (c < 0xE0)
        return n >= 2 && is_cont(p[1]) ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || !is_cont(p[1]) || !is_cont(p[2]))
            return 0;
        if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0)) /* overlong, surrogate */
            return 0;
        return 3;
    }
    if (n < 4 || !is_cont(p[1]) || !is_cont(p[2]) || !is_cont(p[3]))
        return 0;
    if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90)) /* overlong, > U+10FFFF */
        return 0;
    return 4;
}

bool tile_utf8_valid(const char *s, size_t len, size_t *bad)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        if (len - i >= 8) { /* eight ASCII bytes at a time: most text is ASCII */
            uint64_t w;
            memcpy(&w, p + i, 8);
            if (!tile_swar_high(w)) {
                i += 8;
                continue;
            }
        }
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t n = tile_utf8_seq(p + i, len - i);
        if (!n) {
            if (bad)
                *bad = i;
            return false;
        }
        i += n;
    }
    return true;
}

size_t tile_utf8_put(uint32_t cp, char *out)
{
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

uint32_t tile_utf8_next(const uint8_t **p)
{
    uint8_t c = *(*p)++;
    if (c < 0x80)
        return c;
    int extra = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
    uint32_t cp = c & (0x3Fu >> extra);
    while (extra--)
        cp = cp << 6 | (*(*p)++ & 0x3Fu);
    return cp;
}
