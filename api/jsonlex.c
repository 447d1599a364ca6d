/* jsonlex.c - strict JSON pull parser (see jsonlex.h).
 *
 * DESIGN. Request bodies can be hundreds of megabytes of numbers, so the
 * lexer is a flat state machine over the buffer that allocates nothing: a
 * token is a pointer and a length into the input, the open containers are a
 * bit stack inside the lexer, and the lexer itself is a small value that can
 * be copied to remember a position. Grammar, escapes and UTF-8 are all
 * checked in the one pass that finds a token's end, so a token handed out is
 * known good and later conversions cannot fail on syntax: unescaping is a
 * straight copy loop, and integers are read digit by digit, exactly, over the
 * full 64-bit range.
 *
 * Small documents: most tokens of a compact request (a ',' and what follows
 * it, keys and strings of plain ASCII, integers, brackets) are read by
 * next_fast on local copies of the position, which gives up - touching
 * nothing - on anything else; the general state machine then reads that
 * token as it always has, so every error comes from one place. Numbers of
 * at most TILE_QUICK_LEN bytes are converted in one pass (quick_decimal)
 * instead of through struct decimal.
 *
 * Doubles: short numbers (<= 15 significant digits, power of ten <= 22)
 * take the exact fast path (one correctly rounded IEEE multiply or divide of
 * two exact doubles), and so do floats unless that double sits exactly on a
 * float halfway point; everything else is rewritten as "<digits>e<exp>" - at
 * most 800 significant digits plus a sticky digit, which is enough for
 * correct rounding because no rounding boundary of a double has more than
 * 767 significant digits - and handed to strtod. That text has no decimal
 * point, so the result does not depend on the process locale.
 */
#include "jsonlex.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "utf8.h"

enum lex_state {
    ST_VALUE,          /* a value is required (start, after ':' or an array ',') */
    ST_VALUE_OR_CLOSE, /* after '[' */
    ST_KEY,            /* after an object ',' */
    ST_KEY_OR_CLOSE,   /* after '{' */
    ST_AFTER,          /* after a value inside a container */
    ST_DONE            /* the top-level value is complete */
};

/* Byte classes inside a string: 0 is an ordinary ASCII byte. A table, as
 * the scan of a string's bytes is the lexer's innermost loop. */
enum { SC_PLAIN, SC_QUOTE, SC_ESCAPE, SC_CONTROL, SC_HIGH };

/* clang-format off */
#define SC_ROW(c) c, c, c, c, c, c, c, c, c, c, c, c, c, c, c, c
static const uint8_t str_classes[256] = {
    SC_ROW(SC_CONTROL), SC_ROW(SC_CONTROL), /* 0x00-0x1f */
    SC_PLAIN, SC_PLAIN, SC_QUOTE, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, /* 0x20-0x27: '"' */
    SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN,
    SC_ROW(SC_PLAIN), SC_ROW(SC_PLAIN), /* 0x30-0x4f */
    SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, /* 0x50-0x5f: '\\' */
    SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_PLAIN, SC_ESCAPE, SC_PLAIN, SC_PLAIN, SC_PLAIN,
    SC_ROW(SC_PLAIN), SC_ROW(SC_PLAIN), /* 0x60-0x7f */
    SC_ROW(SC_HIGH), SC_ROW(SC_HIGH), SC_ROW(SC_HIGH), SC_ROW(SC_HIGH), /* 0x80-0xff */
    SC_ROW(SC_HIGH), SC_ROW(SC_HIGH), SC_ROW(SC_HIGH), SC_ROW(SC_HIGH),
};
#undef SC_ROW
/* clang-format on */

static uint8_t str_class(unsigned char c)
{
    return str_classes[c];
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Characters that may not directly follow a number or a literal. */
static bool is_word_char(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '+' || c == '-' ||
           c == '_';
}

void tile_json_lexer_init(struct tile_json_lexer *lx, const char *buf, size_t len, int max_depth)
{
    memset(lx, 0, offsetof(struct tile_json_lexer, is_object)); /* a level's bit is set as it opens */
    lx->buf = buf;
    lx->len = len;
    lx->max_depth = max_depth <= 0 || max_depth > TILE_JSON_MAX_DEPTH ? TILE_JSON_MAX_DEPTH : max_depth;
    lx->state = ST_VALUE;
}

/* Errors are out of line (cold): the token loop keeps its registers. */
__attribute__((cold, noinline)) static int lex_fail(struct tile_json_lexer *restrict lx, struct tile_error *restrict e,
                                                    size_t pos, const char *what)
{
    lx->failed = true;
    return tile_error_set(e, TILE_EINVAL, "invalid JSON: %s at byte %zu", what, pos);
}

static bool top_is_object(const struct tile_json_lexer *lx)
{
    int i = lx->depth - 1;
    return (lx->is_object[i >> 3] >> (i & 7)) & 1;
}

/* ---- strings ---------------------------------------------------------- */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* The 4 hex digits at p as a code unit, or -1. */
static long hex4(const char *p)
{
    long v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hex_value(p[i]);
        if (h < 0)
            return -1;
        v = v * 16 + h;
    }
    return v;
}

