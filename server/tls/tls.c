/* tls.c - the TLS policy and certificate both ports serve (see tls.h). */
#include "tls.h"

#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "grow.h"
#include "log.h"
#include "text.h"

/* What RFC 9113 9.2 leaves out of TLS for HTTP/2, taken off the policy for
 * the gRPC port: versions below 1.2, the static-RSA key exchange and every
 * cipher that is not an AEAD (the suites of its Appendix A). A policy that
 * names still other suites is refused at start (h2_check). */
static const char h2_removals[] = ":-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1:-RSA:-AES-128-CBC:-AES-256-CBC"
                                  ":-CAMELLIA-128-CBC:-CAMELLIA-256-CBC:-3DES-CBC:-ARCFOUR-128:-NULL";

#define MAX_PEM (1u << 20)

/* One certificate chain and key (and client CAs), with the session-ticket
 * key of the sessions that start with them. refs: one while it is current,
 * one per session using it; under tiled_tls.lock. */
struct tls_cred {
    gnutls_certificate_credentials_t cred;
    gnutls_datum_t ticket_key;
    unsigned refs;
    char subject[256];
};

struct tiled_tls {
    pthread_mutex_t lock;
    struct tls_cred *current;
    struct tls_cred **held; /* held[fd]: the credentials of the session on socket fd */
    size_t nheld;
    char cert_path[256], key_path[256];
    char ca_path[256]; /* --tls-client-ca; "" when no client certificate is asked for */
    gnutls_priority_t prio, prio_h2;
};

/* The whole file as a NUL-terminated string; NULL with `e` naming it. */
static char *read_pem(const char *what, const char *path, size_t *len, struct tile_error *e)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        tile_error_set(e, TILE_EIO, "%s %s: %s", what, path, strerror(errno));
        return NULL;
    }
    char *buf = malloc(MAX_PEM + 1);
    size_t n = buf ? fread(buf, 1, MAX_PEM + 1, f) : 0;
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (!buf || err || n > MAX_PEM) {
        tile_error_set(e, TILE_EIO, "%s %s: %s", what, path,
                       !buf ? "out of memory" : err ? strerror(err) : "larger than 1 MiB");
        free(buf);
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    char *fit = realloc(buf, n + 1); /* a few KiB kept, not the bound */
    return fit ? fit : buf;
}

static void cred_free(struct tls_cred *c)
{
    if (!c)
        return;
    if (c->cred)
        gnutls_certificate_free_credentials(c->cred);
    if (c->ticket_key.data) {
        memset(c->ticket_key.data, 0, c->ticket_key.size);
        gnutls_free(c->ticket_key.data);
    }
    free(c);
}

/* Parses the chain and the key apart, so an error names its file, then
 * pairs them (GnuTLS checks that the key is the certificate's). */
