/*
 * client_path.c - libkvfs calls for path namespaces: the keys of paths
 * (kvfs_path_key is in hash/hashkey.c), and batched lookups, group lookups
 * and prefetches that take paths instead of keys. A path's key is what
 * the daemon indexes the file under, so these are kvfs_lookup and
 * kvfs_group_lookup_at on the keys of the paths.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvfs.h"

/* Is path a canonical path below a namespace (kvfs_path_key's rules)? */
static int path_check(const char *path, size_t *len)
{
	size_t n, i = 0;

	if (!path)
		return -EINVAL;
	n = strnlen(path, KVFS_PATH_MAX + 1);
	if (n > KVFS_PATH_MAX)
		return -ENAMETOOLONG;
	if (!n)
		return -EINVAL;
	while (i <= n) {
		size_t j = i;

		while (j < n && path[j] != '/')
			j++;
		if (j == i || (j - i == 1 && path[i] == '.') ||
		    (j - i == 2 && path[i] == '.' && path[i + 1] == '.'))
			return -EINVAL; /* empty, "." or ".." component */
		if (j - i > 255)
			return -ENAMETOOLONG;
		i = j + 1;
	}
	*len = n;
	return 0;
}

long kvfs_path_keys(const char *const *paths, size_t n, struct kvfs_key *out)
{
	if ((!paths || !out) && n)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		size_t len;
		int rc = path_check(paths[i], &len);

		if (rc)
			return rc;
		kvfs_path_key(paths[i], len, &out[i]);
	}
	return (long)n;
}

/* The keys of paths[0..n), malloc'd (free it). NULL: *rc says why. */
static struct kvfs_key *keys_of(const char *const *paths, size_t n, long *rc)
{
	struct kvfs_key *keys;

	if (!n || !paths) {
		*rc = -EINVAL;
		return NULL;
	}
	keys = malloc(n * sizeof(*keys));
	if (!keys) {
		*rc = -ENOMEM;
		return NULL;
	}
	*rc = kvfs_path_keys(paths, n, keys);
	if (*rc < 0) {
		free(keys);
		return NULL;
	}
	return keys;
}

long kvfs_lookup_paths(int nsfd, const char *const *paths, size_t n,
		       uint32_t depth_base, unsigned flags, uint32_t lease_ms,
		       struct kvfs_result *res)
{
	long rc;
	struct kvfs_key *keys = keys_of(paths, n, &rc);

	if (!keys)
		return rc;
	rc = kvfs_lookup(nsfd, keys, n, depth_base, flags, lease_ms, res);
	free(keys);
	return rc;
}

long kvfs_group_lookup_paths(int fd, const char *const *ns, size_t nns,
			     const char *const *paths, size_t n,
			     uint32_t depth_base, unsigned flags,
			     uint32_t lease_ms, struct kvfs_result *res)
{
	long rc;
	struct kvfs_key *keys = keys_of(paths, n, &rc);

	if (!keys)
		return rc;
	rc = kvfs_group_lookup_at(fd, ns, nns, keys, n, depth_base, flags,
				  lease_ms, res);
	free(keys);
	return rc;
}
