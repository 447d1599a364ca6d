/* fuzz_pbdiff.c - tiled's hand-written protobuf decoders against a
 * reference reader: protobuf-c's generated code for the same .proto files
 * (generated at build time from api/proto/ and fuzz/pbdiff/reflection.proto
 * through fuzz/pbdiff/bytes_view.py: strings as bytes, maps as their entry
 * messages, so protobuf-c hands over every byte it read; fuzz.mk).
 *
 * The input is read as each request message tiled decodes by hand:
 * ModelInferRequest; the {name, version} requests of ModelReady,
 * ModelMetadata, ModelConfig and ModelStatistics; grpc.health.v1's
 * HealthCheckRequest; the system and CUDA shared-memory status, unregister
 * and register requests; the empty requests of ServerLive, ServerReady and
 * ServerMetadata; ServerReflectionRequest. For each:
 *
 * - protobuf-c refuses the bytes: tiled must refuse them too.
 * - protobuf-c reads them: tiled's reading must equal protobuf-c's, field
 *   by field, through tiled's api/ structures. Where tiled turns the
 *   fields into something else (ModelInferRequest's tensors, a reflection
 *   answer), the reference is tiled's reading of the canonical encoding of
 *   protobuf-c's reading (protobuf-c's packer, unknown fields dropped, each
 *   map key once with its last value): two encodings of one meaning must
 *   decode alike, accepted or refused with the same error.
 *
 * Where protobuf-c is not the protobuf rule, the input is first brought to
 * what the rule means (read_as_upb, which also refuses what upb refuses
 * and protobuf-c reads: a field number 0, a key longer than five bytes): protobuf-c refuses groups and a known
 * field with another wire type, which Google's parsers (C++, upb, Java)
 * keep as unknown fields; those are dropped before protobuf-c reads. It
 * also refuses a length prefix longer than five bytes, which upb (the
 * protobuf package's parser) reads as any varint of up to ten: lengths are
 * written in their shortest form before protobuf-c reads. And
 * proto3 `string` fields must hold UTF-8, which protobuf-c does not check:
 * a message with invalid UTF-8 in any occurrence of a string field must be
 * refused by tiled.
 * Semantic checks tiled makes after decoding (datatype names, shapes,
 * sizes, shared memory) are no difference: both encodings meet them alike.
 *
 * A mismatch aborts with what differs (fuzz_fail). FUZZ_VERBOSE=1 prints
 * each message's verdicts. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <protobuf-c/protobuf-c.h>

#include "fuzz_common.h"
#include "grpc_infer.h"
#include "grpc_msgs.h"
#include "grpc_reflect.h"
#include "pbwire.h"

#include "grpc_service.pb-c.h"
#include "health.pb-c.h"
#include "reflection.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);

static bool verbose;

/* With FUZZ_PBDIFF_LIST set, a mismatch is printed once per kind (with the
 * input's bytes) and the run goes on: to list every open difference at
 * once instead of stopping at the first. */
static bool list_mode;
static const uint8_t *current;
static size_t current_len;

static void show(const char *what, const uint8_t *p, size_t n)
{
    fprintf(stderr, "%s (%zu bytes):", what, n);
    for (size_t i = 0; i < n && i < 512; i++)
        fprintf(stderr, " %02x", p[i]);
    fprintf(stderr, "\n");
}

#define DIFF_CHECK(cond, ...)                                                                                          \
    do {                                                                                                               \
        if (!(cond))                                                                                                   \
            mismatch(__FILE__ ":" DIFF_STR(__LINE__), __VA_ARGS__);                                                    \
    } while (0)
#define DIFF_STR(x) DIFF_STR2(x)
#define DIFF_STR2(x) #x

static void mismatch(const char *where, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void mismatch(const char *where, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (!list_mode) {
        show("input", current, current_len);
        fuzz_fail("%s", msg);
    }
    static const char *seen[64];
    static unsigned nseen;
    for (unsigned i = 0; i < nseen; i++) {
        if (seen[i] == where)
            return;
    }
    if (nseen < 64)
        seen[nseen++] = where;
    fprintf(stderr, "MISMATCH %s: %s\n", where, msg);
    show("  input", current, current_len);
}

/* ---- the input as the protobuf rule reads it ------------------------------ */

struct out {
    uint8_t *p;
    size_t len, cap;
};

static void out_put(struct out *o, const void *d, size_t n)
{
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 64;
        while (cap < o->len + n)
            cap *= 2;
        uint8_t *p = realloc(o->p, cap);
        if (!p)
            abort();
        o->p = p;
        o->cap = cap;
    }
    if (n)
        memcpy(o->p + o->len, d, n);
    o->len += n;
}

static void out_varint(struct out *o, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n++] = (uint8_t)(v & 0x7f) | (v >= 0x80 ? 0x80 : 0);
        v >>= 7;
    } while (v);
    out_put(o, b, n);
}

/* A varint as protobuf's parsers read one: at most ten bytes, bits past
 * the 64th dropped. */