static struct tls_cred *cred_from_pem(const char *cert_path, const char *cert_pem, size_t cert_len,
                                      const char *key_path, const char *key_pem, size_t key_len, struct tile_error *e)
{
    gnutls_datum_t cd = {(unsigned char *)cert_pem, (unsigned)cert_len};
    gnutls_datum_t kd = {(unsigned char *)key_pem, (unsigned)key_len};
    gnutls_x509_crt_t *crts = NULL;
    unsigned ncrts = 0;
    gnutls_x509_privkey_t key = NULL;
    struct tls_cred *c = calloc(1, sizeof(*c));
    int rc;
    if (!c) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate TLS credentials");
        return NULL;
    }
    rc = gnutls_x509_crt_list_import2(&crts, &ncrts, &cd, GNUTLS_X509_FMT_PEM, 0);
    if (rc < 0 || ncrts == 0) {
        tile_error_set(e, TILE_EINVAL, "--tls-cert %s: not a PEM certificate: %s", cert_path,
                       gnutls_strerror(rc < 0 ? rc : GNUTLS_E_NO_CERTIFICATE_FOUND));
        goto fail;
    }
    gnutls_datum_t dn = {NULL, 0};
    if (gnutls_x509_crt_get_dn3(crts[0], &dn, 0) == 0) {
        snprintf(c->subject, sizeof(c->subject), "%.*s", (int)dn.size, (const char *)dn.data);
        gnutls_free(dn.data);
    }
    if ((rc = gnutls_x509_privkey_init(&key)) < 0 ||
        (rc = gnutls_x509_privkey_import2(key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
        /* PKCS#8 ("ENCRYPTED PRIVATE KEY") and OpenSSL's legacy form
         * ("Proc-Type: 4,ENCRYPTED") both say so in the PEM text. */
        bool encrypted = strstr(key_pem, "ENCRYPTED") != NULL;
        tile_error_set(e, TILE_EINVAL, "--tls-key %s: %s: %s", key_path,
                       encrypted ? "the key is protected by a passphrase (give tiled an unencrypted key, "
                                   "readable only by its user)"
                                 : "not a PEM private key",
                       gnutls_strerror(rc));
        goto fail;
    }
    if ((rc = gnutls_certificate_allocate_credentials(&c->cred)) < 0) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate TLS credentials: %s", gnutls_strerror(rc));
        goto fail;
    }
    rc = gnutls_certificate_set_x509_key(c->cred, crts, ncrts, key);
    if (rc < 0) {
        tile_error_set(e, TILE_EINVAL, "--tls-key %s does not go with --tls-cert %s: %s", key_path, cert_path,
                       gnutls_strerror(rc));
        goto fail;
    }
    c->refs = 1;
    goto done;
fail:
    cred_free(c);
    c = NULL;
done:
    for (unsigned i = 0; i < ncrts; i++)
        gnutls_x509_crt_deinit(crts[i]);
    gnutls_free(crts);
    if (key)
        gnutls_x509_privkey_deinit(key);
    return c;
}

/* The CAs whose client certificates the handshake accepts: the trust list
 * GnuTLS verifies a client's chain against, and whose names its
 * CertificateRequest lists so a client can pick the right certificate. */
static int client_ca_load(struct tls_cred *c, const char *path, struct tile_error *e)
{
    size_t len = 0;
    char *pem = read_pem("--tls-client-ca", path, &len, e);
    if (!pem)
        return -1;
    gnutls_datum_t d = {(unsigned char *)pem, (unsigned)len};
    int rc = gnutls_certificate_set_x509_trust_mem(c->cred, &d, GNUTLS_X509_FMT_PEM);
    free(pem);
    if (rc <= 0)
        return tile_error_set(e, TILE_EINVAL, "--tls-client-ca %s: not a PEM certificate: %s", path,
                              gnutls_strerror(rc < 0 ? rc : GNUTLS_E_NO_CERTIFICATE_FOUND));
    return 0;
}

/* Loads the files. */
static struct tls_cred *cred_load(const struct tiled_tls *t, struct tile_error *e)
{
    size_t cl = 0, kl = 0;
    char *cert = read_pem("--tls-cert", t->cert_path, &cl, e);
    char *key = cert ? read_pem("--tls-key", t->key_path, &kl, e) : NULL;
    struct tls_cred *c = key ? cred_from_pem(t->cert_path, cert, cl, t->key_path, key, kl, e) : NULL;
    if (c && t->ca_path[0] && client_ca_load(c, t->ca_path, e) < 0) {
        cred_free(c);
        c = NULL;
    }
    /* A random ticket key per load, GnuTLS deriving the keys it encrypts
     * tickets with from it and rotating them. A new one at each reload
     * means no session resumes past it: a resumed session shows no
     * certificate again, and the client CAs, or the certificate, it was
     * made under may be the ones the reload took away. */
    int rc;
    if (c && (rc = gnutls_session_ticket_key_generate(&c->ticket_key)) < 0) {
        c->ticket_key.data = NULL;
        tile_error_set(e, TILE_EINVAL, "cannot make a session-ticket key: %s", gnutls_strerror(rc));
        cred_free(c);
        c = NULL;
    }
    free(cert);
    if (key) {
        memset(key, 0, kl); /* no copy of the key outlives its use */
        free(key);
    }
    return c;
}