static size_t esc_fail(struct tile_json_lexer *lx, struct tile_error *e, size_t pos, const char *what)
{
    lex_fail(lx, e, pos, what);
    return 0;
}

/* Validates the escape at buf[i] == '\\'; returns its length or 0 (error set). */
static size_t check_escape(struct tile_json_lexer *restrict lx, size_t i, struct tile_error *restrict e)
{
    const char *b = lx->buf;
    size_t left = lx->len - i;
    if (left < 2)
        return esc_fail(lx, e, i, "unterminated string");
    if (strchr("\"\\/bfnrt", b[i + 1]) && b[i + 1] != '\0')
        return 2;
    if (b[i + 1] != 'u') {
        char what[64];
        snprintf(what, sizeof(what), "invalid escape '\\%c'", b[i + 1] >= 0x20 && b[i + 1] < 0x7F ? b[i + 1] : '?');
        return esc_fail(lx, e, i, what);
    }
    long cu = left >= 6 ? hex4(b + i + 2) : -1;
    if (cu < 0)
        return esc_fail(lx, e, i, "invalid \\u escape (4 hex digits needed)");
    if (cu >= 0xDC00 && cu <= 0xDFFF)
        return esc_fail(lx, e, i, "lone low surrogate in a \\u escape");
    if (cu < 0xD800 || cu > 0xDBFF)
        return 6;
    long lo = left >= 12 && b[i + 6] == '\\' && b[i + 7] == 'u' ? hex4(b + i + 8) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF)
        return esc_fail(lx, e, i, "lone high surrogate in a \\u escape");
    return 12;
}

/* Scans the string whose '"' is at lx->pos; fills ptr/len/flags. */
static int scan_string(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok,
                       struct tile_error *restrict e)
{
    const unsigned char *b = (const unsigned char *)lx->buf;
    size_t start = lx->pos + 1, i = start, len = lx->len;
    unsigned flags = 0;
    for (;;) {
        while (i < len && str_class(b[i]) == SC_PLAIN)
            i++;
        if (i == len)
            return lex_fail(lx, e, lx->pos, "unterminated string starting");
        uint8_t cls = str_class(b[i]);
        if (cls == SC_QUOTE)
            break;
        if (cls == SC_CONTROL) {
            char what[80];
            snprintf(what, sizeof(what), "unescaped control character 0x%02x in a string", b[i]);
            return lex_fail(lx, e, i, what);
        }
        size_t n;
        if (cls == SC_ESCAPE) {
            n = check_escape(lx, i, e);
            flags |= TILE_JSON_TOK_ESCAPED;
        } else {
            n = tile_utf8_seq(b + i, len - i);
            if (!n)
                lex_fail(lx, e, i, "invalid UTF-8 in a string");
        }
        if (!n)
            return -1;
        i += n;
    }
    tok->ptr = lx->buf + start;
    tok->len = i - start;
    tok->flags = flags;
    lx->pos = i + 1;
    return 0;
}

/* Decodes the (validated) escape at p into out; *in_len gets its length. */
static size_t unescape_one(const char *p, char *out, size_t *in_len)
{
    static const char simple_from[] = "\"\\/bfnrt";
    static const char simple_to[] = "\"\\/\b\f\n\r\t";
    const char *hit = strchr(simple_from, p[1]);
    if (p[1] != 'u' && hit) {
        *out = simple_to[hit - simple_from];
        *in_len = 2;
        return 1;
    }
    unsigned long cp = (unsigned long)hex4(p + 2);
    *in_len = 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        cp = 0x10000 + ((cp - 0xD800) << 10) + ((unsigned long)hex4(p + 8) - 0xDC00);
        *in_len = 12;
    }
    return tile_utf8_put((uint32_t)cp, out);
}

size_t tile_json_unescape(const struct tile_json_token *tok, char *out)
{
    if (!(tok->flags & TILE_JSON_TOK_ESCAPED)) {
        if (tok->len)
            memcpy(out, tok->ptr, tok->len);
        return tok->len;
    }
    size_t i = 0, o = 0;
    while (i < tok->len) {
        const char *bs = memchr(tok->ptr + i, '\\', tok->len - i);
        size_t run = bs ? (size_t)(bs - (tok->ptr + i)) : tok->len - i;
        memcpy(out + o, tok->ptr + i, run);
        i += run;
        o += run;
        if (!bs)
            break;
        size_t used;
        o += unescape_one(tok->ptr + i, out + o, &used);
        i += used;
    }
    return o;
}

bool tile_json_string_equals(const struct tile_json_token *tok, const char *s)
{
    if (!(tok->flags & TILE_JSON_TOK_ESCAPED)) {
        /* Byte by byte, with no strlen: object keys are matched against a
         * table of names this way, and most differ in the first byte. */
        size_t i = 0;
        for (; i < tok->len; i++) {
            if (tok->ptr[i] != s[i] || s[i] == '\0')
                return false;
        }
        return s[i] == '\0';
    }
    size_t n = strlen(s);
    char buf[256];
    if (tok->len > sizeof(buf) || tok->len < n) /* escapes only shrink a string */
        return false;
    size_t got = tile_json_unescape(tok, buf);
    return got == n && memcmp(buf, s, n) == 0;
}

