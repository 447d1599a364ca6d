/* h1head.h - a request head the framer (h1wire.h) accepted, split in place
 * into its request line and fields, and the few readings of it the
 * transport needs (h1head.c). Pure: no sockets, no allocation, so it is
 * unit-tested alone (tests/server/test_h1head.c).
 *
 * The framer has checked every line's form (CRLF ends, one space between
 * the request line's parts, "name: value" fields with no whitespace before
 * the colon and no control bytes), so splitting only cuts: a head it did
 * not accept is not one to split.
 */
#ifndef TILED_H1HEAD_H
#define TILED_H1HEAD_H

#include <stdbool.h>
#include <stddef.h>

#include "h1wire.h"

struct http_field {
    const char *name, *value;
    size_t name_len;
};

/* Every string points into the text split, NUL-terminated. */
struct http_head {
    char *method;
    char *target;  /* as sent, without its query */
    char *query;   /* after the first '?', NULL when there is none */
    int nfields;
    struct http_field fields[TILED_H1_FIELDS_MAX];
};

/* Splits `text` (a NUL-terminated head, from its request line to the empty
 * line that ends it) into *h: each field's value without the whitespace
 * around it. False when it is not a head the framer accepts. */
bool http_head_split(char *text, struct http_head *h);
/* The value of the first field named `name` (case-insensitive), NULL when
 * there is none. */
const char *http_head_field(const struct http_head *h, const char *name);
/* For each of the n names (lower case, lens[i] bytes), the value of the
 * first field of that name (case-insensitive) into out[i], NULL when there
 * is none: one pass over the fields for all the names a request is asked. */
void http_head_index(const struct http_head *h, const char *const *names, const unsigned char *lens, int n,
                     const char **out);
/* Percent-decodes s in place, and '+' as a space when `plus` (a query's
 * keys and values); a malformed escape stays as it is. */
void http_unescape(char *s, bool plus);
/* The path of a target: itself, or that of an absolute-form target
 * ("http://host:port/path", RFC 9112 3.2.2, as proxies send), "/" when it
 * has none. Points into url (or at a constant "/"). */
char *http_origin_path(char *url);
/* Whether a comma-separated field value (Connection) lists `token`,
 * case-insensitive; NULL lists nothing. */
bool http_lists_token(const char *value, const char *token);
/* Whether any field line named `name` lists `token`: the lines of a list
 * field are one list (RFC 9110 5.3), "Connection: keep-alive" then
 * "Connection: close" lists both. */
bool http_head_lists(const struct http_head *h, const char *name, const char *token);
/* Calls each(arg, key, value) for every argument of a query ("a=1&b&c=" :
 * "1", NULL, ""), its key and value unescaped in place; empty pieces are
 * skipped. */
void http_query_each(char *query, void (*each)(void *arg, const char *key, const char *value), void *arg);

#endif
