/* attrs.h - the files powerfs serves, one table row each (the kernel's
 * power_attr()).  A row names the file and its default mode, and points to
 * show() and store() handlers that parse and format and call the core.
 */
#ifndef POWERFS_ATTRS_H
#define POWERFS_ATTRS_H

#include <errno.h>
#include <sys/types.h>
#include <glib.h>
#include "powerfs/engine/power.h"

/* The largest write taken as one command (a sysfs page). */
#define PF_STORE_MAX 4096

typedef void (*pf_store_done)(gssize result, gpointer data);

struct pf_attr {
	const char *name;
	int parent;  /* index of the parent directory row, -1 = root */
	mode_t mode; /* S_IFDIR or S_IFREG plus permission bits */
	off_t size;  /* st_size */
	/* Format the content.  -EAGAIN: not yet, try again when no wakeup
	 * event is in progress (the blocking wakeup_count read); out then
	 * holds what a reader that must not wait is given instead. */
	int (*show)(struct power *pw, GString *out);
	/* Act on one write.  buf holds len bytes (1..PF_STORE_MAX) and a NUL
	 * after them.  Returns len, a negative errno, or PF_PENDING and later
	 * calls done exactly once. */
	gssize (*store)(struct power *pw, const struct pf_caller *caller,
			const char *buf, gsize len, pf_store_done done,
			gpointer data);
	/* Instead of show(), for a listing of any length (debugfs
	 * wakeup_sources): print rows from *row on until out holds min_len
	 * bytes (FALSE at the end), or skip the whole rows that fit in *skip
	 * (see wakeup_print_rows()). */
	gboolean (*show_rows)(struct power *pw, guint *row, GString *out,
			      gsize min_len);
	void (*skip_rows)(struct power *pw, guint *row, gsize *skip);
	/* If set, told who read the content show() just made (and the
	 * read is answered from it): wakeup_count's PF_EVENT_COUNT_READ. */
	void (*read_by)(struct power *pw, const struct pf_caller *caller,
			const GString *shown);
	/* If set, st_size is this bound of the content's length rather than
	 * size: reads through the page cache stop at st_size. */
	off_t (*size_bound)(struct power *pw);
	/* A debugfs file rather than a sysfs attribute: it cannot be spliced
	 * (sendfile, splice: EINVAL) and has no SEEK_DATA or SEEK_HOLE. */
	gboolean debugfs;
	/* A write a dead server had read and not answered is refused
	 * (EBUSY) rather than done again (inflight.c): state, whose first
	 * run may have suspended the machine already. */
	gboolean not_twice;
	/* A setting of the host's kernel.  When the backend puts the host to
	 * sleep, the host's file is what counts: the row is served only if
	 * the host has that file, reads show the host's content, and an open
	 * for writing fails with EROFS, as in a container whose /sys is
	 * read-only.  Otherwise show() and store() keep this instance's
	 * own (or, without them, the row is not served). */
	gboolean host;
	/* Only where the backend offers hibernation ("disk" in state). */
	gboolean hibernation;
};

/* Whether the row is served by this instance (fixed once it started). */
gboolean pf_attr_present(const struct pf_attr *attr, struct power *pw);
/* 0, or the errno an open of the row for writing fails with, root's too
 * (a file without a store: EACCES, a host's setting: EROFS). */
int pf_attr_write_denied(const struct pf_attr *attr, struct power *pw);
/* The row's content (see show above), the host's for a host setting. */
int pf_attr_show(const struct pf_attr *attr, struct power *pw, GString *out);

/* The writer of a store that returned PF_PENDING was interrupted: TRUE if
 * the store was only waiting for its turn and is now dropped (done will
 * not be called: answer EINTR), FALSE if it runs already. */
gboolean pf_attrs_store_cancel(struct power *pw, gpointer data);
/* The writer (pid) of a store that runs already was interrupted: TRUE if
 * its answer, the full length, is to be given now (a state write whose
 * sleep freezes the writer: see backend_ops.freezes); done is still
 * called later, and that answer is dropped. */
gboolean pf_attrs_store_interrupted(struct power *pw, gpointer data, pid_t pid);

/* The table; row i is served as inode i + 2 (1 is the root). */
const struct pf_attr *pf_attrs(guint *n_attrs);
/* The Android common kernel's /sys/kernel/wakeup_reasons. */
const struct pf_attr *pf_attrs_wakeup_reasons(guint *n_attrs);

#endif
