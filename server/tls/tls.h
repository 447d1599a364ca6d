/* tls.h - the TLS policy and certificate both ports serve (GnuTLS).
 *
 * DESIGN. One object holds what every TLS session of the daemon starts
 * from: the --tls-priorities policy (a GnuTLS priority string, with a
 * stricter form for HTTP/2, RFC 9113 9.2) and the certificate and key
 * last loaded, with the CAs whose client certificates mutual TLS accepts
 * and a session-ticket key (resumption) of their own. A session is
 * given the credentials current when it starts and holds them until it
 * ends: a reload (SIGHUP) swaps in new ones for later handshakes and
 * frees the old ones when their last session ends, so a handshake in
 * progress never loses them; tickets issued before a reload no longer
 * resume. Sessions are named by their socket, which
 * is unique among open connections of both ports.
 *
 * This directory is the only code that includes GnuTLS's headers: both
 * ports' loops read their sessions through session.h.
 * Thread-safe: sessions start and end on any transport thread, reloads
 * come from the main thread.
 */
#ifndef TILED_TLS_H
#define TILED_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

struct tiled_tls;

/* Loads cert_path and key_path (PEM) and, unless it is "", client_ca_path
 * (PEM CA certificates: every session then requires a client certificate
 * they issued), and checks `priorities`. NULL, with `e` naming the file (or
 * the option) and GnuTLS's reason, when a file is unreadable, malformed,
 * passphrase-protected or the two do not match, or when the priority
 * string is invalid or leaves HTTP/2 nothing it allows. */
struct tiled_tls *tiled_tls_new(const char *cert_path, const char *key_path, const char *client_ca_path,
                                const char *priorities, struct tile_error *e);
/* After every session has ended. NULL is ignored. */
void tiled_tls_free(struct tiled_tls *t);
/* The TLS library's name and version as linked. */
const char *tiled_tls_library(void);

/* Reads the files again (the client CAs too): 0 and the new credentials
 * serve the handshakes that start from now on, or -1 with `e` saying why,
 * the old ones kept. */
int tiled_tls_reload(struct tiled_tls *t, struct tile_error *e);

/* The subject (RFC 4514) of the certificate new handshakes get, into dst. */
void tiled_tls_subject(struct tiled_tls *t, char *dst, size_t cap);

/* Prepares a new server session (a gnutls_session_t) on socket fd before
 * its handshake: the current credentials (held until
 * tiled_tls_session_end(t, fd)), the policy (h2: the HTTP/2 form), session
 * tickets and, with client CAs, a required and verified client
 * certificate. 0, or -1 when GnuTLS refused a setting. */
int tiled_tls_session_start(struct tiled_tls *t, void *session, int fd, bool h2);
/* The session on fd has ended (or never started): its credentials are let
 * go. Call it before fd is closed, so the number is not reused meanwhile. */
void tiled_tls_session_end(struct tiled_tls *t, int fd);

/* Whether a finished handshake of `session` may carry HTTP/2: TLS 1.3, or
 * TLS 1.2 with an ephemeral key exchange and an AEAD cipher (none of
 * RFC 9113 Appendix A's suites). */
bool tiled_tls_h2_acceptable(void *session);

#endif
