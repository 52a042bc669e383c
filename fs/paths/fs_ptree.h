/*
 * fs_ptree.h - the directory trees of path namespaces, shared by
 * fs_ptree.c (the tree), fs_path.c (the FUSE operations) and fs_pjournal.c
 * (the names kept for a warm restart). Everything here is protected by
 * fs_priv.lock unless a field says otherwise.
 *
 * Memory (measured by bench/kvfs_meta --paths, documented in kvfs(7)): a
 * directory is one struct fs_pdir plus the struct fs_pent that names it
 * (with its name); a file is one struct fs_pent with its name. The number
 * of directories of a mount is capped by -o max_dirs (mkdir: ENOSPC), so
 * a tree of empty directories cannot take the daemon's memory; files are
 * bounded by the chunks the tiers hold.
 */
#ifndef KVFS_FS_PTREE_H
#define KVFS_FS_PTREE_H

#include "fs/fs_i.h"

/* A directory of a path namespace (its root, or a subdirectory). */
struct fs_pdir {
	struct htab_node inode;  /* fs_paths.itab (subdirectories) */
	uint64_t ino;            /* FS_INO_PDIR | n, or the namespace's */
	uint64_t nlookup;        /* the kernel's lookups (subdirectories) */
	struct fs_pent *self;    /* its name; NULL for a namespace root */
	struct fs_pent *head;    /* entries, newest first */
	uint32_t ns;
	uint32_t nent;           /* entries: files and directories */
	mode_t mode;
	uid_t uid;
	gid_t gid;
	bool removed;            /* rmdir'ed: freed at nlookup 0 */
	bool l3_marked;          /* its marker is in L3 (fs_pl3.c) */
	struct timespec mtime, ctime;
};

/* A name in a directory: a subdirectory or a file. */
struct fs_pent {
	struct htab_node nnode;  /* fs_paths.ntab: (parent ino, name) */
	struct htab_node knode;  /* fs_paths.ktab: (ns, key), when keyed */
	struct fs_pdir *parent;
	struct fs_pent *prev, *next; /* the parent's entries */
	struct fs_pdir *dir;     /* a directory, or NULL: a file */
	/* files */
	struct kvfs_key key;     /* of its path (valid when keyed) */
	bool keyed;              /* in ktab: the engine holds key for it */
	bool busy;               /* a publication or copy in flight */
	bool has_mtime;          /* mtime is the file's (its writer's last
				  * write or utimensat), not publication */
	bool has_attr;           /* mode, uid, gid set (else 0644 and the
				  * namespace's owner) */
	bool moved;              /* in fs_paths.mtab (fs_ptree_moved) */
	mode_t mode;             /* permission bits (chmod) */
	uid_t uid;
	gid_t gid;
	uint64_t ino;            /* st_ino, for the life of the name (a
				  * number of fs_paths.next_ino) */
	uint64_t gen;            /* publication of key (keyed) */
	uint64_t dropped_gen;    /* the kernel's entry of the name was
				  * dropped after this publication (in the
				  * rewrite's close): the background has
				  * none to drop (pth_published) */
	struct fs_wr *wr;        /* a reference: the version being written
				  * or closed, not yet published; shadows
				  * the published one */
	struct timespec mtime;
	uint16_t len;
	char *name;              /* len bytes and a NUL (malloc'd) */
};

#define FS_PLAST 8
#define FS_PLIMBO 1024
#define FS_PLIMBO_MS 1000
#define FS_PPUBS 64
#define FS_PHELD 64
#define FS_PHELD_MS 250

