/* session-internal.h - what the files of a FUSE session share (session.c,
 * readers.c, take-over.c, open-files.c): the session's record and the
 * calls between them.  Not for use outside src/transport/. */
#ifndef POWERFS_SESSION_INTERNAL_H
#define POWERFS_SESSION_INTERNAL_H

#include <pthread.h>
#include <glib.h>

#include "powerfs/transport/inflight.h"
#include "powerfs/transport/session.h"

/* Not in Debian 12's linux/fuse.h (Linux 6.9, protocol 7.40): the notice,
 * and the bit the kernel sets in the id of a request it sends again. */
#define PF_NOTIFY_RESEND 7
#define PF_UNIQUE_RESEND (G_GUINT64_CONSTANT(1) << 63)

/* Readers per mount.  More than one lets a reader wait in read(2) while
 * another processes, as in libfuse's multithreaded loop.  But the kernel
 * wakes its readers in turn, so with several every request wakes a thread
 * that slept, where a lone reader often finds the next request already
 * queued: more CPU per request, and no better latency (scripts/bench
 * --variant compares; docs/performance.md has the figures).  One, then; a
 * build option to weigh it again.  With
 * more than one, requests may be processed in another order than read, as
 * in libfuse's multithreaded loop (which pairs an INTERRUPT with a request
 * it has not seen yet). */
#ifndef PF_SESSION_READERS
#define PF_SESSION_READERS 1
#endif
G_STATIC_ASSERT(PF_SESSION_READERS <= PF_INFLIGHT_READERS);

struct pf_reader {
	struct pf_session *ps;
	pthread_t thread;
	struct fuse_buf buf; /* the thread's own */
	gboolean buf_mapped; /* in the session file (inflight.c) */
	gboolean started;
	gint done; /* the thread is leaving */
};

struct pf_session {
	struct fuse_session *se;
	char *name; /* the mount point, for messages */
	struct pf_reader readers[PF_SESSION_READERS];
	gint ended;	/* a reader has queued session_ended() */
	gint stopping;	/* readers are asked to leave */
	int session_fd; /* where the INIT request is kept, or -1 */
	gboolean init_saved;
	gboolean fresh;		      /* a new connection: INIT comes first */
	int fd;			      /* our copy of the /dev/fuse descriptor */
	struct pf_inflight *inflight; /* requests read, not answered */
	GPtrArray *left;	      /* a dead server's, to process again */
	GArray *refused; /* ids of those processed again too often */
	gboolean replaying;
	gboolean resent; /* the request in process was sent again */
	gboolean resend; /* the kernel sends again (FUSE_NOTIFY_RESEND) */
	/* Readers wait here before their first read: a successor's, until
	 * what its predecessor left is processed; a new connection's (but
	 * the one that reads INIT), until the kernel's path is known. */
	GMutex gate_lock;
	GCond gate_cond;
	gboolean gate_open;
	pf_session_adopt_func adopt;
	void *userdata;
	GSourceFunc on_unmounted;
	gpointer on_unmounted_data;
	GHashTable *open_files; /* fh -> struct pf_snapshot */
	guint64 next_fh;
	gboolean stopped;
};

/* readers.c */
/* Starts the session's readers, every asynchronous signal blocked in them
 * (signals go to the main thread, whose loop handles them): 0, or an
 * errno. */
int pf_session_start_readers(struct pf_session *ps);
/* Stops the readers where they wait; called without the loop lock. */
void pf_session_stop_readers(struct pf_session *ps);
/* Lets the readers waiting at the gate read. */
void pf_session_open_gate(struct pf_session *ps);
/* A request read into buf, with the loop lock held: processed, or refused
 * if it crashed servers again and again (inflight.c). */
void pf_session_process(struct pf_session *ps, struct fuse_buf *buf, int len);
/* Answers request unique with error err, unprocessed. */
void pf_session_refuse_request(struct pf_session *ps, guint64 unique, gint err);
/* The custom I/O libfuse reads and writes /dev/fuse through, and the
 * table that finds a session's record from the descriptor it is given. */
extern const struct fuse_custom_io pf_session_io;
gboolean pf_session_register(struct pf_session *ps);
void pf_session_unregister(struct pf_session *ps);

/* take-over.c */
/* Keeps the INIT request read into buf for a successor (nothing if buf
 * holds another request or INIT is kept already). */
void pf_session_save_init(struct pf_session *ps, const struct fuse_buf *buf,
			  gsize len);
/* Asks the kernel whether it sends again what a dead server left
 * (ps->resend); called before this server read anything but INIT. */
void pf_session_choose_path(struct pf_session *ps);
/* Takes over the connection a previous server had, if there was one
 * (ps->fresh otherwise); FALSE with error set if its record is damaged. */
gboolean pf_session_take_over(struct pf_session *ps, GError **error);

/* open-files.c */
/* The table of open files: fh -> struct pf_snapshot, freed with it. */
GHashTable *pf_session_open_files_new(void);

#endif
