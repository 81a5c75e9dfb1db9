/* loop-lock.h - the loop lock (loop-lock.c): the main thread holds it
 * except while its loop polls; a thread that serves a request takes it. */
#ifndef POWERFS_LOOP_LOCK_H
#define POWERFS_LOOP_LOCK_H

/* Call once, from the main thread, before the first session: from then on
 * the main thread holds the loop lock except while the loop polls. */
void pf_loop_lock_init(void);
/* Taken and released by a thread that processes a request. */
void pf_loop_lock_take(void);
void pf_loop_lock_release(void);

#endif
