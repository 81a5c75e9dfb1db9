/* inflight.h - the requests a server has read and not answered yet, kept
 * in the session file for a successor (kernels without FUSE_NOTIFY_RESEND),
 * and what a successor must know on every kernel: the request a dead
 * server was processing.  Thread-safe: readers keep requests before they
 * take the loop lock. */
#ifndef POWERFS_INFLIGHT_H
#define POWERFS_INFLIGHT_H

#include <glib.h>

struct pf_inflight;

/* A left request to answer with an error instead of processing it. */
struct pf_refusal {
	guint64 unique;
	gint err; /* EINTR: its caller was signalled; EIO: it crashed
			 * servers again and again */
};

/* The largest write powerfs asks the kernel for (at INIT): two pages.  A
 * store takes at most 4096 bytes, and a longer write must reach us as one
 * request, so that its short answer ends it; read buffers are sized from
 * this, not from libfuse's 256 pages. */
guint32 pf_inflight_max_write(void);

/* The record in session_fd (the keeper's memfd): NULL without one, or if
 * it cannot be mapped (said in the log; requests are then not kept).
 * Requests a previous server left there are copied to *left (GBytes, oldest
 * first), to be processed again, or listed in *refused (struct
 * pf_refusal), to be answered with an error; they stay kept until
 * answered.  crashed: the previous server died of a crash (not of SIGKILL
 * from outside, not by handing over), so the request it was processing, if
 * any, counts as one that kills servers. */
struct pf_inflight *pf_inflight_open(int session_fd, const char *name,
				     gboolean crashed, GPtrArray **left,
				     GArray **refused);
void pf_inflight_free(struct pf_inflight *in);
/* The kernel sends again what a dead server leaves (FUSE_NOTIFY_RESEND):
 * nothing kept is needed, and nothing is kept from now on.  Or it cannot,
 * and every request is kept (the default). */
void pf_inflight_set_resend(struct pf_inflight *in, gboolean resend);

/* An INIT request found in a read buffer: the connection's first server
 * read it and died before it saved it, if no INIT was saved (the caller
 * knows).  NULL if none; the caller owns it. */
GBytes *pf_inflight_take_buffered_init(struct pf_inflight *in);

/* Reader threads at most, each with a read buffer in the record. */
#define PF_INFLIGHT_READERS 4

/* Reader reader's buffer for read(2) of /dev/fuse (*size bytes, enough
 * for the largest request of this connection): in the session file, so
 * that a request the kernel copied there survives a server killed before
 * it returned.  NULL without a record. */
void *pf_inflight_read_buffer(struct pf_inflight *in, guint reader,
			      gsize *size);
/* One read(2) of a request from fd into buf (at most len bytes, or the
 * whole of a read buffer), kept before it is processed.  in may be NULL
 * (nothing kept). */
gssize pf_inflight_read(struct pf_inflight *in, int fd, void *buf, gsize len);
/* Request unique (opcode) is about to be processed, with the loop lock
 * held: FALSE if it must be answered EIO instead (it crashed servers again
 * and again). */
gboolean pf_inflight_begin(struct pf_inflight *in, guint64 unique,
			   guint32 opcode);
/* Its processing returned (it may wait still, but it did not kill this
 * server); if not answered, it is kept until it is. */
void pf_inflight_end(struct pf_inflight *in, guint64 unique);
/* An answer to request unique was written. */
void pf_inflight_answered(struct pf_inflight *in, guint64 unique);

#endif