static bool ephemeral_kx(gnutls_kx_algorithm_t kx)
{
    return kx == GNUTLS_KX_ECDHE_RSA || kx == GNUTLS_KX_ECDHE_ECDSA || kx == GNUTLS_KX_DHE_RSA ||
           kx == GNUTLS_KX_DHE_DSS || kx == GNUTLS_KX_DHE_PSK || kx == GNUTLS_KX_ECDHE_PSK;
}

/* The HTTP/2 policy keeps a version it allows and no suite it forbids. */
static int h2_check(gnutls_priority_t p, struct tile_error *e)
{
    const unsigned *vers = NULL;
    int nvers = gnutls_priority_protocol_list(p, &vers);
    bool modern = false;
    for (int i = 0; i < nvers; i++)
        modern |= vers[i] == GNUTLS_TLS1_2 || vers[i] == GNUTLS_TLS1_3;
    if (!modern)
        return tile_error_set(e, TILE_EINVAL,
                              "--tls-priorities leaves the gRPC port neither TLS 1.2 nor 1.3 (HTTP/2 needs one)");
    for (unsigned i = 0;; i++) {
        unsigned sidx;
        int rc = gnutls_priority_get_cipher_suite_index(p, i, &sidx);
        if (rc == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
            break;
        if (rc < 0) /* a suite this GnuTLS cannot use */
            continue;
        gnutls_kx_algorithm_t kx;
        gnutls_cipher_algorithm_t cipher;
        gnutls_mac_algorithm_t mac;
        gnutls_protocol_t minv;
        unsigned char id[2];
        const char *name = gnutls_cipher_suite_info(sidx, id, &kx, &cipher, &mac, &minv);
        if (!name || minv == GNUTLS_TLS1_3)
            continue;
        if (mac != GNUTLS_MAC_AEAD || !ephemeral_kx(kx))
            return tile_error_set(e, TILE_EINVAL,
                                  "--tls-priorities: %s is forbidden for HTTP/2 (RFC 9113 Appendix A) and tiled "
                                  "cannot take it off the gRPC port's policy; remove it",
                                  name);
    }
    return 0;
}

static int priorities_init(struct tiled_tls *t, const char *priorities, struct tile_error *e)
{
    const char *err = NULL;
    int rc = gnutls_priority_init(&t->prio, priorities, &err);
    if (rc < 0) {
        t->prio = NULL;
        return tile_error_set(e, TILE_EINVAL, "--tls-priorities: %s (at \"%.40s\")", gnutls_strerror(rc),
                              err ? err : priorities);
    }
    char h2[256 + sizeof(h2_removals)];
    snprintf(h2, sizeof(h2), "%s%s", priorities, h2_removals);
    rc = gnutls_priority_init(&t->prio_h2, h2, &err);
    if (rc < 0) {
        t->prio_h2 = NULL;
        if (rc == GNUTLS_E_NO_PRIORITIES_WERE_SET)
            return tile_error_set(e, TILE_EINVAL, "--tls-priorities leaves the gRPC port neither TLS 1.2 nor 1.3 "
                                                  "with a suite HTTP/2 allows (RFC 9113 9.2)");
        return tile_error_set(e, TILE_EINVAL, "--tls-priorities with HTTP/2's exclusions: %s", gnutls_strerror(rc));
    }
    return h2_check(t->prio_h2, e);
}

/* ---- client-initiated renegotiation on the HTTPS port's sessions ------------
 *
 * TLS 1.2 lets a client start a new handshake on an established connection
 * (a ClientHello in a handshake record), each costing the server a key
 * exchange: the DoS that testssl.sh calls "client-initiated renegotiation".
 * GnuTLS never performs one by itself: gnutls_record_recv() returns
 * GNUTLS_E_REHANDSHAKE and leaves the answer to the application (GnuTLS
 * manual, "TLS 1.2 re-authentication"). The gRPC port answers with the
 * no_renegotiation alert and closes (session.c). The HTTPS port cuts the
 * connection, as it did when its sessions were libmicrohttpd's (which
 * answered with close_notify, an orderly end that clients, OpenSSL's
 * s_client and so testssl.sh, read as the server going along, and offered
 * no hook between GnuTLS and its reads; tests/server/test_tls.py holds the
 * cut).
 *
 * So the HTTPS port's sessions read their socket through a pull function
 * (gnutls_transport_set_pull_function) that follows the record headers the
 * client sends. After its ChangeCipherSpec a client's next handshake record
 * is its Finished (full or resumed handshake alike); one after that, in a
 * version that has renegotiation (TLS 1.2 or older), is a renegotiation:
 * the socket is shut and the read fails as a reset connection before
 * GnuTLS sees any of the record. GnuTLS ends the session as broken and
 * the connection closes; a close_notify (GnuTLS sends alerts even on a
 * broken session) would find the socket shut, so the client sees the
 * connection cut, not ended in order. No renegotiation is ever begun, and
 * the client is not left to take the close for consent. TLS 1.3 has none:
 * after its ChangeCipherSpec (sent for middleboxes) a client's records are
 * all application_data, the second ClientHello of a HelloRetryRequest
 * aside, which the rule takes for the Finished. */

enum { REC_CHANGE_CIPHER_SPEC = 20, REC_HEARTBEAT = 24, REC_HANDSHAKE = 22, REC_HEADER = 5 };

/* One watched connection: its session and where the next header begins. */
struct rec_watch {
    gnutls_session_t s; /* NULL: not watched */
    uint16_t left;      /* bytes of the current record's body still to come */
    uint8_t have;       /* bytes of the next header read so far */
    uint8_t hdr[REC_HEADER];
    uint8_t stage;      /* WATCH_*: how far the client's first handshake is */
};

enum { WATCH_HELLO, WATCH_CHANGED_CIPHER, WATCH_FINISHED };

/* Indexed by descriptor, allocated once for every descriptor the process
 * may open (calloc'd pages are touched only for those in use). An entry is
 * written when its connection's session starts and ends, and read by its
 * reads, all on the connection's own loop thread. */
static struct rec_watch *watches;
static size_t nwatches;
static pthread_once_t watches_once = PTHREAD_ONCE_INIT;

static void watches_alloc(void)
{
    struct rlimit rl;
    size_t n = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (size_t)rl.rlim_cur : 65536;
    if (n > (1u << 22))
        n = 1u << 22;
    watches = calloc(n, sizeof(*watches));
    nwatches = watches ? n : 0;
}

static struct rec_watch *watch_of(int fd)
{
    return fd >= 0 && (size_t)fd < nwatches && watches[fd].s ? &watches[fd] : NULL;
}

static bool has_renegotiation(gnutls_session_t s)
{
    gnutls_protocol_t v = gnutls_protocol_get_version(s);
    return v == GNUTLS_SSL3 || v == GNUTLS_TLS1_0 || v == GNUTLS_TLS1_1 || v == GNUTLS_TLS1_2;
}

/* Follows the record headers in n bytes read; false on a renegotiation.
 * Bytes that are no TLS record (a type that does not exist, a major
 * version other than 3) end the watch: GnuTLS refuses them itself. */
static bool watch_bytes(struct rec_watch *w, const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n && w->s;) {
        if (w->left > 0) {
            size_t k = n - i < w->left ? n - i : w->left;
            w->left = (uint16_t)(w->left - k);
            i += k;
            continue;
        }
        w->hdr[w->have++] = p[i++];
        if (w->have < REC_HEADER)
            continue;
        w->have = 0;
        w->left = (uint16_t)(w->hdr[3] << 8 | w->hdr[4]);
        if (w->hdr[0] < REC_CHANGE_CIPHER_SPEC || w->hdr[0] > REC_HEARTBEAT || w->hdr[1] != 3)
            w->s = NULL;
        else if (w->hdr[0] == REC_CHANGE_CIPHER_SPEC && w->stage == WATCH_HELLO)
            w->stage = WATCH_CHANGED_CIPHER;
        else if (w->hdr[0] == REC_HANDSHAKE && w->stage == WATCH_CHANGED_CIPHER)
            w->stage = WATCH_FINISHED;
        else if (w->hdr[0] == REC_HANDSHAKE && w->stage == WATCH_FINISHED && has_renegotiation(w->s))
            return false;
    }
    return true;
}

