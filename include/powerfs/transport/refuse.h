/* refuse.h - the handlers of a fixed tree for requests that change it
 * (refuse.c). */
#ifndef POWERFS_REFUSE_H
#define POWERFS_REFUSE_H

#include "powerfs/transport/libfuse.h"

/* Fill in the handlers that create, remove or rename entries: a fixed tree
 * refuses them (create and mknod: EACCES; the rest: EPERM). */
void pf_refuse_changes(struct fuse_lowlevel_ops *ops);

#endif
