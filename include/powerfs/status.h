/* status.h - the start's verdict (status.c): one byte to whoever waits
 * for it (without -f, the parent; in a server, the keeper), and the exit
 * of a start that fails. */
#ifndef POWERFS_STATUS_H
#define POWERFS_STATUS_H

#include <glib.h>

/* The exit status of a command line that cannot be served. */
#define EXIT_USAGE 2

/* Where the verdict goes from now on: a pipe or socket, or -1. */
void status_set_fd(int fd);
/* Sends status (0: serving), once; later calls do nothing. */
void status_report(guchar status);
/* One line on stderr, then exit with code (reported to a waiting
 * parent). */
G_GNUC_NORETURN G_GNUC_PRINTF(2, 3) void status_fail(int code, const char *fmt,
						     ...);
#define usage_error(...) status_fail(EXIT_USAGE, __VA_ARGS__)
/* Fork; the parent waits for the child's verdict and exits with it.  Call
 * before any thread exists (GDBus starts one). */
void status_daemonize(void);
/* Serving: says so to whoever waits and, unless foreground, leaves the
 * terminal and the working directory as a daemon does. */
void status_ready(gboolean foreground);

#endif
