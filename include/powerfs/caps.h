/* caps.h - capability checks on the process behind a request. */
#ifndef POWERFS_CAPS_H
#define POWERFS_CAPS_H

#include <sys/types.h>
#include <glib.h>

/* Is capability cap in the effective set of thread tid (in the writer's own
 * user namespace)?  tid 0 (not visible to us) falls back to uid == 0. */
gboolean pf_caller_capable(pid_t tid, uid_t uid, int cap);

#endif
