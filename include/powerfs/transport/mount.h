/* mount.h - mounting a FUSE file system, apart from serving it: the
 * connection (the /dev/fuse descriptor) outlives its servers in the keeper
 * (keeper.c). */
#ifndef POWERFS_MOUNT_H
#define POWERFS_MOUNT_H

#include <glib.h>

struct pf_mount;

/* Mounts with "default_permissions" plus options (may be NULL).  The
 * connection's descriptor is pf_mount_fd(); pf_mount_free() unmounts (if
 * told to) and closes it. */
struct pf_mount *pf_mount_new(const char *mountpoint, const char *options,
			      GError **error);
int pf_mount_fd(const struct pf_mount *m);
void pf_mount_free(struct pf_mount *m, gboolean unmount);
/* Lifts whatever is mounted on path (lazily): umount2() as root, else
 * fusermount3 (an argv, no shell). */
gboolean pf_mount_detach(const char *path);

/* From now on, libfuse's messages go to GLib's log (debug level), from any
 * thread; its errors also make pf_mount_new()'s message. */
void pf_mount_log_libfuse(void);

#endif
