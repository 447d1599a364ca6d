/* probe.c - `tiled probe URL`: a health check with no other tool needed.
 *
 * Container HEALTHCHECKs and scripts call the binary itself, so images need
 * no curl. It sends one GET to an http:// or https://HOST:PORT/PATH URL
 * (an IP literal, [IPv6] included, or a resolvable name) and exits 0 on a
 * 2xx status, 1 otherwise; every wait is bounded, so a port that never
 * answers fails in seconds rather than hanging.
 *
 * HTTPS goes through the daemon's TLS library, which the CLI may not see
 * (tests/layering): tiled_tls_probe (server/tls/client.h) is declared weak
 * here, as cli/main.c declares tiled_serve_main. The full binary links it;
 * a CLI-only build (make cli-only) has none and says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "cli.h"

#define PROBE_TIMEOUT_MS 3000

/* server/tls/client.h; the prototype must stay the same as there. */
long tiled_tls_probe(int fd, const char *host, const char *cacert, bool insecure, const char *cert, const char *key,
                     const char *req, size_t n, char *resp, size_t cap, char *why, size_t why_cap)
    __attribute__((weak));

struct url {
    bool tls;
    char host[256], port[16];
    const char *path;
};

static int parse_url(const char *text, struct url *u)
{
    const char *h;
    if (strncmp(text, "http://", 7) == 0)
        h = text + 7, u->tls = false;
    else if (strncmp(text, "https://", 8) == 0)
        h = text + 8, u->tls = true;
    else
        return -1;
    const char *end;
    if (*h == '[') { /* an IPv6 literal (RFC 3986 3.2.2) */
        end = strchr(h, ']');
        if (!end)
            return -1;
        h++;
    } else {
        end = h + strcspn(h, ":/");
    }
    if (end == h || (size_t)(end - h) >= sizeof(u->host))
        return -1;
    memcpy(u->host, h, (size_t)(end - h));
    u->host[end - h] = '\0';
    if (*end == ']')
        end++;
    const char *p = u->tls ? "443" : "80";
    size_t plen = strlen(p);
    if (*end == ':') {
        p = end + 1;
        plen = strcspn(p, "/");
        end = p + plen;
    } else if (*end && *end != '/') {
        return -1;
    }
    if (plen == 0 || plen >= sizeof(u->port))
        return -1;
    memcpy(u->port, p, plen);
    u->port[plen] = '\0';
    u->path = *end ? end : "/";
    return 0;
}

/* A connected socket whose every later wait is bounded, or -1 with the
 * reason printed. Each address of the name is tried in turn (localhost may
 * be ::1 and 127.0.0.1, and the daemon on only one of them). */
