/*
 * fuzz_replay - `kvfsctl replay`'s trace parser (mount/ctl_replay.c): one
 * JSON line of a Mooncake trace. Either it is accepted, or refused with a
 * reason and a column inside the line; never a crash, leak or sanitizer
 * report.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "mount/ctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *why = NULL;
	size_t nids = 0, col = 0;

	if (ctl_replay_check_line((const char *)data, size, &nids, &why,
				  &col)) {
		if (!why || col < 1 || col > size + 1)
			abort();
	}
	return 0;
}
