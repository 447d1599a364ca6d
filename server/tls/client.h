/* client.h - the TLS client of `tiled probe https://...` (GnuTLS).
 *
 * The CLI may not include GnuTLS's headers (tests/layering), nor any of
 * server/: cli/probe.c declares this function weak, with the same
 * prototype, as cli/main.c does tiled_serve_main. The full binary links
 * this file and gets it; a CLI-only build (make cli-only) links without
 * server/, finds it NULL and says that https is not built in.
 */
#ifndef TILED_TLS_CLIENT_H
#define TILED_TLS_CLIENT_H

#include <stdbool.h>
#include <stddef.h>

/* One request over TLS on the connected socket fd, whose receive and send
 * timeouts (SO_RCVTIMEO, SO_SNDTIMEO) bound each wait. The handshake
 * verifies the server's certificate against the PEM file `cacert` (NULL:
 * the system's trust store) and `host` (a name, or an IP literal checked
 * against the certificate's IP addresses), unless `insecure`; `cert` and
 * `key` (both or neither) are the client's certificate for a server that
 * asks for one. Then `req` (n bytes) is sent and the answer read until its
 * first line is complete, the answer ends or `cap` - 1 bytes have come.
 * Returns the number of bytes read into resp (NUL-terminated), or -1 with
 * `why` saying what failed and, where GnuTLS tells, why. */
long tiled_tls_probe(int fd, const char *host, const char *cacert, bool insecure, const char *cert, const char *key,
                     const char *req, size_t n, char *resp, size_t cap, char *why, size_t why_cap);

#endif