static int dial(const char *url, const struct url *u)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai, *a;
    int rc = getaddrinfo(u->host, u->port, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "tiled probe: cannot resolve %s: %s\n", u->host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = 0;
    for (a = ai; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        struct pollfd pfd = {fd, POLLOUT, 0};
        socklen_t len = sizeof(err);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0)
            err = 0;
        else if (errno != EINPROGRESS)
            err = errno;
        else if (poll(&pfd, 1, PROBE_TIMEOUT_MS) != 1)
            err = ETIMEDOUT;
        else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
            err = errno;
        if (err) {
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        fprintf(stderr, "tiled probe: cannot connect to %s: %s\n", url, strerror(err));
        return -1;
    }
    /* Blocking from here, each receive and send bounded (the TLS library
     * then waits as plain reads do). */
    struct timeval tv = {PROBE_TIMEOUT_MS / 1000, (PROBE_TIMEOUT_MS % 1000) * 1000};
    if (fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0) {
        fprintf(stderr, "tiled probe: cannot set up the socket: %s\n", strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

/* The request over a plain connection; the answer's first bytes into resp. */
static long plain_exchange(int fd, const char *url, const char *req, size_t n, char *resp, size_t cap)
{
    if (write(fd, req, n) != (ssize_t)n) {
        fprintf(stderr, "tiled probe: cannot send to %s: %s\n", url, strerror(errno));
        return -1;
    }
    size_t got = 0;
    while (got + 1 < cap && !memchr(resp, '\n', got)) {
        ssize_t r = read(fd, resp + got, cap - 1 - got);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && got == 0) {
            fprintf(stderr, "tiled probe: no answer from %s within %d ms\n", url, PROBE_TIMEOUT_MS);
            return -1;
        }
        break; /* the end of the answer, or a reset after part of it */
    }
    resp[got] = '\0';
    return (long)got;
}

struct options {
    const char *url, *cacert, *cert, *key;
    bool insecure;
};

static int probe(const struct options *o)
{
    struct url u;
    char req[1024], resp[256], why[512];
    if (parse_url(o->url, &u) < 0) {
        fprintf(stderr, "tiled probe: '%s' is not an http:// or https://HOST:PORT/PATH URL\n", o->url);
        return 2;
    }
    if (!u.tls && (o->cacert || o->insecure || o->cert)) {
        fprintf(stderr, "tiled probe: --cacert, --insecure, --cert and --key are for https:// URLs\n");
        return 2;
    }
    if (u.tls && !tiled_tls_probe) {
        fprintf(stderr, "tiled probe: this build has no TLS (built without server/): https:// URLs need the full "
                        "tiled binary\n");
        return 2;
    }
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nConnection: close\r\n\r\n", u.path,
                     strchr(u.host, ':') ? "[" : "", u.host, strchr(u.host, ':') ? "]" : "", u.port);
    if (n < 0 || (size_t)n >= sizeof(req)) {
        fprintf(stderr, "tiled probe: the URL is too long\n");
        return 2;
    }
    int fd = dial(o->url, &u);
    if (fd < 0)
        return 1;
    long got = u.tls ? tiled_tls_probe(fd, u.host, o->cacert, o->insecure, o->cert, o->key, req, (size_t)n, resp,
                                       sizeof(resp), why, sizeof(why))
                     : plain_exchange(fd, o->url, req, (size_t)n, resp, sizeof(resp));
    close(fd);
    if (got < 0 && u.tls)
        fprintf(stderr, "tiled probe: %s: %s\n", o->url, why);
    if (got < 0)
        return 1;
    /* A TLS record (handshake 0x16 or alert 0x15, version 3.x) where HTTP
     * was expected: the port wants TLS. */
    if (!u.tls && got >= 2 && (resp[0] == 0x15 || resp[0] == 0x16) && resp[1] == 0x03) {
        fprintf(stderr, "tiled probe: %s answered in TLS: probe https://%s instead\n", o->url, o->url + 7);
        return 1;
    }
    if (got == 0) {
        fprintf(stderr, "tiled probe: %s closed the connection without an HTTP answer%s\n", o->url,
                u.tls ? "" : " (does the port serve TLS? then probe https://)");
        return 1;
    }
    if (got < 12 || strncmp(resp, "HTTP/1.", 7) != 0 || resp[8] != ' ') {
        fprintf(stderr, "tiled probe: %s: not an HTTP answer\n", o->url);
        return 1;
    }
    int status = (int)strtol(resp + 9, NULL, 10); /* "HTTP/1.1 200" */
    printf("%d\n", status);
    return status >= 200 && status < 300 ? 0 : 1;
}

static int usage(FILE *out, int status)
{
    fprintf(out, "usage: tiled probe [--cacert FILE | --insecure] [--cert FILE --key FILE] URL\n\n"
                 "GET URL (http:// or https://HOST:PORT/PATH); exit 0 on a 2xx status, 1 otherwise.\n"
                 "  --cacert FILE  verify the server's certificate against the CAs in FILE (PEM)\n"
                 "                 instead of the system's trust store\n"
                 "  --insecure     do not verify the server's certificate (as curl -k)\n"
                 "  --cert FILE --key FILE\n"
                 "                 a client certificate, for a server that requires one (--tls-client-ca)\n");
    return status;
}

int tiled_cli_probe(int argc, char **argv)
{
    struct options o = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char **value = strcmp(a, "--cacert") == 0 ? &o.cacert
                             : strcmp(a, "--cert") == 0 ? &o.cert
                             : strcmp(a, "--key") == 0  ? &o.key
                                                        : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return usage(stdout, 0);
        if (strcmp(a, "--insecure") == 0 || strcmp(a, "-k") == 0) {
            o.insecure = true;
        } else if (value && i + 1 < argc) {
            *value = argv[++i];
        } else if (a[0] != '-' && !o.url) {
            o.url = a;
        } else {
            fprintf(stderr, "tiled probe: %s %s\n", a, value ? "needs a value" : "is not an option");
            return usage(stderr, 2);
        }
    }
    if (!o.url)
        return usage(stderr, 2);
    if (o.cacert && o.insecure) {
        fprintf(stderr, "tiled probe: --cacert and --insecure exclude each other\n");
        return 2;
    }
    if (!o.cert != !o.key) {
        fprintf(stderr, "tiled probe: --cert and --key go together\n");
        return 2;
    }
    return probe(&o);
}