/*
 * Entry and attribute cache time of a path namespace's directories and
 * published files (seconds), as FS_CHUNK_TTL for key namespaces' chunks:
 * a directory's names change only through this kernel (mkdir, rmdir,
 * rename, create, unlink: it updates its own cache, and drops the
 * directory's attributes) or by the daemon dropping a file the engine
 * let go (an entry invalidation, which drops the parent's attributes
 * too); a published file's bytes and size never change, a new version
 * of its name invalidates the kernel's entry (in the writer's close, or
 * pth_published), and every open still reaches the daemon, which answers
 * ESTALE for an inode that is no longer its name's version (the kernel
 * looks the name up again), but for an open that raced the close that
 * replaced it (fs_psuper.c).
 * What may lag is what stat shows of a directory (atime). With FS_TTL,
 * vLLM's load_block of a block stored a second before cost three LOOKUPs
 * (<hhh>/, <hh>_g0/, the file). Absent names and writers keep FS_TTL and
 * 0.
 */
#define FS_PATH_TTL FS_CHUNK_TTL

struct fs_paths {
	struct htab itab;        /* subdirectories by inode number */
	struct htab ntab;        /* entries by (parent inode, name) */
	struct htab ktab;        /* keyed files by (ns, key) */
	struct htab mtab;        /* files a rename took off their key, by
				  * st_ino (fs_ptree_moved) */
	uint64_t next_ino;
	uint64_t ndirs, nfiles, max_dirs, bytes;
	struct fs_wr pending;    /* closed writers waiting to publish */
	uint64_t npending;
	pthread_cond_t idle;     /* an entry stopped being busy */
	/* the keys that lost their names in the last FS_PLIMBO_MS
	 * (fs_ptree_unkey; their engine unlink comes after the lock is
	 * dropped): a GET that pinned one as it went finds no name, yet
	 * must not judge it a file known only through L3 (pth_check). More
	 * than FS_PLIMBO of them in that time: every key counts as one until
	 * full_until (fail closed, whoever makes the churn) */
	struct fs_plimbo {
		uint32_t ns;
		uint64_t at_ms;  /* 0: free */
		struct kvfs_key key;
	} limbo[FS_PLIMBO];
	unsigned limbo_next;
	uint64_t limbo_full_until;
	/* publications in flight (fs_path_publish_closed): the key a busy
	 * entry is about to take, so a GET of that key waits for it alone */
	struct fs_ppub {
		uint32_t ns;
		bool set;
		struct kvfs_key key;
	} pubs[FS_PPUBS];
	unsigned npubs_over;     /* publications that found no free slot */
	/* versions replaced in their writer's close (fs_psuper.c):
	 * the inodes whose pin of the replaced bytes (fs_inode.prev) the
	 * tick lets go FS_PHELD_MS on, and their bytes, at most l1_cap / 8
	 * in all; nsync: closes invalidating the kernel's entry right now,
	 * at most nsync_max (fs_workers() / 4, at least 1; read once) */
	struct fs_pheld {
		uint64_t ino;    /* 0: free */
		uint64_t at_ms, bytes;
	} held[FS_PHELD];
	uint64_t held_bytes, l1_cap;
	unsigned nsync, nsync_max;
	bool stopping;          /* fs_quiesce: no close invalidates now */
	uint64_t superseded_opens; /* (priv.lock) open_superseded */
	struct fs_pjournal *journal; /* fs_pjournal.c; NULL without L2 */
	/* names whose attributes changed (chmod, chown, utimensat), their
	 * journal records to append (fs_pjournal_changed) */
	struct fs_pjchange {
		uint32_t ns;
		uint64_t dir_ino;    /* a directory, or 0: the file at key */
		struct kvfs_key key;
	} *changed;
	size_t nchanged, changed_cap;
	struct fs_pev *pev;      /* fs_pevent.c: event hashes (own lock) */
	uint64_t orphans;        /* chunks with no name found at start */
	/* the file published last, per namespace (slot ns % FS_PLAST): the
	 * one the next publication follows in chain readahead's order */
	struct fs_plast {
		uint32_t ns;
		bool set;
		struct kvfs_key key;
	} last[FS_PLAST];
};

/* The tree (fs_ptree.c). */
int fs_ptree_init(struct fs_paths *t, uint64_t max_dirs);
void fs_ptree_free(struct fs *fs, struct fs_paths *t);
/* The directory behind inode ino: a subdirectory, or the root of a path
 * namespace; NULL when ino is neither. */