/* ---- numbers and literals --------------------------------------------- */

static size_t skip_digits(const char *b, size_t i, size_t len)
{
    while (i < len && is_digit(b[i]))
        i++;
    return i;
}

static int scan_number(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok,
                       struct tile_error *restrict e)
{
    const char *b = lx->buf;
    size_t i = lx->pos, len = lx->len;
    unsigned flags = 0;
    if (b[i] == '-')
        i++;
    if (i == len || !is_digit(b[i]))
        return lex_fail(lx, e, lx->pos, "invalid number");
    i = b[i] == '0' ? i + 1 : skip_digits(b, i, len);
    if (i < len && b[i] == '.') {
        size_t d = skip_digits(b, i + 1, len);
        if (d == i + 1)
            return lex_fail(lx, e, lx->pos, "invalid number (digits must follow '.')");
        i = d;
        flags |= TILE_JSON_TOK_FRAC;
    }
    if (i < len && (b[i] == 'e' || b[i] == 'E')) {
        i++;
        if (i < len && (b[i] == '+' || b[i] == '-'))
            i++;
        size_t d = skip_digits(b, i, len);
        if (d == i)
            return lex_fail(lx, e, lx->pos, "invalid number (digits must follow the exponent)");
        i = d;
        flags |= TILE_JSON_TOK_EXP;
    }
    if (i < len && is_word_char(b[i]))
        return lex_fail(lx, e, lx->pos, "invalid number");
    tok->ptr = b + lx->pos;
    tok->len = i - lx->pos;
    tok->flags = flags;
    lx->pos = i;
    return 0;
}

static int scan_literal(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok,
                        struct tile_error *restrict e)
{
    static const struct {
        const char *text;
        enum tile_json_type type;
    } lits[] = {{"true", TILE_JSON_TRUE}, {"false", TILE_JSON_FALSE}, {"null", TILE_JSON_NULL}};
    size_t left = lx->len - lx->pos;
    for (size_t k = 0; k < sizeof(lits) / sizeof(lits[0]); k++) {
        size_t n = strlen(lits[k].text);
        if (left < n || memcmp(lx->buf + lx->pos, lits[k].text, n) != 0)
            continue;
        if (left > n && is_word_char(lx->buf[lx->pos + n]))
            break;
        tok->type = lits[k].type;
        tok->ptr = lx->buf + lx->pos;
        tok->len = n;
        tok->flags = 0;
        lx->pos += n;
        return 0;
    }
    return lex_fail(lx, e, lx->pos, "invalid literal (expected true, false or null)");
}

/* ---- the state machine ------------------------------------------------ */

/* The four whitespace bytes RFC 8259 allows, from b[i]. Compact documents
 * have none, so one comparison usually settles it. */
