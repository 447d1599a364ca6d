/* h1head.c - splitting an accepted request head (h1head.h). */
#include "h1head.h"

#include <string.h>
#include <strings.h>

/* The CRLF that ends the line at s: in a head the framer accepted a CR
 * comes only before its LF (it refuses one anywhere else), so the first
 * CR is the line's end; NULL when it is not followed by an LF. */
static char *line_end(char *s)
{
    char *cr = strchr(s, '\r');
    return cr && cr[1] == '\n' ? cr : NULL;
}

bool http_head_split(char *text, struct http_head *h)
{
    char *line = text, *eol = line_end(line);
    if (!eol)
        return false;
    *eol = '\0';
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    if (!sp2)
        return false;
    *sp1 = *sp2 = '\0';
    h->method = line;
    h->target = sp1 + 1;
    h->query = strchr(h->target, '?');
    if (h->query)
        *h->query++ = '\0';
    h->nfields = 0;
    for (line = eol + 2; (eol = line_end(line)) && eol != line; line = eol + 2) {
        *eol = '\0';
        char *colon = memchr(line, ':', (size_t)(eol - line));
        if (!colon || h->nfields == TILED_H1_FIELDS_MAX)
            return false;
        *colon = '\0';
        char *v = colon + 1, *e = eol;
        while (v < e && (*v == ' ' || *v == '\t'))
            v++;
        while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        h->fields[h->nfields++] = (struct http_field){.name = line, .value = v, .name_len = (size_t)(colon - line)};
    }
    return eol == line; /* the empty line that ends the head */
}

const char *http_head_field(const struct http_head *h, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < h->nfields; i++)
        if (h->fields[i].name_len == len && strncasecmp(h->fields[i].name, name, len) == 0)
            return h->fields[i].value;
    return NULL;
}

void http_head_index(const struct http_head *h, const char *const *names, const unsigned char *lens, int n,
                     const char **out)
{
    for (int k = 0; k < n; k++)
        out[k] = NULL;
    for (int i = 0; i < h->nfields; i++) {
        const struct http_field *f = &h->fields[i];
        for (int k = 0; k < n; k++) {
            if (lens[k] == f->name_len && !out[k] && (f->name[0] | 0x20) == names[k][0] &&
                strncasecmp(f->name, names[k], f->name_len) == 0) {
                out[k] = f->value;
                break;
            }
        }
    }
}

static int hex_digit(char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    ch = (char)(ch | 0x20);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

void http_unescape(char *s, bool plus)
{
    /* Nothing changes before the first '%' (or '+'): a path rarely has one. */
    char *i = plus ? s + strcspn(s, "%+") : strchr(s, '%');
    if (!i || !*i)
        return;
    char *o = i;
    for (; *i; i++) {
        int hi, lo;
        if (*i == '%' && (hi = hex_digit(i[1])) >= 0 && (lo = hex_digit(i[2])) >= 0) {
            *o++ = (char)(hi << 4 | lo);
            i += 2;
        } else {
            *o++ = plus && *i == '+' ? ' ' : *i;
        }
    }
    *o = '\0';
}

char *http_origin_path(char *url)
{
    if (strncasecmp(url, "http://", 7) == 0)
        url += 7;
    else if (strncasecmp(url, "https://", 8) == 0)
        url += 8;
    else
        return url;
    char *slash = strchr(url, '/');
    return slash ? slash : (char *)"/";
}

bool http_lists_token(const char *value, const char *token)
{
    size_t n = strlen(token);
    for (const char *v = value; v && *v;) {
        v += strspn(v, " \t,");
        size_t len = strcspn(v, ",");
        size_t trim = len;
        while (trim && (v[trim - 1] == ' ' || v[trim - 1] == '\t'))
            trim--;
        if (trim == n && strncasecmp(v, token, n) == 0)
            return true;
        v += len;
    }
    return false;
}

bool http_head_lists(const struct http_head *h, const char *name, const char *token)
{
    size_t len = strlen(name);
    for (int i = 0; i < h->nfields; i++)
        if (h->fields[i].name_len == len && strncasecmp(h->fields[i].name, name, len) == 0 &&
            http_lists_token(h->fields[i].value, token))
            return true;
    return false;
}

void http_query_each(char *query, void (*each)(void *arg, const char *key, const char *value), void *arg)
{
    for (char *q = query, *amp; q && *q; q = amp ? amp + 1 : NULL) {
        if ((amp = strchr(q, '&')))
            *amp = '\0';
        if (!*q)
            continue;
        char *eq = strchr(q, '=');
        if (eq)
            *eq++ = '\0';
        http_unescape(q, true);
        if (eq)
            http_unescape(eq, true);
        each(arg, q, eq);
    }
}
