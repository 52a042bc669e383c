/*
 * test_ptree.c - the directory trees of path namespaces (fs/paths/fs_ptree.c):
 * names per directory, paths and their limit, moves, the key index, the
 * directory limit (ENOSPC), the metadata count, the keys that just lost
 * their names (limbo) and publications in flight, and the block hash a KV
 * event takes from a file name, and waiting for a busy entry that is
 * freed as soon as it goes idle.
 *
 * fs/ is linked into kvfs-mount only, so the tree's source is compiled in
 * here; the two fs/ calls it makes on teardown (inodes of namespaces,
 * writers' references) are stubs: this test has neither.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fs/paths/fs_ptree.c"

struct fs_inode *fs_ino_find(struct fs_priv *p, uint64_t ino)
{
	(void)p;
	(void)ino;
	return NULL;
}

void fs_wr_unref_locked(struct fs *fs, struct fs_wr *w)
{
	(void)fs;
	(void)w;
}

static struct fs_pdir *mkdir_in(struct fs_paths *t, struct fs_pdir *d,
				const char *name)
{
	struct fs_pent *e = NULL;

	assert_int_equal(fs_ptree_mkdir(t, d, name, strlen(name), &e), 0);
	return e->dir;
}

static void test_names_and_paths(void **state)
{
	struct fs_paths t;
	struct fs_pdir *root = fs_ptree_root(7, 1234), *a, *b;
	struct fs_pent *f, *g;
	char path[FS_PATH_MAX + 1];
	struct kvfs_key k1, k2;

	(void)state;
	assert_int_equal(fs_ptree_init(&t, 0), 0);
	assert_int_equal(t.max_dirs, FS_PATH_DIRS_DEFAULT);
	a = mkdir_in(&t, root, "a");
	b = mkdir_in(&t, a, "b");
	assert_int_equal(fs_ptree_mkdir(&t, root, "a", 1, &f), -EEXIST);
	assert_int_equal(fs_ptree_mkfile(&t, b, "x.bin", 5, &f), 0);
	assert_int_equal(fs_ptree_mkfile(&t, b, "x.bin", 5, &g), -EEXIST);
	assert_int_equal(fs_ptree_path(b, "x.bin", 5, path), 9);
	assert_string_equal(path, "a/b/x.bin");
	assert_int_equal(fs_ptree_path(root, "top", 3, path), 3);
	assert_string_equal(path, "top");
	assert_ptr_equal(fs_ptree_find(&t, b, "x.bin", 5), f);
	assert_null(fs_ptree_find(&t, a, "x.bin", 5));
	assert_null(fs_ptree_find(&t, b, "x.bi", 4));
	assert_ptr_equal(fs_ptree_dir_of_ino(&t, b->ino), b);
	assert_int_equal(root->nent, 1);
	assert_int_equal(b->nent, 1);
	assert_true(fs_ptree_within(b, a));
	assert_true(fs_ptree_within(a, a));
	assert_false(fs_ptree_within(a, b));

	/* the key index follows the name */
	kvfs_path_key("a/b/x.bin", 9, &k1);
	fs_ptree_key(&t, f, &k1, 42);
	assert_ptr_equal(fs_ptree_by_key(&t, 7, &k1), f);
	assert_null(fs_ptree_by_key(&t, 8, &k1));
	assert_int_equal(fs_ptree_move(&t, f, root, "y", 1), 0);
	assert_null(fs_ptree_find(&t, b, "x.bin", 5));
	assert_ptr_equal(fs_ptree_find(&t, root, "y", 1), f);
	assert_int_equal(fs_ptree_path(f->parent, f->name, f->len, path), 1);
	assert_ptr_equal(fs_ptree_by_key(&t, 7, &k1), f);
	kvfs_path_key("y", 1, &k2);
	fs_ptree_key(&t, f, &k2, 43);
	assert_null(fs_ptree_by_key(&t, 7, &k1));
	assert_ptr_equal(fs_ptree_by_key(&t, 7, &k2), f);
	assert_int_equal(f->gen, 43);
	/* k1 lost its name just now (limbo: a GET that pinned it must not
	 * judge it a file known only through L3); k2 did not */
	assert_true(fs_ptree_in_limbo(&t, 7, &k1));
	assert_false(fs_ptree_in_limbo(&t, 8, &k1));
	assert_false(fs_ptree_in_limbo(&t, 7, &k2));
	/* new versions keep the name's key: no limbo slot each (1,100 of
	 * them in a second would otherwise make every nameless key a miss) */
	for (uint64_t v = 44; v < 44 + 2 * FS_PLIMBO; v++)
		fs_ptree_key(&t, f, &k2, v);
	assert_int_equal(f->gen, 43 + 2 * FS_PLIMBO);
	assert_false(fs_ptree_in_limbo(&t, 7, &k2));
	assert_int_equal(t.limbo_full_until, 0);
	/* publications in flight, by key */
	assert_false(fs_ptree_publishing(&t, 7, &k2));
	fs_ptree_pub(&t, 7, &k2, true);
	assert_true(fs_ptree_publishing(&t, 7, &k2));
	assert_false(fs_ptree_publishing(&t, 8, &k2));
	assert_false(fs_ptree_publishing(&t, 7, &k1));
	fs_ptree_pub(&t, 7, &k2, false);
	assert_false(fs_ptree_publishing(&t, 7, &k2));
	fs_ptree_remove(&t, f);
	assert_null(fs_ptree_by_key(&t, 7, &k2));
	assert_true(fs_ptree_in_limbo(&t, 7, &k2));
	assert_int_equal(t.nfiles, 0);
	assert_int_equal(t.ndirs, 2);

	/* a removed directory lives until the kernel forgets it */
	b->nlookup = 1;
	fs_ptree_remove(&t, b->self);
	assert_true(b->removed);
	assert_ptr_equal(fs_ptree_dir_of_ino(&t, b->ino), b);
	b->nlookup = 0;
	fs_ptree_release_dir(&t, b);
	assert_null(fs_ptree_find(&t, a, "b", 1));
	fs_ptree_clear(NULL, &t, root);
	assert_int_equal(t.ndirs, 0);
	assert_int_equal(t.bytes, 0);
	free(root);
	fs_ptree_free(NULL, &t);
}