static bool varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (unsigned i = 0; i < 10; i++) {
        if (*p == end)
            return false;
        uint8_t b = *(*p)++;
        if (i < 10)
            *v |= i * 7 < 64 ? (uint64_t)(b & 0x7f) << (i * 7) : 0;
        if (!(b & 0x80))
            return true;
    }
    return false;
}

/* A field's key as protobuf's parsers read one: a varint of at most five
 * bytes below 2^32, with a field number of 1 or more. */
static bool key(const uint8_t **p, const uint8_t *end, uint64_t *tag)
{
    const uint8_t *start = *p;
    return varint(p, end, tag) && *p - start <= 5 && *tag <= UINT32_MAX && *tag >> 3 != 0;
}

/* Skips a field's value of wire type `wire` (the tag read); a group up to
 * its matching end. */
static bool skip(const uint8_t **p, const uint8_t *end, unsigned wire, uint64_t number, int depth)
{
    uint64_t v;
    switch (wire) {
    case 0:
        return varint(p, end, &v);
    case 1:
        if (end - *p < 8)
            return false;
        *p += 8;
        return true;
    case 5:
        if (end - *p < 4)
            return false;
        *p += 4;
        return true;
    case 2:
        if (!varint(p, end, &v) || v > (uint64_t)(end - *p))
            return false;
        *p += v;
        return true;
    case 3:
        if (depth > 64)
            return false;
        for (;;) {
            uint64_t tag;
            if (!key(p, end, &tag))
                return false;
            if ((tag & 7) == 4)
                return tag >> 3 == number;
            if (!skip(p, end, (unsigned)(tag & 7), tag >> 3, depth + 1))
                return false;
        }
    default:
        return false;
    }
}

static bool wire_fits(const ProtobufCFieldDescriptor *fd, unsigned wire)
{
    unsigned want;
    switch (fd->type) {
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        want = 5;
        break;
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        want = 1;
        break;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        want = 2;
        break;
    default:
        want = 0;
    }
    return wire == want || (wire == 2 && fd->label == PROTOBUF_C_LABEL_REPEATED); /* packed */
}

/* Rewrites msg[0, len) of type `d` into `o` without its groups and its
 * known fields of another wire type (at any depth), which protobuf's
 * parsers keep as unknown fields and protobuf-c refuses, and with every
 * length prefix in its shortest form. A singular sub-message given more
 * than once is written once, its occurrences concatenated (what merging
 * them means): protobuf-c 1.4.1 refuses some repeats, e.g. an empty one
 * given twice ("12 00 12 00" as ModelInferRequest.ParametersEntry).
 * Oneof members are left as they are (a oneof message given, then another
 * member, then the message again, starts afresh). Returns false for
 * bytes no parser reads (then protobuf-c reads the input as it is). */
#define MAX_FIELDS 32 /* fields of the largest message read here */

static bool really_bytes(const ProtobufCFieldDescriptor *fd);
static bool utf8_ok(const uint8_t *s, size_t n);

