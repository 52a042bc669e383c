/*
 * fuzz_record - the record header and payload checks of tier/record/record.h
 * (kvrec_hdr_check, kvrec_verify), which L2 recovery, L2 reads and reclaim
 * run on bytes read from disk. The first byte picks whether the harness
 * seals the header (hdr_sum, and stored_sum when bit 1 is set) with the
 * salt, so the checks behind the checksum are reached too. A record that
 * passes must be internally coherent: its payload fits in the buffer and
 * sums to stored_sum, and its namespace name is terminated.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tier/record/record.h"

#define SALT 0x1234abcd5678ef90ULL

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct kvrec_hdr h;
	uint8_t *buf;
	size_t len;

	if (size < 1)
		return 0;
	len = size - 1;
	buf = malloc(len ? len : 1);
	if (!buf)
		return 0;
	memcpy(buf, data + 1, len);
	if (len >= sizeof(h) && (data[0] & 1)) {
		memcpy(&h, buf, sizeof(h));
		if ((data[0] & 2) && h.stored_len <= len - sizeof(h))
			h.stored_sum = kvrec_sum(buf + sizeof(h), h.stored_len,
						 0);
		h.hdr_sum = kvrec_sum(&h, offsetof(struct kvrec_hdr, hdr_sum),
				      SALT);
		memcpy(buf, &h, sizeof(h));
	}
	if (len >= sizeof(h)) {
		memcpy(&h, buf, sizeof(h));
		if (kvrec_hdr_check(&h, SALT, 1u << 24) == 0 &&
		    !memchr(h.ns, 0, sizeof(h.ns)))
			abort(); /* an unterminated name passed */
	}
	if (kvrec_verify(buf, len, SALT, 1u << 24) == 0) {
		memcpy(&h, buf, sizeof(h));
		if (h.stored_len > len - sizeof(h) ||
		    kvrec_sum(buf + sizeof(h), h.stored_len, 0) != h.stored_sum)
			abort(); /* verified, yet not what it claims */
	}
	free(buf);
	return 0;
}
