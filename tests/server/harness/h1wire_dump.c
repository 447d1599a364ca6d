/* h1wire_dump.c - the HTTP/1.1 framer (server/http/h1wire.h) as a filter,
 * for the differential test against other parsers
 * (tests/server/test_h1_differential.py).
 *
 * Reads streams from standard input, each as "<length>\n" and that many
 * bytes; for each writes one line:
 *
 *   <status> <accepted> <pos> <same> <events> | <message>
 *
 * status is 0 while the stream is good (else the refusal's), accepted the
 * heads accepted, pos the bytes consumed, same 1 when feeding the stream
 * byte by byte and in steps gave the record feeding it whole gave (0 is a
 * bug), events the boundaries: H<from>-<to>:<method_len>:<target_from>-<target_to>
 * for a head, D<from>-<to> for body bytes, E<from>-<to> for a message's end.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "h1drive.h"

static struct h1drive whole, piecewise;

int main(void)
{
    size_t len;
    while (scanf("%zu", &len) == 1 && getchar() == '\n') {
        unsigned char *s = malloc(len ? len : 1);
        if (!s || fread(s, 1, len, stdin) != len) {
            fprintf(stderr, "h1wire_dump: a short stream\n");
            free(s);
            return 2;
        }
        h1drive_steps(&whole, s, len, 0);
        bool same = !whole.overflow;
        static const size_t steps[] = {1, 3, 17};
        for (size_t k = 0; k < 3 && same; k++) {
            h1drive_steps(&piecewise, s, len, steps[k]);
            same = h1drive_same(&whole, &piecewise);
        }
        printf("%d %" PRIu32 " %" PRIu64 " %d", whole.p.status, whole.p.accepted, whole.p.pos, same);
        for (size_t k = 0; k < whole.n_ev; k++) {
            const struct h1drive_event *e = &whole.ev[k];
            printf(" %c%" PRIu64 "-%" PRIu64, e->kind, e->from, e->to);
            if (e->kind == 'H')
                printf(":%" PRIu32 ":%" PRIu64 "-%" PRIu64, e->method_len, e->target_from,
                       e->target_from + e->target_len);
        }
        printf(" | %s\n", whole.p.message);
        fflush(stdout);
        free(s);
    }
    return 0;
}
