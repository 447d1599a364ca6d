/* inflate.c - a request body sent with a Content-Encoding (see inflate.h). */
#include "inflate.h"

#include "compress.h"
#include "server.h"

int tiled_inflate_body(struct tiled_req *req, struct tile_error *e)
{
    if (tiled_coding_parse(req->content_encoding, &req->request_coding) < 0) {
        tiled_reply_error(&req->reply, TILED_UNSUPPORTED_MEDIA_TYPE, "unsupported Content-Encoding '%.60s' (use gzip, deflate or identity)",
                          req->content_encoding);
        tiled_reply_header(&req->reply, "Accept-Encoding", "gzip, deflate");
        return -2;
    }
    if (tiled_body_decompress(req->request_coding, &req->body, &req->body_len, req->srv->lim.max_body, e) < 0)
        return -1;
    req->body_cap = req->body_len;
    req->request_coding = TILED_CODING_IDENTITY;
    req->content_encoding = ""; /* inflated once, whoever reads the body next */
    return 0;
}