static void test_path_limit(void **state)
{
	struct fs_paths t;
	struct fs_pdir *root = fs_ptree_root(1, 99), *d = root;
	char name[256], path[FS_PATH_MAX + 1];

	(void)state;
	assert_int_equal(fs_ptree_init(&t, 0), 0);
	memset(name, 'd', 200);
	name[200] = '\0';
	for (int i = 0; i < 4; i++) /* 4 * 200 + 3 slashes = 803 bytes */
		d = mkdir_in(&t, d, name);
	memset(name, 'f', 220); /* 803 + 1 + 220 = 1024: at the limit */
	assert_int_equal(fs_ptree_path(d, name, 220, path), FS_PATH_MAX);
	assert_int_equal(fs_ptree_path(d, name, 221, path), -ENAMETOOLONG);
	fs_ptree_clear(NULL, &t, root);
	free(root);
	fs_ptree_free(NULL, &t);
}

static void test_dir_limit(void **state)
{
	struct fs_paths t;
	struct fs_pdir *root = fs_ptree_root(1, 99);
	struct fs_pent *e;
	char name[16];
	int i;

	(void)state;
	assert_int_equal(fs_ptree_init(&t, 100), 0);
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "d%d", i);
		assert_int_equal(fs_ptree_mkdir(&t, root, name, strlen(name),
						&e), 0);
	}
	assert_int_equal(fs_ptree_mkdir(&t, root, "one-more", 8, &e), -ENOSPC);
	/* files are not directories: they are bounded by the engine */
	assert_int_equal(fs_ptree_mkfile(&t, root, "f", 1, &e), 0);
	e = fs_ptree_find(&t, root, "d7", 2);
	fs_ptree_remove(&t, e);
	assert_int_equal(fs_ptree_mkdir(&t, root, "one-more", 8, &e), 0);
	fs_ptree_clear(NULL, &t, root);
	free(root);
	fs_ptree_free(NULL, &t);
}