struct fs_pdir *fs_ptree_dir(struct fs *fs, uint64_t ino);
/* The subdirectory with inode number ino, or NULL. */
struct fs_pdir *fs_ptree_dir_of_ino(struct fs_paths *t, uint64_t ino);
struct fs_pent *fs_ptree_find(struct fs_paths *t, const struct fs_pdir *d,
			      const char *name, size_t len);
struct fs_pent *fs_ptree_by_key(struct fs_paths *t, uint32_t ns,
				const struct kvfs_key *key);
/* A new root directory for namespace ns (inode number ino). */
struct fs_pdir *fs_ptree_root(uint32_t ns, uint64_t ino);
/* New entries in d: a directory (-ENOSPC past max_dirs) or a file.
 * -EEXIST, -ENOMEM. */
int fs_ptree_mkdir(struct fs_paths *t, struct fs_pdir *d, const char *name,
		   size_t len, struct fs_pent **out);
int fs_ptree_mkfile(struct fs_paths *t, struct fs_pdir *d, const char *name,
		    size_t len, struct fs_pent **out);
/* Removes e from its directory and frees it (a directory entry's
 * fs_pdir is marked removed and freed once the kernel forgot it). The
 * caller has dealt with e->wr and e->keyed. */
void fs_ptree_remove(struct fs_paths *t, struct fs_pent *e);
/* Moves e to name in d (-ENOMEM: e stays). */
int fs_ptree_move(struct fs_paths *t, struct fs_pent *e, struct fs_pdir *d,
		  const char *name, size_t len);
/*
 * File e, keyed, is renamed: the kernel may go on sending chmod, chown
 * and utimensat to the inode of the version its old key holds (its entry
 * of the new name until the daemon's invalidation reaches it, an fd
 * opened before for good), and those are the name's (fs_psetattr.c).
 * Indexes e by its st_ino (e->ino) for the life of the name; once is
 * enough. 0, -ENOMEM. by_ino: the entry so indexed with st_ino ino in
 * ns, or NULL.
 */
int fs_ptree_moved(struct fs_paths *t, struct fs_pent *e);
struct fs_pent *fs_ptree_by_ino(struct fs_paths *t, uint32_t ns,
				uint64_t ino);
/* Files: (un)indexes e under key. */
void fs_ptree_key(struct fs_paths *t, struct fs_pent *e,
		  const struct kvfs_key *key, uint64_t gen);
void fs_ptree_unkey(struct fs_paths *t, struct fs_pent *e);
/* Frees the entries below d, dropping writers' references. */
void fs_ptree_clear(struct fs *fs, struct fs_paths *t, struct fs_pdir *d);
/* Frees directory d if it is removed and forgotten. */
void fs_ptree_release_dir(struct fs_paths *t, struct fs_pdir *d);
/*
 * The path of e, or of name below d (e NULL), relative to its namespace
 * ("a/b/c"): its length, or -ENAMETOOLONG past FS_PATH_MAX bytes. buf
 * holds FS_PATH_MAX + 1 bytes.
 */
int fs_ptree_path(const struct fs_pdir *d, const char *name, size_t len,
		  char *buf);
/*
 * The block hash a KV event reports for the file called name (len bytes)
 * whose key is key: when the name begins with at least 16 hex digits (an
 * engine's own block hash, as vLLM's "<hash hex>.bin" and SGLang's
 * "<sha256 hex>_..." are), the low 64 bits of the number those digits
 * spell (its last 16 digits); otherwise the key's last 8 bytes read
 * big-endian, as for key chunks. A router that knows the engine's block
 * hashes can then score the engine's own disk tier.
 */
uint64_t fs_ptree_event_hash(const char *name, size_t len,
			     const struct kvfs_key *key);
/* Is a inside directory d's subtree (d itself included)? */
bool fs_ptree_within(const struct fs_pdir *a, const struct fs_pdir *d);

