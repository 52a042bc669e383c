/*
 * policy.c - the table of eviction policies, chosen by name.
 *
 * Adding a policy: write tier/policy_NAME.c defining policy_NAME_ops and add
 * X(NAME) to POLICY_TABLE below; nothing else changes (the extern
 * declarations, the ops table and the name list are all generated from it).
 */
#include <string.h>

#include "tier/policy/policy.h"

/* The order is the order `kvfsctl replay --policy all` prints. */
#define POLICY_TABLE(X) X(lru) X(fifo) X(s3fifo) X(prefix) X(s2lru)

#define POLICY_EXTERN(n) extern const struct policy_ops policy_##n##_ops;
#define POLICY_OPS(n) &policy_##n##_ops,
#define POLICY_NAME(n) #n,

POLICY_TABLE(POLICY_EXTERN)

static const struct policy_ops *const policy_table[] = {
	POLICY_TABLE(POLICY_OPS)
};

static const char *const policy_name_list[] = {
	POLICY_TABLE(POLICY_NAME)
	NULL
};

/* policy_find - the ops whose name is name, or NULL (name may be NULL). */
const struct policy_ops *policy_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(policy_table) / sizeof(policy_table[0]); i++)
		if (!strcmp(policy_table[i]->name, name))
			return policy_table[i];
	return NULL;
}

/* policy_names - every policy name, NULL-terminated, in table order. The
 * array is static and read-only. */
const char *const *policy_names(void)
{
	return policy_name_list;
}