static ssize_t watched_pull(gnutls_transport_ptr_t ptr, void *buf, size_t n)
{
    int fd = (int)(intptr_t)ptr;
    ssize_t r = recv(fd, buf, n, 0);
    struct rec_watch *w = r > 0 ? watch_of(fd) : NULL;
    if (w && !watch_bytes(w, buf, (size_t)r)) {
        tiled_log_event(TILED_LOG_INFO, "tls_renegotiation_refused", "{s:s}", "transport", "http");
        w->s = NULL;
        shutdown(fd, SHUT_RDWR);
        errno = ECONNRESET;
        return -1;
    }
    return r;
}

/* GnuTLS wants a wait with a timeout beside a pull function it did not
 * provide (else a timed read fails); the same as its own. */
static int watched_pull_timeout(gnutls_transport_ptr_t ptr, unsigned ms)
{
    struct pollfd pfd = {(int)(intptr_t)ptr, POLLIN, 0};
    return poll(&pfd, 1, ms == GNUTLS_INDEFINITE_TIMEOUT ? -1 : (int)ms);
}

static void watch_start(gnutls_session_t s, int fd)
{
    if ((size_t)fd >= nwatches)
        return; /* a descriptor above the limit at start: GnuTLS's own answer stands */
    watches[fd] = (struct rec_watch){.s = s};
    gnutls_transport_set_pull_function(s, watched_pull);
    gnutls_transport_set_pull_timeout_function(s, watched_pull_timeout);
}