/* Marks e busy (a publication or copy in flight, priv.lock dropped
 * meanwhile) or idle again (then wakes the waiters). */
void fs_ptree_busy(struct fs *fs, struct fs_pent *e, bool busy);
/* Whether (ns, key) lost its name in the last FS_PLIMBO_MS (or too many
 * keys did to tell). priv.lock held. */
bool fs_ptree_in_limbo(const struct fs_paths *t, uint32_t ns,
		       const struct kvfs_key *key);
/* A publication of (ns, key) starts (true) or ends (false); whether one
 * is in flight (true also when the slots ran out: wait and see).
 * priv.lock held. */
void fs_ptree_pub(struct fs_paths *t, uint32_t ns,
		  const struct kvfs_key *key, bool start);
bool fs_ptree_publishing(const struct fs_paths *t, uint32_t ns,
			 const struct kvfs_key *key);
/* Waits once for busy entry e to go idle (priv.lock held, dropped
 * meanwhile). An idle entry may be freed at once, so e may be gone when
 * this returns: callers look it up again (in a loop), never read e. */
void fs_ptree_wait_idle(struct fs *fs, struct fs_pent *e);

/* Shared by fs_path.c and fs_pname.c (fs_path.c). */
/* e no longer has writer w (priv.lock held): drops e's reference, and e
 * itself when nothing published holds its name. */
void fs_path_detach_writer(struct fs *fs, struct fs_pent *e,
			   struct fs_wr *w);
/* Publishes closed writer w under its path's key, replacing the version
 * there (priv.lock NOT held). Returns the error of the fsync an earlier
 * fsync of w asked for (0 if none). */
int fs_path_publish_closed(struct fs *fs, struct fs_wr *w);

/* Versions replaced in their writer's close (fs_psuper.c; see there). A
 * close of an O_TRUNC rewrite (fs_path_op_flush): begin (priv.lock held,
 * before the publication) marks the version the name has now and pins
 * its bytes, where this close may invalidate the kernel's entry itself;
 * end (no lock held, after it: published, as pub_gen) invalidates that
 * entry, and undoes the mark where the publication or the invalidation
 * failed. expire: the tick lets go of pins held FS_PHELD_MS. pin: a
 * further pin of superseded inode ino's bytes for an open, with its ns
 * and key (no lock held), or -ENOENT. */
struct fs_psuper {
	bool on;          /* this close invalidates the name's entry */
	uint64_t gen;     /* the version replaced; 0: none */
	uint64_t ino;     /* its inode, marked here; 0: none */
	uint64_t parent;
	size_t len;
	char name[256];
};
void fs_psuper_begin(struct fs *fs, struct fs_pent *e, uint32_t ns,
		     const struct kvfs_key *key, struct fs_psuper *s);
/* The inode of version gen of (ns, key) where the kernel looked it up
 * (and holds it), else NULL. priv.lock held. */
struct fs_inode *fs_pversion_inode(struct fs *fs, uint32_t ns,
				   const struct kvfs_key *key, uint64_t gen);
void fs_psuper_end(struct fs *fs, struct fs_psuper *s, uint32_t ns,
		   const struct kvfs_key *key, bool published, uint64_t pub_gen);
void fs_psuper_expire(struct fs *fs);
/* (fs_path_quiesce_locked, fs_i.h) */
unsigned fs_psuper_quiesce_locked(struct fs *fs);
int fs_psuper_pin(struct fs *fs, uint64_t ino, struct tier_chunk **c,
		  uint32_t *ns, struct kvfs_key *key);

/* Drops the name of chunk (ns, key) when the engine no longer holds it
 * (no lock held); notify: also the kernel's entry (background thread). */
void fs_path_drop_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		       bool notify);

/* Names found in L3 (fs_pl3.c); no lock held, and nothing when L3 is
 * off. find: name in directory dir_ino, missing here, is a file or a
 * directory in L3: it joins the tree (0; also when it appeared here
 * meanwhile) with the attributes its record or marker carries, else
 * -ENOENT. mark: a file was just published in directory dir_ino: its
 * directories are marked in L3 (once each, with their attributes). */
