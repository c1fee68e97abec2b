/* protobuf-c unpacks nested messages recursively with no depth limit, so a few MB of nested
 * sub-messages overflow the stack. This pre-scan walks the wire format with the generated
 * descriptors and an explicit depth bound before anything is unpacked. */
#ifndef CALQ_FRONTEND_PB_DEPTH_H
#define CALQ_FRONTEND_PB_DEPTH_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>

/* False when a sub-message of `d` in buf[0..len) nests deeper than max_depth. Malformed data
 * that is not too deep returns true: the real unpack reports it. */
bool calq__pb_depth_ok(const ProtobufCMessageDescriptor *d, const uint8_t *buf, size_t len, int max_depth);

#endif
