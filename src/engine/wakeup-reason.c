/* wakeup-reason.c - why the last suspend attempt ended, and how long it took
 * (the Android common kernel's kernel/power/wakeup_reason.c).
 *
 * Android's suspend service reads both files after every attempt: the
 * reasons to count wakeups by cause, the times to back off after short
 * sleeps.  So each attempt, ours or one the host made on its own, clears
 * the record as it begins and stamps it as it ends.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "powerfs/engine/wakeup-reason.h"

enum reason_kind {
	RESUME_NONE,
	RESUME_IRQ,
	RESUME_ABORT,
	RESUME_ABNORMAL,
};

struct wakeup_irq {
	int irq;
	char *name;
};

struct wakeup_reason {
	struct pf_clock *clock;
	gboolean capturing; /* an attempt is under way */
	enum reason_kind kind;
	GArray *irqs; /* struct wakeup_irq, ascending, no twice */
	char text[WAKEUP_REASON_TEXT_MAX]; /* of an abort or RESUME_ABNORMAL */
	gint64 begin_mono, begin_slept;
	gint64 awake_ns, asleep_ns; /* of the last attempt that ended */
	char *restored;		    /* the reasons shown before a restart */
};

/* A sysfs attribute's content: one page, its last byte the NUL. */
#define PAGE_TEXT_MAX 4095

static void clear_irq(gpointer p)
{
	g_free(((struct wakeup_irq *)p)->name);
}

struct wakeup_reason *wakeup_reason_new(struct pf_clock *clock)
{
	struct wakeup_reason *wr = g_new0(struct wakeup_reason, 1);

	wr->clock = clock;
	wr->irqs = g_array_new(FALSE, FALSE, sizeof(struct wakeup_irq));
	g_array_set_clear_func(wr->irqs, clear_irq);
	return wr;
}

void wakeup_reason_free(struct wakeup_reason *wr)
{
	if (!wr)
		return;
	g_array_unref(wr->irqs);
	g_free(wr->restored);
	g_free(wr);
}

void wakeup_reason_begin(struct wakeup_reason *wr)
{
	wr->begin_mono = pf_clock_mono_ns(wr->clock);
	wr->begin_slept = pf_clock_slept_ns(wr->clock);
	g_array_set_size(wr->irqs, 0);
	g_clear_pointer(&wr->restored, g_free);
	wr->kind = RESUME_NONE;
	wr->text[0] = '\0';
	wr->capturing = TRUE;
}

/* Below this, a move of the clocks' distance is the jitter of reading
 * them, not a sleep. */
#define NOT_A_SLEEP_NS 100000

void wakeup_reason_end(struct wakeup_reason *wr, gint64 slept_ns)
{
	gint64 mono = pf_clock_mono_ns(wr->clock) - wr->begin_mono;
	gint64 jump = pf_clock_slept_ns(wr->clock) - wr->begin_slept;

	wr->capturing = FALSE;
	if (slept_ns >= 0) {
		/* The monotonic clock went on through a simulated sleep, or
		 * a container's; the boot clock also counts a sleep of the
		 * host's within it, which the backend counts as asleep. */
		wr->asleep_ns = slept_ns;
		wr->awake_ns = MAX(mono + jump - slept_ns, 0);
	} else {
		wr->awake_ns = MAX(mono, 0);
		wr->asleep_ns = jump < NOT_A_SLEEP_NS ? 0 : jump;
	}
}

/* The first abort or non-IRQ wakeup is kept, and only if no IRQ came
 * first. */
static void log_text(struct wakeup_reason *wr, enum reason_kind kind,
		     const char *text)
{
	if (wr->kind != RESUME_NONE)
		return;
	wr->kind = kind;
	g_strlcpy(wr->text, text, sizeof(wr->text));
}

void wakeup_reason_log_abort(struct wakeup_reason *wr, const char *text)
{
	log_text(wr, RESUME_ABORT, text);
}

void wakeup_reason_log_abnormal(struct wakeup_reason *wr, const char *text)
{
	log_text(wr, RESUME_ABNORMAL, text);
}

void wakeup_reason_log_irq(struct wakeup_reason *wr, int irq, const char *name)
{
	struct wakeup_irq n = { irq, NULL };
	guint i;

	if (!wr->capturing || wr->kind == RESUME_ABORT ||
	    wr->kind == RESUME_ABNORMAL)
		return;
	for (i = 0; i < wr->irqs->len; i++) {
		const struct wakeup_irq *p =
			&g_array_index(wr->irqs, struct wakeup_irq, i);

		if (p->irq == irq)
			return;
		if (p->irq > irq)
			break;
	}
	n.name = g_strdup(name && *name ? name : "(unnamed)");
	g_array_insert_val(wr->irqs, i, n);
	wr->kind = RESUME_IRQ;
}

/* Appends printf-style text, cut where the page would end. */
G_GNUC_PRINTF(3, 4)
static void append_capped(GString *out, gsize start, const char *fmt, ...)
{
	g_autofree char *s = NULL;
	gsize used = out->len - start;
	va_list ap;

	va_start(ap, fmt);
	s = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (used < PAGE_TEXT_MAX)
		g_string_append_len(out, s,
				    MIN(strlen(s), PAGE_TEXT_MAX - used));
}

void wakeup_reason_get_times(const struct wakeup_reason *wr, gint64 *awake_ns,
			     gint64 *asleep_ns)
{
	*awake_ns = wr->awake_ns;
	*asleep_ns = wr->asleep_ns;
}

void wakeup_reason_restore(struct wakeup_reason *wr, const char *shown,
			   gint64 awake_ns, gint64 asleep_ns)
{
	g_free(wr->restored);
	wr->restored = *shown ? g_strndup(shown, PAGE_TEXT_MAX) : NULL;
	wr->awake_ns = awake_ns;
	wr->asleep_ns = asleep_ns;
}

void wakeup_reason_show_resume(const struct wakeup_reason *wr, GString *out)
{
	gsize start = out->len;

	if (wr->restored) {
		g_string_append(out, wr->restored);
		return;
	}
	switch (wr->kind) {
	case RESUME_ABORT:
		append_capped(out, start, "Abort: %s", wr->text);
		break;
	case RESUME_ABNORMAL:
		append_capped(out, start, "-1 %s", wr->text);
		break;
	case RESUME_IRQ:
		for (guint i = 0; i < wr->irqs->len; i++) {
			const struct wakeup_irq *p =
				&g_array_index(wr->irqs, struct wakeup_irq, i);

			append_capped(out, start, "%d %s\n", p->irq, p->name);
		}
		break;
	case RESUME_NONE:
		break;
	}
}

void wakeup_reason_show_times(const struct wakeup_reason *wr, GString *out)
{
	const gint64 sec = G_GINT64_CONSTANT(1000000000);

	g_string_append_printf(out,
			       "%" G_GINT64_FORMAT ".%09" G_GINT64_FORMAT
			       " %" G_GINT64_FORMAT ".%09" G_GINT64_FORMAT "\n",
			       wr->awake_ns / sec, wr->awake_ns % sec,
			       wr->asleep_ns / sec, wr->asleep_ns % sec);
}
