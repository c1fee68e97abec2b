#include "frontend/pb_depth.h"

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* Recursion is bounded by max_depth (a small constant), so the scanner's own stack is too. */
static bool scan(const ProtobufCMessageDescriptor *d, const uint8_t *p, const uint8_t *end, int depth, int max_depth)
{
    if (depth > max_depth) return false;
    while (p < end) {
        uint64_t tag, v;
        if (!read_varint(&p, end, &tag)) return true;
        switch (tag & 7) {
        case 0:
            if (!read_varint(&p, end, &v)) return true;
            break;
        case 1:
            if (end - p < 8) return true;
            p += 8;
            break;
        case 5:
            if (end - p < 4) return true;
            p += 4;
            break;
        case 2: {
            if (!read_varint(&p, end, &v) || v > (uint64_t)(end - p)) return true;
            const ProtobufCFieldDescriptor *f =
                tag >> 3 <= 0xffffffffu ? protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3)) : NULL;
            if (f && f->type == PROTOBUF_C_TYPE_MESSAGE &&
                !scan((const ProtobufCMessageDescriptor *)f->descriptor, p, p + v, depth + 1, max_depth))
                return false;
            p += v;
            break;
        }
        default: return true; /* groups or junk: unpack rejects them */
        }
    }
    return true;
}

bool calq__pb_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len, int max_depth)
{
    return scan(d, buf, buf + len, 0, max_depth);
}
