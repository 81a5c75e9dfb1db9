/* events.c - the engine's subscribers (see events.h). */
#include "powerfs/engine/events.h"

struct subscriber {
	guint mask;
	pf_event_func func;
	gpointer data;
};

struct pf_events {
	GArray *subscribers; /* struct subscriber, in order */
};

struct pf_events *pf_events_new(void)
{
	struct pf_events *events = g_new0(struct pf_events, 1);

	events->subscribers =
		g_array_new(FALSE, FALSE, sizeof(struct subscriber));
	return events;
}

void pf_events_free(struct pf_events *events)
{
	if (!events)
		return;
	g_array_unref(events->subscribers);
	g_free(events);
}

void pf_events_subscribe(struct pf_events *events, guint mask,
			 pf_event_func func, gpointer data)
{
	struct subscriber sub = { mask, func, data };

	g_array_append_val(events->subscribers, sub);
}

void pf_events_unsubscribe(struct pf_events *events, pf_event_func func,
			   gpointer data)
{
	for (guint i = 0; i < events->subscribers->len; i++) {
		const struct subscriber *sub = &g_array_index(
			events->subscribers, struct subscriber, i);

		if (sub->func == func && sub->data == data) {
			g_array_remove_index(events->subscribers, i);
			return;
		}
	}
	g_warn_if_reached();
}

/* Every lock and unlock publishes a few: an array walk, no allocation. */
void pf_events_publish(struct pf_events *events, struct pf_event *ev)
{
	guint bit = PF_EVENT_BIT(ev->type);

	for (guint i = 0; i < events->subscribers->len; i++) {
		const struct subscriber *sub = &g_array_index(
			events->subscribers, struct subscriber, i);

		if (sub->mask & bit)
			sub->func(ev, sub->data);
	}
}
