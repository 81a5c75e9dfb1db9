/* inflight.h - the requests a server has read and not answered yet, kept
 * in the session file for a successor (kernels without FUSE_NOTIFY_RESEND).
 * Thread-safe: readers keep requests before they take the loop lock. */
#ifndef POWERFS_INFLIGHT_H
#define POWERFS_INFLIGHT_H

#include <glib.h>

struct pf_inflight;

/* A left request to answer with an error instead of processing it. */
struct pf_refusal {
	guint64 unique;
	gint err;	/* EINTR: its caller was signalled; EIO: it killed
			 * servers again and again */
};

/* The record in session_fd (the keeper's memfd): NULL without one, or if
 * it cannot be mapped (said in the log; requests are then not kept).
 * Requests a previous server left there are copied to *left (GBytes, oldest
 * first), to be processed again, or listed in *refused (struct
 * pf_refusal), to be answered with an error; they stay kept until
 * answered. */
struct pf_inflight *pf_inflight_open(int session_fd, const char *name,
				     GPtrArray **left, GArray **refused);
void pf_inflight_free(struct pf_inflight *in);
/* The kernel sends those left requests again itself (FUSE_NOTIFY_RESEND):
 * they are no longer kept. */
void pf_inflight_forget_all(struct pf_inflight *in);

/* The connection's INIT request, if a previous server died inside the
 * read(2) that took it (it never saved it, and the kernel waits for its
 * answer): NULL otherwise.  The caller owns it. */
GBytes *pf_inflight_take_unseen_init(struct pf_inflight *in);

/* Reader threads at most, each with a read buffer in the record. */
#define PF_INFLIGHT_READERS 4

/* Reader reader's buffer for read(2) of /dev/fuse (*size bytes): in the
 * session file, so that a request the kernel copied there survives a
 * server killed before it returned.  NULL without a record. */
void *pf_inflight_read_buffer(struct pf_inflight *in, guint reader,
			      gsize *size);
/* One read(2) of a request from fd into buf (at most len bytes), kept
 * before it is processed.  in may be NULL (nothing kept). */
gssize pf_inflight_read(struct pf_inflight *in, int fd, void *buf, gsize len);
/* The processing of request unique returned; if not answered, it waits. */
void pf_inflight_processed(struct pf_inflight *in, guint64 unique);
/* A left request is about to be processed again (returned FALSE), or its
 * processing returned (TRUE: it may wait still, but it did not kill this
 * server). */
void pf_inflight_replaying(struct pf_inflight *in, guint64 unique,
			   gboolean returned);
/* An answer to request unique was written. */
void pf_inflight_answered(struct pf_inflight *in, guint64 unique);

#endif
