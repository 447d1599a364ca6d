/* inflate.c - a request body sent with a Content-Encoding (see inflate.h). */
#include "inflate.h"

#include "compress.h"
#include "server.h"

bool tiled_inflate_needed(const struct tiled_req *req)
{
    enum tiled_coding c;
    return tiled_coding_parse(req->content_encoding, &c) < 0 || c != TILED_CODING_IDENTITY;
}

int tiled_inflate_body(struct tiled_req *req, struct tile_error *e)
{
    bool grpc = req->transport == TILED_TRANSPORT_GRPC;
    if (tiled_coding_parse(req->content_encoding, &req->request_coding) < 0) {
        if (grpc) { /* the transport refuses other grpc-encodings from the head; kept for any other caller */
            tiled_reply_fault(&req->reply, TILED_FAULT_CODING, "grpc-encoding '%.40s' is not supported",
                              req->content_encoding);
            return -2;
        }
        tiled_reply_fault(&req->reply, TILED_FAULT_CODING, "unsupported Content-Encoding '%.60s' (use gzip, deflate or identity)",
                          req->content_encoding);
        tiled_reply_header(&req->reply, "Accept-Encoding", "gzip, deflate");
        return -2;
    }
    /* A plain body is already counted, as it arrived (service.c): there
     * is no copy to count. */
    if (req->request_coding == TILED_CODING_IDENTITY)
        return 0;
    /* A gRPC message is bounded like an uncompressed one: by the smaller
     * of --max-body and --max-grpc-message. */
    uint64_t max = req->srv->lim.max_body;
    if (grpc && (uint64_t)req->srv->cfg.max_grpc_message < max)
        max = (uint64_t)req->srv->cfg.max_grpc_message;
    if (tiled_body_decompress(req->request_coding, &req->body, &req->body_len, max, e) < 0) {
        if (!grpc || e->code == TILE_ETOOBIG)
            return -1;
        /* gRPC says INTERNAL for a message that does not inflate. */
        tiled_reply_fault(&req->reply, tiled_fault_of_message(e), "%s", e->text);
        return -2;
    }
    req->body_cap = req->body_len;
    /* The inflated copy is taken from the budget; the compressed one's
     * bytes, freed, stay counted until the request ends (memory.h). */
    if (tiled_memory_take(&req->srv->memory, &req->mem_held, req->mem_kin, req->body_len, e) < 0)
        return -1;
    req->request_coding = TILED_CODING_IDENTITY;
    req->content_encoding = ""; /* inflated once, whoever reads the body next */
    return 0;
}