static size_t skip_ws_at(const char *b, size_t i, size_t len)
{
    while (i < len && (unsigned char)b[i] <= ' ' && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t'))
        i++;
    return i;
}

static void after_value(struct tile_json_lexer *restrict lx)
{
    lx->state = lx->depth == 0 ? ST_DONE : ST_AFTER;
}

static int open_container(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok, bool object,
                          struct tile_error *restrict e)
{
    if (lx->depth >= lx->max_depth) {
        lx->failed = true;
        return tile_error_set(e, TILE_EINVAL, "JSON nesting deeper than %d at byte %zu", lx->max_depth, lx->pos);
    }
    int i = lx->depth++;
    uint8_t bit = (uint8_t)(1u << (i & 7));
    lx->is_object[i >> 3] = (uint8_t)(object ? lx->is_object[i >> 3] | bit : lx->is_object[i >> 3] & ~bit);
    tok->type = object ? TILE_JSON_OBJECT_BEGIN : TILE_JSON_ARRAY_BEGIN;
    lx->pos++;
    lx->state = object ? ST_KEY_OR_CLOSE : ST_VALUE_OR_CLOSE;
    return 0;
}

static int close_container(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok)
{
    tok->type = top_is_object(lx) ? TILE_JSON_OBJECT_END : TILE_JSON_ARRAY_END;
    lx->depth--;
    lx->pos++;
    after_value(lx);
    return 0;
}

__attribute__((cold, noinline)) static int unexpected(struct tile_json_lexer *restrict lx,
                                                      struct tile_error *restrict e, const char *expected)
{
    unsigned char c = (unsigned char)lx->buf[lx->pos];
    char what[120];
    if (c >= 0x20 && c < 0x7F)
        snprintf(what, sizeof(what), "expected %s but found '%c'", expected, c);
    else
        snprintf(what, sizeof(what), "expected %s but found byte 0x%02x", expected, c);
    return lex_fail(lx, e, lx->pos, what);
}

static int read_value(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok,
                      struct tile_error *restrict e)
{
    int rc;
    switch (lx->buf[lx->pos]) {
    case '{':
        return open_container(lx, tok, true, e);
    case '[':
        return open_container(lx, tok, false, e);
    case '"':
        tok->type = TILE_JSON_STRING;
        rc = scan_string(lx, tok, e);
        break;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        tok->type = TILE_JSON_NUMBER;
        rc = scan_number(lx, tok, e);
        break;
    case 't':
    case 'f':
    case 'n':
        rc = scan_literal(lx, tok, e);
        break;
    default:
        return unexpected(lx, e, "a value");
    }
    if (rc == 0)
        after_value(lx);
    return rc;
}

static int read_key(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok,
                    struct tile_error *restrict e)
{
    if (lx->buf[lx->pos] != '"')
        return unexpected(lx, e, "a string key");
    tok->type = TILE_JSON_KEY;
    if (scan_string(lx, tok, e) < 0)
        return -1;
    lx->pos = skip_ws_at(lx->buf, lx->pos, lx->len);
    if (lx->pos == lx->len)
        return lex_fail(lx, e, lx->pos, "unexpected end of input");
    if (lx->buf[lx->pos] != ':')
        return unexpected(lx, e, "':' after an object key");
    lx->pos++;
    lx->state = ST_VALUE;
    return 0;
}

static void set_token(struct tile_json_token *restrict tok, enum tile_json_type type, size_t pos, const char *ptr,
                      size_t len)
{
    tok->type = type;
    tok->ptr = ptr;
    tok->len = len;
    tok->pos = pos;
    tok->flags = 0;
}

/* The tokens of compact, ordinary documents, on local copies of the
 * position and state: a ',' and the token after it, keys and strings
 * without escapes or non-ASCII bytes, integers, brackets. Returns false
 * with the lexer untouched for anything else (whitespace inside a key's
 * ':' aside), which next_general then reads as it always has: every error,
 * every message and every other token come from there. */
static inline __attribute__((always_inline)) bool next_fast(struct tile_json_lexer *restrict lx,
                                                            struct tile_json_token *restrict tok)
{
    const char *b = lx->buf;
    size_t len = lx->len, i = skip_ws_at(b, lx->pos, len);
    int state = lx->state;
    if (lx->failed || i >= len)
        return false;
    char c = b[i];
    if (state == ST_AFTER) {
        bool obj = top_is_object(lx);
        if (c == (obj ? '}' : ']')) {
            set_token(tok, obj ? TILE_JSON_OBJECT_END : TILE_JSON_ARRAY_END, i, b + i, 1);
            lx->depth--;
            lx->pos = i + 1;
            lx->state = lx->depth == 0 ? ST_DONE : ST_AFTER;
            return true;
        }
        if (c != ',')
            return false;
        state = obj ? ST_KEY : ST_VALUE;
        i = skip_ws_at(b, i + 1, len);
        if (i >= len)
            return false;
        c = b[i];
    }
    if (state == ST_KEY || state == ST_KEY_OR_CLOSE) {
        if (c == '}' && state == ST_KEY_OR_CLOSE) {
            set_token(tok, TILE_JSON_OBJECT_END, i, b + i, 1);
            lx->depth--;
            lx->pos = i + 1;
            lx->state = lx->depth == 0 ? ST_DONE : ST_AFTER;
            return true;
        }
        if (c != '"')
            return false;
        size_t j = i + 1;
        while (j < len && str_classes[(unsigned char)b[j]] == SC_PLAIN)
            j++;
        if (j >= len || b[j] != '"')
            return false;
        size_t colon = skip_ws_at(b, j + 1, len);
        if (colon >= len || b[colon] != ':')
            return false;
        set_token(tok, TILE_JSON_KEY, i, b + i + 1, j - i - 1);
        lx->pos = colon + 1;
        lx->state = ST_VALUE;
        return true;
    }
    if (state != ST_VALUE && state != ST_VALUE_OR_CLOSE)
        return false;
    size_t j = i + 1;
    switch (c) {
    case '"':
        while (j < len && str_classes[(unsigned char)b[j]] == SC_PLAIN)
            j++;
        if (j >= len || b[j] != '"')
            return false;
        set_token(tok, TILE_JSON_STRING, i, b + i + 1, j - i - 1);
        j++;
        break;
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9':
        /* [-]digits, no leading zero, ended by what follows a value in a
         * compact document (anything else, a fraction or an exponent
         * included, is left to scan_number) */
        if (c == '-') {
            if (j >= len || !is_digit(b[j]))
                return false;
            c = b[j++];
        }
        if (c != '0') {
            while (j < len && is_digit(b[j]))
                j++;
        }
        if (j < len && b[j] != ',' && b[j] != ']' && b[j] != '}')
            return false;
        set_token(tok, TILE_JSON_NUMBER, i, b + i, j - i);
        break;
    case '[':
    case '{': {
        if (lx->depth >= lx->max_depth) /* the nesting error */
            return false;
        bool object = c == '{';
        int d = lx->depth++;
        uint8_t bit = (uint8_t)(1u << (d & 7));
        lx->is_object[d >> 3] = (uint8_t)(object ? lx->is_object[d >> 3] | bit : lx->is_object[d >> 3] & ~bit);
        set_token(tok, object ? TILE_JSON_OBJECT_BEGIN : TILE_JSON_ARRAY_BEGIN, i, b + i, 1);
        lx->pos = i + 1;
        lx->state = object ? ST_KEY_OR_CLOSE : ST_VALUE_OR_CLOSE;
        return true;
    }
    case ']':
        if (state != ST_VALUE_OR_CLOSE) /* after a comma: the trailing-comma error */
            return false;
        set_token(tok, TILE_JSON_ARRAY_END, i, b + i, 1);
        lx->depth--;
        lx->pos = i + 1;
        lx->state = lx->depth == 0 ? ST_DONE : ST_AFTER;
        return true;
    default:
        return false;
    }
    lx->pos = j;
    lx->state = lx->depth == 0 ? ST_DONE : ST_AFTER;
    return true;
}

static int next_general(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok,
                        struct tile_error *restrict e);

int tile_json_next(struct tile_json_lexer *restrict lx, struct tile_json_token *restrict tok,
                   struct tile_error *restrict e)
{
    if (next_fast(lx, tok))
        return 0;
    return next_general(lx, tok, e);
}

/* One token from a local copy of the position: the state after a value is
 * settled first (a ',' moves on to the next token, anything else is the
 * token), then the token at the position is read by state. */
__attribute__((noinline)) static int next_general(struct tile_json_lexer *restrict lx,
                                                  struct tile_json_token *restrict tok, struct tile_error *restrict e)
{
    if (lx->failed)
        return tile_error_set(e, TILE_EINVAL, "invalid JSON (reading past an earlier error)");
    const char *b = lx->buf;
    size_t len = lx->len, i = skip_ws_at(b, lx->pos, len);
    tok->flags = 0;
    tok->len = 1;
    if (lx->state == ST_AFTER && i < len) { /* after a value inside a container */
        bool obj = top_is_object(lx);
        if (b[i] == ',') {
            lx->state = obj ? ST_KEY : ST_VALUE;
            i = skip_ws_at(b, i + 1, len);
        } else {
            lx->pos = tok->pos = i;
            tok->ptr = b + i;
            if (b[i] == (obj ? '}' : ']'))
                return close_container(lx, tok);
            return unexpected(lx, e, obj ? "',' or '}'" : "',' or ']'");
        }
    }
    lx->pos = tok->pos = i;
    tok->ptr = b + i;
    if (i == len) {
        if (lx->state != ST_DONE)
            return lex_fail(lx, e, i, "unexpected end of input");
        tok->type = TILE_JSON_END;
        tok->len = 0;
        return 0;
    }
    /* One call site each for read_key and read_value, so both are inlined. */
    char c = b[i];
    switch (lx->state) {
    case ST_DONE:
        return lex_fail(lx, e, i, "unexpected data after the top-level value");
    case ST_KEY_OR_CLOSE:
    case ST_KEY:
        if (c == '}') {
            if (lx->state == ST_KEY)
                return lex_fail(lx, e, i, "trailing comma before '}'");
            return close_container(lx, tok);
        }
        return read_key(lx, tok, e);
    default: /* ST_VALUE, ST_VALUE_OR_CLOSE */
        if (c == ']') {
            if (lx->state == ST_VALUE_OR_CLOSE)
                return close_container(lx, tok);
            if (lx->depth > 0 && !top_is_object(lx))
                return lex_fail(lx, e, i, "trailing comma before ']'");
        }
        return read_value(lx, tok, e);
    }
}

bool tile_json_at_array_end(const struct tile_json_lexer *lx)
{
    /* Where tile_json_next reads a ']' as the array's end: after '[' or
     * after an element, inside an array (ST_VALUE, after a comma, would be
     * the trailing-comma error). */
    if (lx->failed || lx->depth == 0 || top_is_object(lx) || (lx->state != ST_VALUE_OR_CLOSE && lx->state != ST_AFTER))
        return false;
    size_t i = skip_ws_at(lx->buf, lx->pos, lx->len);
    return i < lx->len && lx->buf[i] == ']';
}

bool tile_json_is_scalar(enum tile_json_type type)
{
    return type == TILE_JSON_STRING || type == TILE_JSON_NUMBER || type == TILE_JSON_TRUE ||
           type == TILE_JSON_FALSE || type == TILE_JSON_NULL;
}

int tile_json_skip_value(struct tile_json_lexer *lx, const struct tile_json_token *first, struct tile_error *e)
{
    if (tile_json_is_scalar(first->type))
        return 0;
    if (first->type != TILE_JSON_OBJECT_BEGIN && first->type != TILE_JSON_ARRAY_BEGIN)
        return tile_error_set(e, TILE_EINVAL, "internal: skipping %s, which does not start a value",
                              tile_json_type_name(first->type));
    int target = lx->depth - 1;
    struct tile_json_token t;
    do {
        if (tile_json_next(lx, &t, e) < 0)
            return -1;
    } while (lx->depth > target || (t.type != TILE_JSON_OBJECT_END && t.type != TILE_JSON_ARRAY_END));
    return 0;
}

const char *tile_json_type_name(enum tile_json_type type)
{
    static const char *const names[] = {
        [TILE_JSON_END] = "the end of the input",
        [TILE_JSON_OBJECT_BEGIN] = "an object",
        [TILE_JSON_OBJECT_END] = "the end of an object",
        [TILE_JSON_ARRAY_BEGIN] = "an array",
        [TILE_JSON_ARRAY_END] = "the end of an array",
        [TILE_JSON_KEY] = "a key",
        [TILE_JSON_STRING] = "a string",
        [TILE_JSON_NUMBER] = "a number",
        [TILE_JSON_TRUE] = "true",
        [TILE_JSON_FALSE] = "false",
        [TILE_JSON_NULL] = "null",
    };
    if ((unsigned)type >= sizeof(names) / sizeof(names[0]))
        return "an unknown token";
    return names[type];
}

/* ---- number conversion ------------------------------------------------ */

/* A JSON number split into its parts in one pass; value = digits *
 * 10^(exp - nf) where digits are the integer digits followed by the
 * fraction digits. */
struct decimal {
    bool neg;
    bool real; /* written with a fraction or an exponent */
    const char *ip, *fp;
    size_t ni, nf;
    int64_t exp;   /* saturated to +-TILE_EXP_SAT */
    uint64_t m;    /* the first (up to 19) significant digits */
    size_t count;  /* significant digits, from the first non-zero one */
    int64_t first; /* index of the first significant digit; -1 for zero */
};

#define TILE_EXP_SAT INT64_C(1000000000000000)

/* Digits from s[i]; folds them into the significant-digit fields. */
static size_t scan_digits(const char *s, size_t i, size_t len, struct decimal *d, size_t index)
{
    for (; i < len && is_digit(s[i]); i++, index++) {
        if (d->first < 0) {
            if (s[i] == '0')
                continue;
            d->first = (int64_t)index;
        }
        if (d->count < 19)
            d->m = d->m * 10 + (uint64_t)(s[i] - '0');
        d->count++;
    }
    return i;
}

static void decimal_split(const char *s, size_t len, struct decimal *d)
{
    memset(d, 0, sizeof(*d));
    d->first = -1;
    d->neg = len && s[0] == '-';
    size_t i = d->neg;
    d->ip = s + i;
    i = scan_digits(s, i, len, d, 0);
    d->ni = (size_t)(s + i - d->ip);
    d->fp = s + i;
    if (i < len && s[i] == '.') {
        d->fp = s + i + 1;
        i = scan_digits(s, i + 1, len, d, d->ni);
        d->nf = (size_t)(s + i - d->fp);
        d->real = true;
    }
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        d->real = true;
        bool eneg = i < len && s[i] == '-';
        if (i < len && (s[i] == '-' || s[i] == '+'))
            i++;
        int64_t x = 0;
        for (; i < len && is_digit(s[i]); i++)
            x = x < TILE_EXP_SAT ? x * 10 + (s[i] - '0') : TILE_EXP_SAT;
        d->exp = eneg ? -x : x;
    }
}