int fs_path_l3_find(struct fs *fs, uint64_t dir_ino, const char *name,
		    size_t len);
void fs_path_l3_mark(struct fs *fs, uint64_t dir_ino);
/* Marked directory d's attributes changed: its marker is written again
 * with them (priv.lock held; nothing when it is not marked). */
void fs_path_l3_remark_locked(struct fs *fs, const struct fs_pdir *d);

/* Event hashes of hex-named files, and with L3 the attributes of path
 * files (fs_pevent.c), by key, for the engine's callbacks (tier.lock
 * held). note: before the file at key is published (does nothing unless
 * name starts with >= 16 hex digits); forget: once key left the engine
 * (both). Any lock may be held. attrs: keep attributes (L3 is on). */
struct fs_pev;
int fs_pev_create(struct fs_paths *t, bool attrs);
void fs_pev_destroy(struct fs_paths *t);
void fs_pev_note(struct fs_paths *t, uint32_t ns, const struct kvfs_key *key,
		 const char *name, size_t len);
void fs_pev_forget(struct fs_paths *t, uint32_t ns, const struct kvfs_key *key);
/* The attributes of the file at key: set (a), unknown (a NULL), got
 * (true and *a when known). Nothing without attrs. */
void fs_pev_attr_set(struct fs_paths *t, uint32_t ns,
		     const struct kvfs_key *key, const struct tier_pattr *a);
bool fs_pev_attr_get(struct fs_paths *t, uint32_t ns,
		     const struct kvfs_key *key, struct tier_pattr *a);

/* Attributes of files and directories kept across restarts (the journal)
 * and nodes (L3 records): fs_pattr.c. of_*: what to keep of e (false:
 * a file whose attributes are not known) or d; to_*: back into e
 * (a NULL: not known, 0644 and the namespace's owner) or d. priv.lock
 * held. */
bool fs_pattr_of_file(const struct fs_pent *e, struct tier_pattr *a);
void fs_pattr_of_dir(const struct fs_pdir *d, struct tier_pattr *a);
void fs_pattr_to_file(const struct tier_pattr *a, struct fs_pent *e);
void fs_pattr_to_dir(const struct tier_pattr *a, struct fs_pdir *d);
/* What the engine's L3 writes carry for published file e (keyed): its
 * attributes as they are now (fs_pev_attr_set). */
void fs_pattr_note(struct fs *fs, const struct fs_pent *e);
/* The same for the file writer w is about to publish under (ns, key). */
void fs_pattr_note_writer(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key, const struct fs_wr *w);
/* (ns, key) left the engine (background thread, no lock held): what a
 * key with no name here kept (a file a GET by key found in L3) goes,
 * unless a publication of it is in flight. */
void fs_pattr_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key);
/* The journal (fs_pjournal.c): l2_dir/paths, see there. */
struct fs_pjournal;
/* Reads l2_dir/paths, rebuilds the trees of the namespaces it names
 * whose files the engine still holds, unlinks chunks of path namespaces
 * that have no name, writes the file again compacted and keeps it open
 * for appends. Never fails the mount (a damaged file is logged). */
int fs_pjournal_open(struct fs *fs, const char *l2_dir);
void fs_pjournal_close(struct fs *fs);
/* Appends a record (priv.lock NOT held): 'N' namespace in path mode,
 * 'K' back to keys, 'D' a directory, 'X' a directory removed, 'F' a file
 * published. ns: the namespace's name. */
void fs_pjournal_add(struct fs *fs, char type, const char *ns,
		     const char *path, size_t len);
/* Appends the 'F' record of the file holding (ns, key), or the 'D'
 * record of directory dir_ino, with its attributes as they are now
 * (nothing when the name is gone). priv.lock NOT held. */
void fs_pjournal_add_file(struct fs *fs, uint32_t ns,
			  const struct kvfs_key *key);
