/* caps.h - capability checks on the process behind a request. */
#ifndef POWERFS_CAPS_H
#define POWERFS_CAPS_H

#include <sys/types.h>
#include <glib.h>

/* Is capability cap in the effective set of thread tid, in a user namespace
 * that counts: powerfs's own, or one below it whose creators, up to
 * powerfs's namespace, were all root or in trusted_owners (uid_t, may be
 * NULL)?  tid 0 (not visible to us) falls back to uid == 0.  See caps.c. */
gboolean pf_caps_caller_capable(pid_t tid, uid_t uid, int cap,
				const GArray *trusted_owners);

#endif