static char decimal_digit(const struct decimal *d, size_t k)
{
    return k < d->ni ? d->ip[k] : d->fp[k - d->ni];
}

/* Integral value of a number with a fraction or exponent ("2.50e1"). */
static int integral_value(const struct decimal *d, uint64_t *mag)
{
    size_t n = d->ni + d->nf;
    int64_t scale = d->exp - (int64_t)d->nf;
    /* Digits at index >= keep would be fractional: they must all be zero. */
    size_t keep = scale >= 0 ? n : (-scale >= (int64_t)n ? 0 : n - (size_t)-scale);
    for (size_t k = keep; k < n; k++) {
        if (decimal_digit(d, k) != '0')
            return TILE_JSON_NUM_NOT_INTEGER;
    }
    uint64_t m = 0;
    for (size_t k = 0; k < keep; k++) {
        if (__builtin_mul_overflow(m, 10, &m) || __builtin_add_overflow(m, (uint64_t)(decimal_digit(d, k) - '0'), &m))
            return TILE_JSON_NUM_RANGE;
    }
    for (int64_t z = 0; m && z < scale; z++) {
        if (__builtin_mul_overflow(m, 10, &m))
            return TILE_JSON_NUM_RANGE;
    }
    *mag = m;
    return TILE_JSON_NUM_OK;
}

