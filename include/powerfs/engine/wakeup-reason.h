/* wakeup-reason.h - why the last suspend attempt ended and how long it
 * took (the Android common kernel's kernel/power/wakeup_reason.c, read
 * through /sys/kernel/wakeup_reasons).
 *
 * Every attempt clears the record when it begins and stamps its times when
 * it ends, whoever started it; in between, the first reason logged wins:
 * the IRQs that woke the system (all of them, in ascending order), or a
 * wakeup event that aborted the attempt, or a wakeup that was no IRQ.
 */
#ifndef POWERFS_WAKEUP_REASON_H
#define POWERFS_WAKEUP_REASON_H

#include <glib.h>
#include "powerfs/engine/clock.h"

/* The kernel's MAX_SUSPEND_ABORT_LEN: the longest text of an abort or of
 * a wakeup that was no IRQ, its NUL included. */
#define WAKEUP_REASON_TEXT_MAX 256

struct wakeup_reason;

struct wakeup_reason *wakeup_reason_new(struct pf_clock *clock);
void wakeup_reason_free(struct wakeup_reason *wr);

/* An attempt begins (the kernel's PM_SUSPEND_PREPARE): the reasons of the
 * last one are forgotten and the clocks read. */
void wakeup_reason_begin(struct wakeup_reason *wr);
/* It ended (PM_POST_SUSPEND).  slept_ns >= 0 says how long the system was
 * asleep when the clocks cannot tell it (a simulated sleep, during which
 * the monotonic clock went on); -1: the boot clock's jump over the
 * monotonic one tells it. */
void wakeup_reason_end(struct wakeup_reason *wr, gint64 slept_ns);

/* A wakeup event aborted the attempt (text: what the sources say, see
 * wakeup_describe_active()), or the system was woken by something that is
 * no IRQ.  Ignored once a reason is known. */
void wakeup_reason_log_abort(struct wakeup_reason *wr, const char *text);
void wakeup_reason_log_abnormal(struct wakeup_reason *wr, const char *text);
/* IRQ irq, whose handler is named name (NULL: "(unnamed)"), woke the
 * system.  Ignored after an abort or a wakeup that was no IRQ. */
void wakeup_reason_log_irq(struct wakeup_reason *wr, int irq, const char *name);

/* Saving the record across a restart of powerfs (state-file.c): the two
 * times, and last_resume_reason's text, which is shown as it was until the
 * next attempt begins. */
void wakeup_reason_get_times(const struct wakeup_reason *wr, gint64 *awake_ns,
			     gint64 *asleep_ns);
void wakeup_reason_restore(struct wakeup_reason *wr, const char *shown,
			   gint64 awake_ns, gint64 asleep_ns);

/* last_resume_reason: "%d %s\n" per IRQ, or "Abort: %s", or "-1 %s", or
 * nothing. */
void wakeup_reason_show_resume(const struct wakeup_reason *wr, GString *out);
/* last_suspend_time: "%llu.%09lu %llu.%09lu\n", the time the attempt took
 * awake, then the time asleep. */
void wakeup_reason_show_times(const struct wakeup_reason *wr, GString *out);

#endif
