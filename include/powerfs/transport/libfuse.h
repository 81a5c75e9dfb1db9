/* libfuse.h - libfuse's low-level API, at the version every file of
 * powerfs is written against (libfuse 3.14, Debian 12's). */
#ifndef POWERFS_LIBFUSE_H
#define POWERFS_LIBFUSE_H

#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>

#endif