/* The common short numbers in one pass, without struct decimal: true when
 * `s` (a JSON number as the lexer produced it) is at most TILE_QUICK_LEN
 * bytes with at most 19 significant digits; then its value is exactly
 * (-1)^neg * m * 10^e10, and *count is its significant digits (0 for
 * zero). Anything longer takes decimal_split. */
#define TILE_QUICK_LEN 40

static bool quick_decimal(const char *s, size_t len, bool *neg, uint64_t *m, int *e10, int *count)
{
    if (len > TILE_QUICK_LEN)
        return false;
    size_t i = len && s[0] == '-';
    uint64_t v = 0;
    int n = 0, scale = 0;
    *neg = i;
    for (; i < len && is_digit(s[i]); i++) {
        if ((n || s[i] != '0') && ++n > 19)
            return false;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i < len && s[i] == '.') {
        for (i++; i < len && is_digit(s[i]); i++, scale--) {
            if ((n || s[i] != '0') && ++n > 19)
                return false;
            v = v * 10 + (uint64_t)(s[i] - '0');
        }
    }
    if (i < len) { /* 'e' or 'E', an optional sign, digits */
        i++;
        bool eneg = i < len && s[i] == '-';
        i += i < len && (s[i] == '-' || s[i] == '+');
        int x = 0;
        for (; i < len && x < 100000; i++)
            x = x * 10 + (s[i] - '0');
        if (i < len)
            return false;
        scale += eneg ? -x : x;
    }
    *m = v;
    *e10 = scale;
    *count = n;
    return true;
}