static void test_event_hash(void **state)
{
	struct kvfs_key key;

	(void)state;
	for (int i = 0; i < 16; i++)
		key.b[i] = (uint8_t)(0xa0 + i);
	/* vLLM: "<sha256 hex>.bin": the low 64 bits of the leading number */
	assert_true(fs_ptree_event_hash(
		"00112233445566778899aabbccddeeff0011223344556677"
		"8899aabbccddeeff.bin", 68, &key) == 0x8899aabbccddeeffULL);
	/* exactly 16 digits, upper case too, then anything */
	assert_true(fs_ptree_event_hash("0123456789ABCDEF_m_0_2.bin", 26,
					&key) == 0x0123456789abcdefULL);
	/* fewer than 16: the key's last 8 bytes, big-endian */
	assert_true(fs_ptree_event_hash("0123456789abcde.bin", 19, &key) ==
		    0xa8a9aaabacadaeafULL);
	assert_true(fs_ptree_event_hash("config.json", 11, &key) ==
		    0xa8a9aaabacadaeafULL);
	/* LMCache's "model@ws@worker@hash@dtype.pt" starts with the model */
	assert_true(fs_ptree_event_hash("m@1@0@0123456789abcdef@bf16.pt", 30,
					&key) == 0xa8a9aaabacadaeafULL);
}

struct waiter {
	struct fs *fs;
	struct fs_pent *e;
	bool waiting;
};

static void *wait_thread(void *arg)
{
	struct waiter *w = arg;

	pthread_mutex_lock(&w->fs->priv->lock);
	w->waiting = true;
	fs_ptree_wait_idle(w->fs, w->e);
	pthread_mutex_unlock(&w->fs->priv->lock);
	return NULL;
}

/*
 * A thread waits for a busy entry; its owner makes it idle and a rename
 * replacing the name frees it before the waiter gets the lock back. The
 * waiter must not read the entry again (a heap-use-after-free under ASan
 * once crashed kvfs-mount in test_paths_vllm's eight threads).
 */
static void test_wait_idle_entry_freed(void **state)
{
	struct fs_priv p;
	struct fs fs;
	struct fs_paths t;
	struct fs_pdir *root = fs_ptree_root(7, 1234);
	struct waiter w = { .fs = &fs };
	pthread_t th;

	(void)state;
	memset(&p, 0, sizeof(p));
	memset(&fs, 0, sizeof(fs));
	fs.priv = &p;
	p.paths = &t;
	assert_int_equal(pthread_mutex_init(&p.lock, NULL), 0);
	assert_int_equal(fs_ptree_init(&t, 0), 0);
	assert_int_equal(fs_ptree_mkfile(&t, root, "f.bin", 5, &w.e), 0);
	w.e->busy = true;
	assert_int_equal(pthread_create(&th, NULL, wait_thread, &w), 0);
	for (;;) { /* holding the lock once it is waiting: it is in the wait */
		pthread_mutex_lock(&p.lock);
		if (w.waiting)
			break;
		pthread_mutex_unlock(&p.lock);
		sched_yield();
	}
	w.e->busy = false;
	pthread_cond_broadcast(&t.idle);
	fs_ptree_remove(&t, w.e); /* idle: a rename's replace frees it */
	pthread_mutex_unlock(&p.lock);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_null(fs_ptree_find(&t, root, "f.bin", 5));
	fs_ptree_clear(NULL, &t, root);
	free(root);
	fs_ptree_free(NULL, &t);
	pthread_mutex_destroy(&p.lock);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names_and_paths),
		cmocka_unit_test(test_path_limit),
		cmocka_unit_test(test_dir_limit),
		cmocka_unit_test(test_event_hash),
		cmocka_unit_test(test_wait_idle_entry_freed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
