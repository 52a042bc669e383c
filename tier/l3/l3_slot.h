/*
 * l3_slot.h - Redis Cluster slot routing, the part hiredis 0.14 lacks:
 * CRC16 (XMODEM, as the cluster specification defines it), key -> slot
 * (with the specification's hash-tag rule), the CLUSTER SLOTS reply parsed
 * into ranges, and MOVED / ASK redirections parsed out of error replies.
 *
 * Pure functions: no I/O, no locks, no allocation except where noted.
 * All functions return 0 (or a count) or a negative errno, never set errno.
 */
#ifndef KVFS_L3_SLOT_H
#define KVFS_L3_SLOT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define L3_SLOTS 16384
#define L3_HOST_MAX 255

struct redisReply;

/* l3_crc16 - CRC16-CCITT (XMODEM): poly 0x1021, init 0, no reflection.
 * l3_crc16("123456789", 9) == 0x31C3. */
uint16_t l3_crc16(const void *buf, size_t len);

/* l3_key_slot - the cluster slot of a key: CRC16 of the key, or of the
 * text between the first '{' and the next '}' when that is not empty,
 * modulo 16384. */
unsigned l3_key_slot(const char *key, size_t len);

/* A node address: host (IPv4, IPv6 without brackets, or a name) and port.
 * An empty host means "the host this reply came from" (Redis sends "" or
 * "?" when it does not know its own address). */
struct l3_addr {
	char host[L3_HOST_MAX + 1];
	int port;
};

/* l3_addr_parse - "HOST:PORT" (the last ':' separates the port, so IPv6
 * works; "[v6]:PORT" too) of len bytes. -EINVAL on anything else. */
int l3_addr_parse(const char *s, size_t len, struct l3_addr *out);

/* A redirection: "MOVED <slot> <host>:<port>" or "ASK <slot> <host>:<port>". */
struct l3_redirect {
	bool ask;
	unsigned slot;
	struct l3_addr to;
};

/* l3_redirect_parse - parses an error reply's text. -EINVAL when it is not
 * a well-formed MOVED or ASK (e.g. any other error). */
int l3_redirect_parse(const char *err, size_t len, struct l3_redirect *out);

/* One range of slots served by one master. */
struct l3_slot_range {
	unsigned first, last; /* inclusive, < L3_SLOTS */
	struct l3_addr master;
};

/*
 * l3_slots_parse - the reply of CLUSTER SLOTS into malloc'd ranges (the
 * caller frees *out). Replicas are ignored (reads and writes go to
 * masters). Returns the number of ranges, or -EPROTO (not the shape the
 * command replies with: ranges out of order, slots out of bounds, missing
 * master), -ENOMEM.
 */
long l3_slots_parse(const struct redisReply *r, struct l3_slot_range **out);

#endif /* KVFS_L3_SLOT_H */