static bool read_as_upb(const ProtobufCMessageDescriptor *d, const uint8_t *p, size_t len, struct out *o, int depth,
                        bool *utf8)
{
    const uint8_t *end = p + len;
    if (depth > 64)
        return false;
    struct {
        bool seen;
        struct out payload;
    } merged[MAX_FIELDS] = {0};
    bool ok_all = true;
    while (ok_all && p < end) {
        const uint8_t *start = p;
        uint64_t tag;
        if (!key(&p, end, &tag)) {
            ok_all = false;
            break;
        }
        unsigned wire = (unsigned)(tag & 7);
        const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        if (wire == 4 || wire > 5) {
            ok_all = false;
            break;
        }
        const uint8_t *value = p;
        if (!skip(&p, end, wire, tag >> 3, 0)) {
            ok_all = false;
            break;
        }
        if (wire == 3 || (fd && !wire_fits(fd, wire)))
            continue; /* an unknown field: dropped */
        if (fd && fd->type == PROTOBUF_C_TYPE_MESSAGE) {
            uint64_t n;
            varint(&value, end, &n);
            struct out sub = {0};
            bool ok = read_as_upb(fd->descriptor, value, (size_t)n, &sub, depth + 1, utf8);
            size_t i = (size_t)(fd - d->fields);
            if (ok && fd->label != PROTOBUF_C_LABEL_REPEATED && !(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
                i < MAX_FIELDS) {
                merged[i].seen = true; /* merged: written once, at the end */
                out_put(&merged[i].payload, sub.p, sub.len);
            } else if (ok) {
                out_varint(o, tag);
                out_varint(o, sub.len);
                out_put(o, sub.p, sub.len);
            }
            free(sub.p);
            if (!ok) {
                ok_all = false;
                break;
            }
            continue;
        }
        if (wire == 2) { /* the length as few bytes as it takes */
            const uint8_t *len_at = value;
            uint64_t n;
            varint(&value, end, &n);
            if (fd && fd->type == PROTOBUF_C_TYPE_BYTES && !really_bytes(fd))
                *utf8 &= utf8_ok(value, (size_t)n); /* every occurrence, as upb checks them */
            out_put(o, start, (size_t)(len_at - start));
            out_varint(o, n);
            out_put(o, value, (size_t)n);
            continue;
        }
        out_put(o, start, (size_t)(p - start));
    }
    for (unsigned i = 0; i < d->n_fields && i < MAX_FIELDS; i++) {
        if (ok_all && merged[i].seen) {
            out_varint(o, (uint64_t)d->fields[i].id << 3 | 2);
            out_varint(o, merged[i].payload.len);
            out_put(o, merged[i].payload.p, merged[i].payload.len);
        }
        free(merged[i].payload.p);
    }
    return ok_all;
}

/* ---- protobuf-c's reading -------------------------------------------------- */

/* protobuf-c's reading of the bytes brought to upb's rules, or NULL when
 * they are not a message; *utf8: every occurrence of every string field
 * held UTF-8 (protobuf-c keeps only the last one of a field). */
static ProtobufCMessage *reference(const ProtobufCMessageDescriptor *d, const uint8_t *data, size_t size, bool *utf8)
{
    struct out o = {0};
    ProtobufCMessage *m = NULL;
    *utf8 = true;
    if (read_as_upb(d, data, size, &o, 0, utf8))
        m = protobuf_c_message_unpack(d, NULL, o.len, o.p ? o.p : (const uint8_t *)"");
    free(o.p);
    return m;
}

/* Strict UTF-8 (no overlong forms, surrogates or code points past
 * U+10FFFF), as proto3 requires of string fields. */
static bool utf8_ok(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t k = c >= 0xc2 && c <= 0xdf ? 1 : c >= 0xe0 && c <= 0xef ? 2 : c >= 0xf0 && c <= 0xf4 ? 3 : 0;
        if (!k || n - i <= k)
            return false;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c == 0xe0)
            lo = 0xa0;
        else if (c == 0xed)
            hi = 0x9f;
        else if (c == 0xf0)
            lo = 0x90;
        else if (c == 0xf4)
            hi = 0x8f;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return false;
        for (size_t j = 2; j <= k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return false;
        }
        i += k + 1;
    }
    return true;
}

/* Whether a bytes field of the view was a `bytes` field of the original
 * .proto (everything else declared bytes in the view was a string). */
static bool really_bytes(const ProtobufCFieldDescriptor *fd)
{
    return !strcmp(fd->name, "raw_input_contents") || !strcmp(fd->name, "bytes_contents") ||
           !strcmp(fd->name, "raw_handle");
}

static void *member(const ProtobufCMessage *m, unsigned offset)
{
    return (char *)m + offset;
}

static bool oneof_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
    return !(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || *(uint32_t *)member(m, fd->quantifier_offset) == fd->id;
}

/* Calls fn on each sub-message of `m` (each element of a repeated one). */
static void each_sub(ProtobufCMessage *m, void (*fn)(ProtobufCMessage *, void *), void *ctx)
{
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        if (fd->type != PROTOBUF_C_TYPE_MESSAGE || !oneof_set(m, fd))
            continue;
        if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(size_t *)member(m, fd->quantifier_offset);
            ProtobufCMessage **a = *(ProtobufCMessage ***)member(m, fd->offset);
            for (size_t k = 0; k < n; k++)
                fn(a[k], ctx);
        } else if (*(ProtobufCMessage **)member(m, fd->offset)) {
            fn(*(ProtobufCMessage **)member(m, fd->offset), ctx);
        }
    }
}

/* The canonical form: unknown fields dropped; a map (a repeated
 * ...Entry message) keeps the last entry of each key. */
static void canonical(ProtobufCMessage *m, void *ctx)
{
    for (unsigned i = 0; i < m->n_unknown_fields; i++)
        free(m->unknown_fields[i].data);
    free(m->unknown_fields);
    m->unknown_fields = NULL;
    m->n_unknown_fields = 0;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *fd = &d->fields[i];
        if (fd->type != PROTOBUF_C_TYPE_MESSAGE || fd->label != PROTOBUF_C_LABEL_REPEATED)
            continue;
        const char *name = ((const ProtobufCMessageDescriptor *)fd->descriptor)->name;
        size_t nl = strlen(name);
        if (nl < 5 || strcmp(name + nl - 5, "Entry") != 0)
            continue;
        size_t *n = member(m, fd->quantifier_offset);
        ProtobufCMessage **a = *(ProtobufCMessage ***)member(m, fd->offset);
        const ProtobufCFieldDescriptor *kd = protobuf_c_message_descriptor_get_field(fd->descriptor, 1);
        size_t kept = 0;
        for (size_t k = 0; k < *n; k++) {
            const ProtobufCBinaryData *key = member(a[k], kd->offset);
            bool later = false;
            for (size_t j = k + 1; j < *n && !later; j++) {
                const ProtobufCBinaryData *other = member(a[j], kd->offset);
                later = other->len == key->len && (key->len == 0 || !memcmp(other->data, key->data, key->len));
            }
            if (later)
                protobuf_c_message_free_unpacked(a[k], NULL);
            else
                a[kept++] = a[k];
        }
        *n = kept;
    }
    each_sub(m, canonical, ctx);
}

