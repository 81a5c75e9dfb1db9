/* class-wakeup.h - a second mount presenting the wakeup sources like the
 * kernel's /sys/class/wakeup (Android 11+ reads its statistics there). */
#ifndef POWERFS_CLASS_WAKEUP_H
#define POWERFS_CLASS_WAKEUP_H

#include <glib.h>
#include "powerfs/engine/wakeup.h"

struct pf_class_wakeup;

/* Serves the mount whose connection is fuse_fd (session_fd: see
 * pf_session_serve()), one wakeupN/ directory per source of engine, from
 * the thread-default main context.  If the kernel ends the connection
 * (fusermount3 -u), the mount is gone and the rest of powerfs goes on. */
struct pf_class_wakeup *pf_class_wakeup_serve(struct wakeup_engine *engine,
					      int fuse_fd, int session_fd,
					      const char *mountpoint,
					      GError **error);
/* Takes no more requests. */
void pf_class_wakeup_stop(struct pf_class_wakeup *cw);
/* Stops serving and frees; call before freeing the engine. */
void pf_class_wakeup_free(struct pf_class_wakeup *cw);

#endif