int tile_json_number_integer(const char *s, size_t len, unsigned flags, bool *neg, uint64_t *mag)
{
    /* Plain integers of at most 19 digits (below 10^19 < 2^64) first: the
     * usual case, read digit by digit. */
    size_t i = len && s[0] == '-';
    if (len - i <= 19) {
        uint64_t v = 0;
        for (; i < len && is_digit(s[i]); i++)
            v = v * 10 + (uint64_t)(s[i] - '0');
        if (i == len) {
            *neg = len && s[0] == '-';
            *mag = v;
            return TILE_JSON_NUM_OK;
        }
    }
    struct decimal d;
    decimal_split(s, len, &d);
    *neg = d.neg;
    *mag = 0;
    if (!d.real) {
        if (d.count <= 19) { /* below 10^19 < 2^64: m is the value */
            *mag = d.m;
            return TILE_JSON_NUM_OK;
        }
        return integral_value(&d, mag);
    }
    if (!(flags & TILE_JSON_INT_INTEGRAL_FLOATS))
        return TILE_JSON_NUM_NOT_INTEGER;
    return integral_value(&d, mag);
}

int tile_json_number_int64(const char *s, size_t len, unsigned flags, int64_t *out)
{
    bool neg;
    uint64_t mag;
    int rc = tile_json_number_integer(s, len, flags, &neg, &mag);
    if (rc != TILE_JSON_NUM_OK)
        return rc;
    if (mag > (neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX))
        return TILE_JSON_NUM_RANGE;
    *out = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    return TILE_JSON_NUM_OK;
}

int tile_json_number_uint64(const char *s, size_t len, unsigned flags, uint64_t *out)
{
    bool neg;
    uint64_t mag;
    int rc = tile_json_number_integer(s, len, flags, &neg, &mag);
    if (rc != TILE_JSON_NUM_OK)
        return rc;
    if (neg && mag)
        return TILE_JSON_NUM_RANGE;
    *out = mag;
    return TILE_JSON_NUM_OK;
}

/* Significant digits kept for strtod; see DESIGN. */
#define TILE_SIG_DIGITS 800

/* Writes "[-]<digits>e<exp>" with at most TILE_SIG_DIGITS digits and a
 * sticky '1' when non-zero digits were dropped. */
static void sig_text(const struct decimal *d, char *out, size_t cap)
{
    size_t n = d->ni + d->nf, o = 0, k = (size_t)d->first;
    if (d->neg)
        out[o++] = '-';
    size_t taken = 0;
    for (; k < n && taken < TILE_SIG_DIGITS; k++, taken++)
        out[o++] = decimal_digit(d, k);
    bool sticky = false;
    for (; k < n && !sticky; k++)
        sticky = decimal_digit(d, k) != '0';
    if (sticky) {
        out[o++] = '1';
        taken++;
    }
    /* value = 0.<digits from first> * 10^(ni + exp - first) */
    int64_t e10 = (int64_t)d->ni + d->exp - d->first - (int64_t)taken;
    if (e10 > 100000)
        e10 = 100000;
    if (e10 < -100000)
        e10 = -100000;
    snprintf(out + o, cap - o, "e%lld", (long long)e10);
}

static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                     1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* m * 10^e10 in one correctly rounded operation on exact doubles, when
 * m < 2^53 and |e10| <= 22 (Clinger's fast path). */
static bool fast_double(const struct decimal *d, double *out)
{
#if FLT_EVAL_METHOD == 0
    int64_t e10 = d->exp - (int64_t)d->nf;
    if (d->count > 15 || e10 < -22 || e10 > 22)
        return false;
    double m = (double)d->m, p = pow10_exact[e10 < 0 ? -e10 : e10];
    double v = e10 < 0 ? m / p : m * p;
    *out = d->neg ? -v : v;
    return true;
#else
    (void)d;
    (void)out;
    return false;
#endif
}

/* A double that is exactly halfway between two adjacent floats, where
 * rounding it again to float could differ from rounding the decimal. */
static bool is_float_tie(double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof(u));
    return (u & ((UINT64_C(1) << 29) - 1)) == UINT64_C(1) << 28;
}