static void watch_end(int fd)
{
    if (fd >= 0 && (size_t)fd < nwatches)
        watches[fd].s = NULL;
}

struct tiled_tls *tiled_tls_new(const char *cert_path, const char *key_path, const char *client_ca_path,
                                const char *priorities, struct tile_error *e)
{
    if (!cert_path[0] || !key_path[0]) {
        tile_error_set(e, TILE_EINVAL, "--tls-cert and --tls-key must be given together%s",
                       client_ca_path[0] ? " (--tls-client-ca needs both)" : "");
        return NULL;
    }
    struct tiled_tls *t = calloc(1, sizeof(*t));
    if (!t) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the TLS state");
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    pthread_once(&watches_once, watches_alloc);
    if (!watches) {
        tile_error_set(e, TILE_ENOMEM, "cannot allocate the TLS connection table");
        pthread_mutex_destroy(&t->lock);
        free(t);
        return NULL;
    }
    snprintf(t->cert_path, sizeof(t->cert_path), "%s", cert_path);
    snprintf(t->key_path, sizeof(t->key_path), "%s", key_path);
    snprintf(t->ca_path, sizeof(t->ca_path), "%s", client_ca_path);
    if (priorities_init(t, priorities, e) < 0 || !(t->current = cred_load(t, e)))
        goto fail;
    return t;
fail:
    tiled_tls_free(t);
    return NULL;
}

void tiled_tls_free(struct tiled_tls *t)
{
    if (!t)
        return;
    for (size_t fd = 0; fd < t->nheld; fd++) /* none when every session has ended */
        tiled_tls_session_end(t, (int)fd);
    cred_free(t->current);
    free(t->held);
    if (t->prio)
        gnutls_priority_deinit(t->prio);
    if (t->prio_h2)
        gnutls_priority_deinit(t->prio_h2);
    pthread_mutex_destroy(&t->lock);
    free(t);
}