void fs_pjournal_add_dir(struct fs *fs, uint64_t dir_ino);
/* The attributes of the file at (ns, key) (dir_ino 0) or of directory
 * dir_ino changed: its record is appended by the next fs_pjournal_sync
 * (priv.lock held). */
void fs_pjournal_changed(struct fs *fs, uint32_t ns,
			 const struct kvfs_key *key, uint64_t dir_ino);
/* Appends the records fs_pjournal_changed asked for, then fdatasyncs
 * (the background thread, no lock held). */
void fs_pjournal_sync(struct fs *fs);
/* fs_pjournal_flush - the same now, fdatasync included whatever the
 * background thread did (an fsync; no lock held): 0 or -errno; 0
 * without a journal. */
int fs_pjournal_flush(struct fs *fs);

/* The hooks fs/'s core calls through struct fs_path_ops (fs_i.h; each has
 * the contract of the fs_path_* function of the same name there): set by
 * fs_path_create in fs_pname.c. */
void pth_tick(struct fs *fs);
void pth_publish_pending(struct fs *fs, uint64_t cutoff_ms, size_t max);
void pth_publish_flushed(struct fs *fs, uint32_t ns);
/* pth_settle_key (fs_path.c; pth_reach, no lock held): a GET or lookup of
 * (ns, key) by key finds what an open of its name would: a publication of
 * the name in flight waited for, a closed new version published. */
void pth_settle_key(struct fs *fs, uint32_t ns, const struct kvfs_key *key);
/* fs_path_wr_closed_locked (fs_path.c): is w closed, as readers, renames
 * and lookups see it? priv.lock held. */
bool fs_path_wr_closed_locked(const struct fs_wr *w);
void pth_gone(struct fs *fs, uint32_t ns, const struct kvfs_key *key);
void pth_published(struct fs *fs, uint32_t ns, const struct kvfs_key *key);
int pth_attach_locked(struct fs *fs, struct fs_inode *nsi);
void pth_detach_locked(struct fs *fs, struct fs_inode *nsi);
void pth_forget_locked(struct fs *fs, uint64_t ino, uint64_t n);
/* fs_path.c: a published file's name takes its writer's mode, owner,
 * mtime; a directory's stat (priv.lock held, both). */
void pth_name_takes_attr(struct fs_pent *e, struct fs_wr *w);
void pth_dir_attr(const struct fs_pdir *d, struct stat *st);
/* fs_psetattr.c */
int pth_writer_attr_set(struct fs *fs, struct fs_wr *w,
			const struct stat *attr, int to_set, uid_t was_uid,
			uid_t caller);
void pth_chunk_attr_locked(struct fs *fs, const struct fs_inode *nsi,
			   struct fs_inode *in, const struct kvfs_key *key,
			   uint64_t gen, struct stat *st);
/* The mtime stat(2) of e's name shows for publication gen, in
 * KVFS_XFER_MTIME's form (ns mod 2^64); false: no such publication. */
bool pth_shown_mtime_locked(struct fs *fs, uint32_t ns,
			    const struct fs_pent *e, uint64_t gen, int64_t *mt);
int pth_names_set(struct fs *fs, uint32_t ns, const char *v, size_t len);
int pth_evict_set(struct fs *fs, uint32_t ns, const char *v, size_t len);
int pth_quota_set(struct fs *fs, uint32_t ns, uint64_t quota);
bool pth_ns(struct fs *fs, uint32_t ns);
uint32_t pth_reach(struct fs *fs, uint32_t ns, const struct kvfs_key *keys,
		   uint32_t n, struct fs_cred *c, int mask, int *why);
void pth_mode_saved(struct fs *fs, const char *ns, bool paths);
bool pth_event_hash(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		    uint64_t *h);
bool pth_pattr_get(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		   struct tier_pattr *a);
void pth_pattr_found(struct fs *fs, uint32_t ns, const struct kvfs_key *key,
		     const struct tier_pattr *a);
void pth_counts(struct fs *fs, struct fs_path_counts *c);

#endif /* KVFS_FS_PTREE_H */