/* protobuf-c's encoding of `m` in canonical form (malloc'd). */
static uint8_t *pack(ProtobufCMessage *m, size_t *len)
{
    canonical(m, NULL);
    *len = protobuf_c_message_get_packed_size(m);
    uint8_t *p = malloc(*len ? *len : 1);
    if (!p)
        abort();
    FUZZ_CHECK(protobuf_c_message_pack(m, p) == *len, "protobuf-c packed a size it did not announce");
    return p;
}

static void report(const char *msg, int rc, const struct tile_error *e, bool ref_ok)
{
    if (verbose)
        fprintf(stderr, "pbdiff %s: protobuf-c %s, tiled %s%s%s\n", msg, ref_ok ? "reads" : "refuses",
                rc == 0 ? "reads" : "refuses", rc == 0 ? "" : ": ", rc == 0 ? "" : e->text);
}

/* ---- comparisons ------------------------------------------------------------ */

static bool same_str(struct tile_grpc_str a, const ProtobufCBinaryData *b)
{
    return a.len == b->len && (a.len == 0 || memcmp(a.ptr, b->data, a.len) == 0);
}

static bool same_strs(struct tile_grpc_str a, struct tile_grpc_str b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static const ProtobufCBinaryData *bytes_field(const ProtobufCMessage *m, unsigned id)
{
    static const ProtobufCBinaryData none = {0, NULL};
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(m->descriptor, id);
    if (!fd || fd->type != PROTOBUF_C_TYPE_BYTES || fd->label == PROTOBUF_C_LABEL_REPEATED || !oneof_set(m, fd))
        return &none;
    return member(m, fd->offset);
}


/* A request of which tiled reads string fields 1..n only, through
 * tile_grpc_strings_decode() with the layout its RPC uses (server/handlers/v2_grpc.c,
 * v2_grpc_shm.c, v2_grpc_infer.c): the model RPCs' {name, version}, the
 * health check's {service}, the shared-memory requests' {name}, the
 * server RPCs' empty messages (n 0). `whole`: the layout covers every
 * string of the message; ModelInferRequest's head (its model_name and
 * model_version) is read before the rest, which its decoder checks. */
static void check_strings(const ProtobufCMessageDescriptor *d, size_t n, bool whole, const uint8_t *msg, size_t size)
{
    struct tile_grpc_layout l = {d->name, {"1", "2"}, n};
    struct tile_grpc_str out[2];
    struct tile_error e = {0};
    int rc = tile_grpc_strings_decode(msg, size, &l, n ? out : NULL, &e);
    bool utf8;
    ProtobufCMessage *ref = reference(d, msg, size, &utf8);
    report(d->name, rc, &e, ref != NULL);
    if (!ref) {
        DIFF_CHECK(rc < 0 || !whole, "%s: protobuf-c refuses the message, tiled reads it", d->name);
    } else if (!utf8) {
        DIFF_CHECK(rc < 0 || !whole, "%s: a string field is not UTF-8, tiled reads the message", d->name);
    } else {
        DIFF_CHECK(rc == 0, "%s: protobuf-c reads the message, tiled refuses it: %s", d->name, e.text);
    }
    if (rc == 0 && ref && utf8) {
        for (size_t i = 0; i < n; i++)
            DIFF_CHECK(same_str(out[i], bytes_field(ref, (unsigned)i + 1)),
                       "%s: field %zu reads '%.*s', protobuf-c reads %zu bytes", d->name, i + 1, (int)out[i].len,
                       out[i].ptr, bytes_field(ref, (unsigned)i + 1)->len);
    }
    tile_error_clear(&e);
    if (ref)
        protobuf_c_message_free_unpacked(ref, NULL);
}

static void check_shm_register(const uint8_t *msg, size_t size)
{
    struct tile_grpc_shm_register r;
    struct tile_error e = {0};
    int rc = tile_grpc_shm_register_decode(msg, size, &r, &e);
    bool utf8;
    ProtobufCMessage *m = reference(&inference__system_shared_memory_register_request__descriptor, msg, size, &utf8);
    Inference__SystemSharedMemoryRegisterRequest *ref = (Inference__SystemSharedMemoryRegisterRequest *)m;
    report("SystemSharedMemoryRegisterRequest", rc, &e, ref != NULL);
    if (!ref) {
        DIFF_CHECK(rc < 0, "SystemSharedMemoryRegisterRequest: protobuf-c refuses the message, tiled reads it");
    } else if (!utf8) {
        DIFF_CHECK(rc < 0, "SystemSharedMemoryRegisterRequest: a string field is not UTF-8, tiled reads the message");
    } else {
        DIFF_CHECK(rc == 0, "SystemSharedMemoryRegisterRequest: protobuf-c reads it, tiled refuses it: %s", e.text);
    }
    if (rc == 0 && ref && utf8) {
        DIFF_CHECK(same_str(r.name, &ref->name) && same_str(r.key, &ref->key), "register: name or key differ");
        DIFF_CHECK(r.offset == ref->offset && r.byte_size == ref->byte_size,
                   "register: offset %llu byte_size %llu, protobuf-c reads %llu and %llu",
                   (unsigned long long)r.offset, (unsigned long long)r.byte_size, (unsigned long long)ref->offset,
                   (unsigned long long)ref->byte_size);
    }
    tile_error_clear(&e);
    if (m)
        protobuf_c_message_free_unpacked(m, NULL);
}

/* Two reflection answers agree but for original_request (field 2), which
 * echoes the request's own bytes. */
static bool same_reflection(const struct tile_grpc_buf *a, const struct tile_grpc_buf *b)
{
    struct tile_pb_reader ra, rb;
    struct tile_pb_field fa, fb;
    struct tile_error e = {0};
    tile_pb_reader_init(&ra, a->p ? a->p : (const uint8_t *)"", a->len);
    tile_pb_reader_init(&rb, b->p ? b->p : (const uint8_t *)"", b->len);
    for (;;) {
        int ca, cb;
        while ((ca = tile_pb_next(&ra, &fa, "a", &e)) > 0 && fa.number == 2)
            ;
        while ((cb = tile_pb_next(&rb, &fb, "b", &e)) > 0 && fb.number == 2)
            ;
        tile_error_clear(&e);
        if (ca != cb)
            return false;
        if (ca <= 0)
            return ca == 0;
        if (fa.number != fb.number || fa.wire != fb.wire || fa.value != fb.value || fa.len != fb.len ||
            (fa.len && memcmp(fa.data, fb.data, fa.len)))
            return false;
    }
}

static void check_reflection(const uint8_t *msg, size_t size)
{
    const ProtobufCMessageDescriptor *d = &grpc__reflection__v1alpha__server_reflection_request__descriptor;
    struct tile_grpc_buf got = {0}, want = {0};
    struct tile_error e = {0}, e2 = {0};
    int rc = tile_grpc_reflect(msg, size, &got, &e);
    bool utf8;
    ProtobufCMessage *ref = reference(d, msg, size, &utf8);
    report(d->name, rc, &e, ref != NULL);
    if (!ref) {
        DIFF_CHECK(rc < 0, "ServerReflectionRequest: protobuf-c refuses the message, tiled answers it");
    } else if (!utf8) {
        DIFF_CHECK(rc < 0, "ServerReflectionRequest: a string field is not UTF-8, tiled answers the message");
    } else {
        size_t clen;
        uint8_t *canon = pack(ref, &clen);
        int rc2 = tile_grpc_reflect(canon, clen, &want, &e2);
        DIFF_CHECK(rc2 == 0, "ServerReflectionRequest: its canonical encoding is refused: %s", e2.text);
        DIFF_CHECK(rc == 0, "ServerReflectionRequest: protobuf-c reads the message, tiled refuses it: %s", e.text);
        if (rc == 0 && rc2 == 0 && !got.oom && !want.oom && !same_reflection(&got, &want)) {
            mismatch(__FILE__ ":reflection", "ServerReflectionRequest: answered otherwise than its canonical encoding");
        }
        free(canon);
    }
    free(got.p);
    free(want.p);
    tile_error_clear(&e);
    tile_error_clear(&e2);
    if (ref)
        protobuf_c_message_free_unpacked(ref, NULL);
}

/* ---- ModelInferRequest ---------------------------------------------------------- */

/* One region, "r", for inputs that name one (as in fuzz_grpc.c). */
static _Alignas(16) uint8_t region[4096];

static int resolve_region(void *ctx, const char *tensor, const struct tile_v2_shm_ref *ref, const void **data,
                          struct tile_error *e)
{
    (void)ctx;
    if (strcmp(ref->region, "r") != 0 || ref->offset > sizeof(region) || ref->byte_size > sizeof(region) - ref->offset)
        return tile_error_set(e, TILE_EINVAL, "no such range of a region for %s", tensor);
    *data = region + ref->offset;
    return 0;
}

static bool same_shm(const struct tile_v2_shm_ref *a, const struct tile_v2_shm_ref *b)
{
    return a->used == b->used && (!a->used || (!strcmp(a->region, b->region) && a->offset == b->offset &&
                                              a->byte_size == b->byte_size && a->has_byte_size == b->has_byte_size));
}

/* What differs between two decoded requests, or NULL. */
static const char *infer_difference(const struct tile_grpc_infer_request *a, const struct tile_grpc_infer_request *b)
{
    if (!same_strs(a->model_name, b->model_name) || !same_strs(a->model_version, b->model_version))
        return "model_name or model_version";
    if (!same_strs(a->id, b->id))
        return "id";
    if (a->has_semantics != b->has_semantics || !same_strs(a->semantics, b->semantics))
        return "the semantics parameter";
    if (a->ninputs != b->ninputs || a->noutputs != b->noutputs)
        return "the number of inputs or outputs";
    for (int i = 0; i < a->noutputs; i++) {
        if (!same_strs(a->outputs[i], b->outputs[i]))
            return "an output's name";
        if (!same_shm(&a->output_shm[i], &b->output_shm[i]))
            return "an output's shared-memory parameters";
    }
    for (int i = 0; i < a->ninputs; i++) {
        const struct tile_grpc_input *x = &a->inputs[i], *y = &b->inputs[i];
        if (!same_strs(x->name, y->name))
            return "an input's name";
        if (x->typed != y->typed || x->in_shm != y->in_shm)
            return "where an input's data came from";
        if (!fuzz_tensor_equal(&x->t, &y->t, false, false))
            return "an input's tensor";
    }
    return NULL;
}

/* The last value of the request parameter "semantics", as protobuf-c read
 * the map (the canonical form keeps only the last entry of a key). */
static const Inference__InferParameter *ref_semantics(const Inference__ModelInferRequest *ref)
{
    const Inference__InferParameter *v = NULL;
    for (size_t i = 0; i < ref->n_parameters; i++) {
        const ProtobufCBinaryData *k = &ref->parameters[i]->key;
        if (k->len == 9 && !memcmp(k->data, "semantics", 9))
            v = ref->parameters[i]->value;
    }
    return v;
}

/* tiled's reading against protobuf-c's own fields, where they map one to
 * one (the tensors are compared through the canonical encoding). */
static void check_infer_fields(const struct tile_grpc_infer_request *r, const Inference__ModelInferRequest *ref)
{
    DIFF_CHECK(same_str(r->model_name, &ref->model_name), "ModelInferRequest: model_name differs from protobuf-c's");
    DIFF_CHECK(same_str(r->model_version, &ref->model_version), "ModelInferRequest: model_version differs");
    DIFF_CHECK(same_str(r->id, &ref->id), "ModelInferRequest: id differs from protobuf-c's");
    const Inference__InferParameter *sem = ref_semantics(ref);
    bool has = sem && sem->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    DIFF_CHECK(r->has_semantics == has && (!has || same_str(r->semantics, &sem->string_param)),
               "ModelInferRequest: the semantics parameter differs from protobuf-c's");
    DIFF_CHECK((size_t)r->noutputs == ref->n_outputs, "ModelInferRequest: %d outputs, protobuf-c reads %zu",
               r->noutputs, ref->n_outputs);
    for (int i = 0; i < r->noutputs; i++)
        DIFF_CHECK(same_str(r->outputs[i], &ref->outputs[i]->name), "ModelInferRequest: output %d's name differs", i);
    DIFF_CHECK((size_t)r->ninputs == ref->n_inputs, "ModelInferRequest: %d inputs, protobuf-c reads %zu", r->ninputs,
               ref->n_inputs);
    for (int i = 0; i < r->ninputs; i++) {
        const Inference__ModelInferRequest__InferInputTensor *in = ref->inputs[i];
        DIFF_CHECK(same_str(r->inputs[i].name, &in->name), "ModelInferRequest: input %d's name differs", i);
        DIFF_CHECK(r->inputs[i].t.rank == (int)in->n_shape, "ModelInferRequest: input %d has rank %d, protobuf-c %zu",
                   i, r->inputs[i].t.rank, in->n_shape);
        for (size_t k = 0; k < in->n_shape; k++)
            DIFF_CHECK(r->inputs[i].t.shape[k] == in->shape[k], "ModelInferRequest: input %d's shape[%zu] differs",
                       i, k);
    }
}

static void check_infer(const uint8_t *msg, size_t size)
{
    const ProtobufCMessageDescriptor *d = &inference__model_infer_request__descriptor;
    const struct tile_v2_shm_source shm = {.resolve = resolve_region, .borrow = true};
    struct tile_grpc_infer_request r, c;
    struct tile_error e = {0}, e2 = {0};
    int rc = tile_grpc_infer_decode_shm(msg, size, &fuzz_limits, &shm, &r, &e);
    bool utf8;
    ProtobufCMessage *ref = reference(d, msg, size, &utf8);
    report(d->name, rc, &e, ref != NULL);
    if (!ref) {
        DIFF_CHECK(rc < 0, "ModelInferRequest: protobuf-c refuses the message, tiled reads it");
    } else if (!utf8) {
        DIFF_CHECK(rc < 0, "ModelInferRequest: a string field is not UTF-8, tiled reads the message");
    } else {
        if (rc == 0)
            check_infer_fields(&r, (const Inference__ModelInferRequest *)ref);
        size_t clen;
        uint8_t *canon = pack(ref, &clen);
        int rc2 = tile_grpc_infer_decode_shm(canon, clen, &fuzz_limits, &shm, &c, &e2);
        if (verbose)
            fprintf(stderr, "pbdiff canonical ModelInferRequest: tiled %s %s\n", rc2 ? "refuses" : "reads",
                    rc2 ? e2.text : "");
        const char *diff = NULL;
        if (rc != rc2)
            diff = rc ? "tiled refuses the message and reads its canonical encoding"
                      : "tiled reads the message and refuses its canonical encoding";
        else if (rc == 0)
            diff = infer_difference(&r, &c);
        else if (e.code != e2.code || strcmp(e.text, e2.text) != 0)
            diff = "both are refused, with different errors";
        if (diff) {
            if (!list_mode)
                show("canonical", canon, clen);
            mismatch(diff, "ModelInferRequest: %s (message: %s; canonical: %s)", diff, rc ? e.text : "read",
                     rc2 ? e2.text : "read");
        }
        tile_grpc_infer_request_free(&c);
        free(canon);
    }
    tile_grpc_infer_request_free(&r);
    tile_error_clear(&e);
    tile_error_clear(&e2);
    if (ref)
        protobuf_c_message_free_unpacked(ref, NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static bool init;
    if (!init) {
        init = true;
        verbose = getenv("FUZZ_VERBOSE") != NULL;
        list_mode = getenv("FUZZ_PBDIFF_LIST") != NULL;
    }
    /* A copy of exactly `size` bytes, so that a read past it is caught. */
    uint8_t *msg = malloc(size ? size : 1);
    if (!msg)
        return 0;
    if (size)
        memcpy(msg, data, size);
    current = msg;
    current_len = size;
    check_infer(msg, size);
    check_strings(&inference__model_infer_request__descriptor, 2, false, msg, size);
    check_strings(&inference__model_ready_request__descriptor, 2, true, msg, size);
    check_strings(&inference__model_metadata_request__descriptor, 2, true, msg, size);
    check_strings(&inference__model_config_request__descriptor, 2, true, msg, size);
    check_strings(&inference__model_statistics_request__descriptor, 2, true, msg, size);
    check_strings(&grpc__health__v1__health_check_request__descriptor, 1, true, msg, size);
    check_strings(&inference__system_shared_memory_status_request__descriptor, 1, true, msg, size);
    check_strings(&inference__system_shared_memory_unregister_request__descriptor, 1, true, msg, size);
    check_strings(&inference__cuda_shared_memory_status_request__descriptor, 1, true, msg, size);
    check_strings(&inference__cuda_shared_memory_unregister_request__descriptor, 1, true, msg, size);
    check_strings(&inference__cuda_shared_memory_register_request__descriptor, 1, true, msg, size);
    check_strings(&inference__server_live_request__descriptor, 0, true, msg, size);
    check_strings(&inference__server_ready_request__descriptor, 0, true, msg, size);
    check_strings(&inference__server_metadata_request__descriptor, 0, true, msg, size);
    check_shm_register(msg, size);
    check_reflection(msg, size);
    free(msg);
    return 0;
}

/* ---- a mutator that keeps messages valid ---------------------------------------

 * Half the time the input is re-encoded in another valid way, the rest
 * libFuzzer's own byte mutations run: an input that reads as a message
 * gets, at its top level or inside one of its length-delimited fields
 * taken as a message (to any depth), one of: an unknown field of a random
 * wire type (groups nested) at a field boundary, a field written twice,
 * two neighbouring fields swapped, a field's tag or length varint padded
 * to more bytes. So the fuzzer keeps exploring valid but unusual
 * encodings, which pure byte flips mostly break. */

struct span {
    size_t start, end;            /* the whole field */
    size_t value, value_end;      /* a length-delimited field's payload */
    bool delimited;
};

/* The top-level fields of p[0, n) (at most `cap`); -1 when not a message. */
static int fields_of(const uint8_t *p, size_t n, struct span *f, int cap)
{
    const uint8_t *q = p, *end = p + n;
    int k = 0;
    while (q < end && k < cap) {
        const uint8_t *start = q;
        uint64_t tag, len;
        if (!varint(&q, end, &tag) || tag >> 3 == 0 || (tag & 7) == 4 || (tag & 7) > 5)
            return -1;
        f[k].delimited = (tag & 7) == 2;
        if (f[k].delimited) {
            if (!varint(&q, end, &len) || len > (uint64_t)(end - q))
                return -1;
            f[k].value = (size_t)(q - p);
            q += len;
            f[k].value_end = (size_t)(q - p);
        } else if (!skip(&q, end, (unsigned)(tag & 7), tag >> 3, 0)) {
            return -1;
        }
        f[k].start = (size_t)(start - p);
        f[k].end = (size_t)(q - p);
        k++;
    }
    return q == end ? k : -1;
}

static uint32_t next_rand(uint32_t *s)
{
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

/* An unknown field (number 16..2047 and past the fields of every request
 * here) of a random wire type; groups may nest. */
static void put_unknown(struct out *o, uint32_t *rnd, int depth)
{
    uint32_t number = 16 + next_rand(rnd) % 2032;
    unsigned wire = (unsigned[]){0, 1, 2, 3, 5}[next_rand(rnd) % 5];
    out_varint(o, (uint64_t)number << 3 | wire);
    uint8_t junk[8];
    for (int i = 0; i < 8; i++)
        junk[i] = (uint8_t)next_rand(rnd);
    if (wire == 0)
        out_varint(o, (uint64_t)next_rand(rnd) << (next_rand(rnd) % 40));
    else if (wire == 1 || wire == 5)
        out_put(o, junk, wire == 1 ? 8 : 4);
    else if (wire == 2) {
        size_t n = next_rand(rnd) % 8;
        out_varint(o, n);
        out_put(o, junk, n);
    } else {
        if (depth < 3 && next_rand(rnd) % 2)
            put_unknown(o, rnd, depth + 1);
        out_varint(o, (uint64_t)number << 3 | 4);
    }
}

/* A varint re-written with `extra` more bytes (at most ten in all). */
static void put_padded(struct out *o, const uint8_t *v, size_t n, size_t extra)
{
    if (n + extra > 10)
        extra = 10 - n;
    uint8_t b[10];
    memcpy(b, v, n);
    if (extra)
        b[n - 1] |= 0x80;
    for (size_t i = 0; i < extra; i++)
        b[n + i] = i + 1 == extra ? 0x00 : 0x80;
    out_put(o, b, n + extra);
}

/* One re-encoding of the message p[0, n) into o; false when p is not one. */
static bool reencode(const uint8_t *p, size_t n, struct out *o, uint32_t *rnd, int depth)
{
    struct span f[256];
    int k = fields_of(p, n, f, 256);
    if (k < 0)
        return false;
    unsigned op = next_rand(rnd) % 5;
    int at = k ? (int)(next_rand(rnd) % (unsigned)k) : 0;
    if (op == 4 && k && f[at].delimited && depth < 8) {
        /* inside a sub-message: head (tag and a new length), payload */
        struct out sub = {0};
        if (reencode(p + f[at].value, f[at].value_end - f[at].value, &sub, rnd, depth + 1)) {
            const uint8_t *q = p + f[at].start;
            uint64_t tag;
            varint(&q, p + n, &tag);
            out_put(o, p, f[at].start);
            out_put(o, p + f[at].start, (size_t)(q - (p + f[at].start)));
            out_varint(o, sub.len);
            out_put(o, sub.p, sub.len);
            out_put(o, p + f[at].end, n - f[at].end);
            free(sub.p);
            return true;
        }
        free(sub.p);
        op = 0;
    }
    if (op == 0 || k == 0) { /* an unknown field at a boundary */
        size_t pos = k ? (next_rand(rnd) % 2 ? f[at].start : f[at].end) : 0;
        out_put(o, p, pos);
        put_unknown(o, rnd, 0);
        out_put(o, p + pos, n - pos);
    } else if (op == 1) { /* a field written twice */
        out_put(o, p, f[at].end);
        out_put(o, p + f[at].start, f[at].end - f[at].start);
        out_put(o, p + f[at].end, n - f[at].end);
    } else if (op == 2 && at + 1 < k) { /* two neighbours swapped */
        out_put(o, p, f[at].start);
        out_put(o, p + f[at + 1].start, f[at + 1].end - f[at + 1].start);
        out_put(o, p + f[at].start, f[at].end - f[at].start);
        out_put(o, p + f[at + 1].end, n - f[at + 1].end);
    } else { /* the tag (or a length) padded */
        const uint8_t *q = p + f[at].start, *end = p + n;
        uint64_t v;
        varint(&q, end, &v);
        const uint8_t *tag_end = q;
        out_put(o, p, f[at].start);
        size_t tag_len = (size_t)(tag_end - (p + f[at].start));
        if (f[at].delimited && next_rand(rnd) % 2) {
            out_put(o, p + f[at].start, tag_len);
            varint(&q, end, &v);
            put_padded(o, tag_end, (size_t)(q - tag_end), 1 + next_rand(rnd) % 9);
        } else {
            put_padded(o, p + f[at].start, tag_len, tag_len < 5 ? 1 + next_rand(rnd) % (5 - tag_len) : 0);
            q = tag_end;
        }
        out_put(o, q, n - (size_t)(q - p));
    }
    return true;
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    uint32_t rnd = seed;
    if (next_rand(&rnd) % 2) {
        struct out o = {0};
        if (reencode(data, size, &o, &rnd, 0) && o.len <= max_size) {
            memcpy(data, o.p, o.len);
            free(o.p);
            return o.len;
        }
        free(o.p);
    }
    return LLVMFuzzerMutate(data, size, max_size);
}
