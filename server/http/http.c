/* http.c - the HTTP transport's lifecycle (http.h): the project's own
 * HTTP/1.1 loops (h1loop.c), over TLS when configured. */
#include "http.h"

#include "h1serve.h"
#include "server.h"

int tiled_http_start(struct tiled_server *srv, struct tile_error *e)
{
    struct http_transport *t = http_transport_start(srv, e);
    if (!t)
        return -1;
    srv->transport = t;
    srv->port = http_transport_port(t);
    return 0;
}

void tiled_http_quiesce(struct tiled_server *srv)
{
    http_transport_quiesce(srv->transport);
}

bool tiled_http_drained(struct tiled_server *srv)
{
    return http_transport_drained(srv->transport);
}

void tiled_http_stop(struct tiled_server *srv)
{
    http_transport_stop(srv->transport);
    srv->transport = NULL;
}
