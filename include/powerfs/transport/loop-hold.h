/* loop-hold.h - how long each request holds the loop lock (with --debug). */
#ifndef POWERFS_LOOP_HOLD_H
#define POWERFS_LOOP_HOLD_H

#include <glib.h>

/* What held the lock: a FUSE opcode, or the main loop's own dispatch. */
#define PF_HOLD_MAIN_LOOP 0u

/* Turns the timing on (off by default: then start returns 0 and end does
 * nothing). */
void pf_loop_hold_enable(void);
/* Both called with the loop lock held: start just after taking it, end just
 * before letting it go. */
gint64 pf_loop_hold_start(void);
void pf_loop_hold_end(gint64 start, guint32 opcode);

#endif