/* The fast path works for floats too: the correctly rounded double lies on
 * the same side of every float halfway point as the decimal (those points
 * are doubles), so rounding it to float is exact unless it is one of them. */
static bool fast_float(const struct decimal *d, float *out)
{
    double v;
    if (!fast_double(d, &v) || fabs(v) < FLT_MIN || fabs(v) > FLT_MAX || is_float_tie(v))
        return false;
    *out = (float)v;
    return true;
}

/* Clinger's fast path on quick_decimal's parts: m * 10^e10 in one correctly
 * rounded operation when m < 10^15 < 2^53 and |e10| <= 22, as fast_double. */
static bool quick_double(const char *s, size_t len, double *out)
{
#if FLT_EVAL_METHOD == 0
    bool neg;
    uint64_t m;
    int e10, count;
    if (!quick_decimal(s, len, &neg, &m, &e10, &count))
        return false;
    if (count == 0) {
        *out = neg ? -0.0 : 0.0;
        return true;
    }
    if (count > 15 || e10 < -22 || e10 > 22)
        return false;
    double v = (double)m, p = pow10_exact[e10 < 0 ? -e10 : e10];
    v = e10 < 0 ? v / p : v * p;
    *out = neg ? -v : v;
    return true;
#else
    (void)s;
    (void)len;
    (void)out;
    return false;
#endif
}

int tile_json_number_double(const char *s, size_t len, double *out)
{
    if (quick_double(s, len, out))
        return TILE_JSON_NUM_OK;
    struct decimal d;
    decimal_split(s, len, &d);
    if (d.first < 0) {
        *out = d.neg ? -0.0 : 0.0;
        return TILE_JSON_NUM_OK;
    }
    if (fast_double(&d, out))
        return TILE_JSON_NUM_OK;
    char text[TILE_SIG_DIGITS + 32];
    sig_text(&d, text, sizeof(text));
    *out = strtod(text, NULL);
    return isinf(*out) ? TILE_JSON_NUM_RANGE : TILE_JSON_NUM_OK;
}

int tile_json_number_float(const char *s, size_t len, float *out)
{
    double v; /* as fast_float: exact unless v is a float halfway point */
    if (quick_double(s, len, &v) && (v == 0 || (fabs(v) >= FLT_MIN && fabs(v) <= FLT_MAX && !is_float_tie(v)))) {
        *out = (float)v;
        return TILE_JSON_NUM_OK;
    }
    struct decimal d;
    decimal_split(s, len, &d);
    if (d.first < 0) {
        *out = d.neg ? -0.0f : 0.0f;
        return TILE_JSON_NUM_OK;
    }
    if (fast_float(&d, out))
        return TILE_JSON_NUM_OK;
    char text[TILE_SIG_DIGITS + 32];
    sig_text(&d, text, sizeof(text));
    *out = strtof(text, NULL);
    return isinf(*out) ? TILE_JSON_NUM_RANGE : TILE_JSON_NUM_OK;
}

/* Compares |number| with a > 0: the exact expansion of a double has at most
 * 767 significant digits, so "%.770e" prints it exactly. */
static int compare_magnitude(const struct decimal *d, double a)
{
    char buf[800], dg[780];
    size_t nd = 0;
    snprintf(buf, sizeof(buf), "%.*e", 770, a);
    const char *c = buf;
    for (; *c && *c != 'e' && *c != 'E'; c++) {
        if (is_digit(*c) && nd < sizeof(dg))
            dg[nd++] = *c;
    }
    long xv = *c ? strtol(c + 1, NULL, 10) : 0;
    int64_t xt = (int64_t)d->ni + d->exp - d->first - 1; /* number = t0.t1t2... * 10^xt */
    if (xt != xv)
        return xt < xv ? -1 : 1;
    size_t n = d->ni + d->nf;
    for (size_t i = 0, k = (size_t)d->first; k < n || i < nd; i++, k++) {
        char t = k < n ? decimal_digit(d, k) : '0';
        char u = i < nd ? dg[i] : '0';
        if (t != u)
            return t < u ? -1 : 1;
    }
    return 0;
}

int tile_json_number_compare(const char *s, size_t len, double v)
{
    struct decimal d;
    decimal_split(s, len, &d);
    int sn = d.first < 0 ? 0 : (d.neg ? -1 : 1);
    int sv = v == 0 ? 0 : (v < 0 ? -1 : 1);
    if (sn != sv)
        return sn < sv ? -1 : 1;
    if (sn == 0)
        return 0;
    int mag = compare_magnitude(&d, fabs(v));
    return sn > 0 ? mag : -mag;
}
