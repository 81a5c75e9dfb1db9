/* class-wakeup.h - a second mount presenting the wakeup sources like the
 * kernel's /sys/class/wakeup (Android 11+ reads its statistics there). */
#ifndef POWERFS_CLASS_WAKEUP_H
#define POWERFS_CLASS_WAKEUP_H

#include <glib.h>
#include "powerfs/wakeup.h"

struct pf_class_wakeup;

/* Mounts on mountpoint with the given FUSE mount options ("-o" syntax, may
 * be NULL) and serves one wakeupN/ directory per source of engine from the
 * thread-default main context.  If the kernel ends the session
 * (fusermount3 -u), the mount is gone and the rest of powerfs goes on. */
struct pf_class_wakeup *pf_class_wakeup_mount(struct wakeup_engine *engine,
					      const char *mountpoint,
					      const char *mount_options,
					      GError **error);
/* Takes no more requests. */
void pf_class_wakeup_stop(struct pf_class_wakeup *cw);
/* Unmounts (if still mounted) and frees; call before freeing the engine. */
void pf_class_wakeup_unmount(struct pf_class_wakeup *cw);

#endif
