/* accept.c - Accept and Accept-Encoding elements and weights (see accept.h). */
#include "accept.h"

#include <stdint.h>

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

/* qvalue = ( "0" [ "." 0*3DIGIT ] ) / ( "1" [ "." 0*3("0") ] ), exactly
 * s[0, n); thousandths, or -1 when it is not one. */
static int qvalue(const char *s, size_t n)
{
    if (n == 0 || (s[0] != '0' && s[0] != '1') || (n > 1 && s[1] != '.') || n > 5)
        return -1;
    int q = (s[0] - '0') * 1000;
    for (size_t i = 2, scale = 100; i < n; i++, scale /= 10) {
        if (s[i] < '0' || s[i] > '9' || (s[0] == '1' && s[i] != '0'))
            return -1;
        q += (s[i] - '0') * (int)scale;
    }
    return q;
}

/* Length of s[0, n) up to its first `stop` outside a quoted string
 * (RFC 9110 5.6.4: from '"' to '"', a backslash taking the next byte
 * as it is), or
 * up to n or the end of s. A parameter value such as charset="a,b;q=0"
 * neither ends its element nor its parameter there; an unclosed quoted
 * string runs to the end of the header. */
static size_t span_to(const char *s, size_t n, char stop)
{
    bool quoted = false;
    size_t i = 0;
    for (; i < n && s[i]; i++) {
        if (quoted) {
            if (s[i] == '\\' && i + 1 < n && s[i + 1])
                i++;
            else if (s[i] == '"')
                quoted = false;
        } else if (s[i] == stop) {
            break;
        } else if (s[i] == '"') {
            quoted = true;
        }
    }
    return i;
}

bool tiled_accept_next(const char **p, struct tiled_accept_elem *el)
{
    const char *s = *p;
    while (*s == ',' || is_ows(*s))
        s++;
    if (!*s) {
        *p = s;
        return false;
    }
    size_t len = span_to(s, SIZE_MAX, ',');
    *p = s + len;
    size_t name = span_to(s, len, ';');
    el->name = s;
    el->name_len = name;
    while (el->name_len && is_ows(s[el->name_len - 1]))
        el->name_len--;
    el->q = 1000;
    /* Parameters: ";" OWS name "=" value, the weight among them. */
    for (size_t i = name; i < len;) {
        i++; /* the ';' */
        while (i < len && is_ows(s[i]))
            i++;
        size_t end = i + span_to(s + i, len - i, ';');
        size_t vend = end;
        while (vend > i && is_ows(s[vend - 1]))
            vend--;
        if (vend - i >= 2 && (s[i] == 'q' || s[i] == 'Q') && s[i + 1] == '=') {
            int q = qvalue(s + i + 2, vend - i - 2);
            el->q = q < 0 ? 0 : q;
        }
        i = end;
    }
    return true;
}
