/*
 * fuzz_nsfile - the namespaces metadata file in l2_dir (fs/fs_nsfile.c),
 * read back at every mount: whatever fs_nsfile_parse accepts must format
 * (fs_nsfile_format) into a file that parses to the same entries. No
 * crash, leak or sanitizer report on any input.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs/fs.h"
#include "fs/fs_i.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fs_nsfile a = { 0 }, b = { 0 };
	char *buf = NULL;
	size_t len = 0;

	if (fs_nsfile_parse((const char *)data, size, &a))
		return 0;
	if (fs_nsfile_format(&a, &buf, &len) == 0) {
		if (fs_nsfile_parse(buf, len, &b) || a.n != b.n)
			abort(); /* what we write, we must read */
		for (size_t i = 0; i < a.n; i++)
			if (strcmp(a.ent[i].name, b.ent[i].name))
				abort();
		fs_nsfile_free(&b);
	}
	free(buf);
	fs_nsfile_free(&a);
	return 0;
}