/* Frees credentials a reload replaced, once their last session has ended. */
static void retire(struct tls_cred *c)
{
    if (!c)
        return;
    tiled_log_event(TILED_LOG_DEBUG, "tls_retired", "{s:o}", "subject", tiled_json_text(c->subject));
    cred_free(c);
}

/* Drops one reference; the caller frees what comes back (outside the lock). */
static struct tls_cred *unref_locked(struct tls_cred *c)
{
    return c && --c->refs == 0 ? c : NULL;
}

int tiled_tls_reload(struct tiled_tls *t, struct tile_error *e)
{
    struct tls_cred *c = cred_load(t, e);
    if (!c)
        return -1;
    pthread_mutex_lock(&t->lock);
    struct tls_cred *old = unref_locked(t->current);
    t->current = c;
    pthread_mutex_unlock(&t->lock);
    retire(old);
    return 0;
}

void tiled_tls_subject(struct tiled_tls *t, char *dst, size_t cap)
{
    pthread_mutex_lock(&t->lock);
    snprintf(dst, cap, "%s", t->current->subject);
    pthread_mutex_unlock(&t->lock);
}

int tiled_tls_session_start(struct tiled_tls *t, void *session, int fd, bool h2)
{
    gnutls_session_t s = session;
    if (fd < 0)
        return -1;
    pthread_mutex_lock(&t->lock);
    if ((size_t)fd >= t->nheld) {
        size_t n = t->nheld;
        struct tls_cred **held =
            tile_grow(t->held, &n, t->nheld, (size_t)fd + 1 - t->nheld, sizeof(*held), 64, SIZE_MAX);
        if (!held) {
            pthread_mutex_unlock(&t->lock);
            return -1;
        }
        memset(held + t->nheld, 0, (n - t->nheld) * sizeof(*held));
        t->held = held;
        t->nheld = n;
    }
    struct tls_cred *stale = unref_locked(t->held[fd]); /* none: every session ends before its socket closes */
    struct tls_cred *c = t->current;
    c->refs++;
    t->held[fd] = c;
    pthread_mutex_unlock(&t->lock);
    retire(stale);
    if (gnutls_priority_set(s, h2 ? t->prio_h2 : t->prio) < 0 ||
        gnutls_credentials_set(s, GNUTLS_CRD_CERTIFICATE, c->cred) < 0 ||
        gnutls_session_ticket_enable_server(s, &c->ticket_key) < 0)
        return -1; /* the caller drops the session, then ends it */
    if (t->ca_path[0]) {
        /* Mutual TLS: no certificate, or one whose chain does not verify
         * against the CAs or is not for TLS clients (extended key usage),
         * fails the handshake. */
        static gnutls_typed_vdata_st client_use = {GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT,
                                                   0};
        gnutls_certificate_server_set_request(s, GNUTLS_CERT_REQUIRE);
        gnutls_session_set_verify_cert2(s, &client_use, 1, 0);
    }
    if (!h2)
        watch_start(s, fd);
    return 0;
}

void tiled_tls_session_end(struct tiled_tls *t, int fd)
{
    if (fd < 0)
        return;
    watch_end(fd);
    pthread_mutex_lock(&t->lock);
    struct tls_cred *old = NULL;
    if ((size_t)fd < t->nheld) {
        old = unref_locked(t->held[fd]);
        t->held[fd] = NULL;
    }
    pthread_mutex_unlock(&t->lock);
    retire(old);
}

bool tiled_tls_h2_acceptable(void *session)
{
    gnutls_session_t s = session;
    gnutls_protocol_t v = gnutls_protocol_get_version(s);
    if (v == GNUTLS_TLS1_3)
        return true;
    return v == GNUTLS_TLS1_2 && gnutls_mac_get(s) == GNUTLS_MAC_AEAD && ephemeral_kx(gnutls_kx_get(s));
}

const char *tiled_tls_library(void)
{
    static char text[48];
    snprintf(text, sizeof(text), "GnuTLS %s", gnutls_check_version(NULL));
    return text;
}
