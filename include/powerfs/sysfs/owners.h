/* owners.h - the mode and owner of every file of a mount, as chmod and
 * chown set them (Android's init relies on them), in an object of their
 * own: the FUSE adapter (fs.c) serves them, and the state file saves and
 * restores them without knowing of FUSE.
 */
#ifndef POWERFS_OWNERS_H
#define POWERFS_OWNERS_H

#include <sys/types.h>
#include <glib.h>

struct pf_owner {
	mode_t mode; /* the file type and permission bits */
	uid_t uid;
	gid_t gid;
};

struct pf_owners;

struct pf_owners *pf_owners_new(void);
void pf_owners_free(struct pf_owners *owners);

/* The file path ("wake_lock", "suspend_stats/success") with mode, owned by
 * root, after those added before; its entry lives as long as owners.  A
 * file not served (served FALSE: pf_attr_present()) can still be given an
 * owner, but is not listed. */
struct pf_owner *pf_owners_add(struct pf_owners *owners, const char *path,
			       mode_t mode, gboolean served);

/* The permission bits of mode, and uid and gid, for path: FALSE if there
 * is no such file. */
gboolean pf_owners_set(struct pf_owners *owners, const char *path, mode_t mode,
		       uid_t uid, gid_t gid);

/* The files served, in the order added; mode is the permission bits. */
typedef void (*pf_owners_visit)(const char *path, mode_t mode, uid_t uid,
				gid_t gid, gpointer data);
void pf_owners_foreach(const struct pf_owners *owners, pf_owners_visit visit,
		       gpointer data);

/* --owner: the regular files that take writes go to uid:gid. */
void pf_owners_chown_writable(struct pf_owners *owners, uid_t uid, gid_t gid);

#endif
