-- Tickwork schema, version 16: calendars (holiday exclusions). A tenant's named calendars hold explicit dates
-- and/or an iCalendar text of all-day events; a job's `calendar` names those it excludes and what happens to a
-- slot on an excluded date (skip it, or move it to the next date not excluded).
--
-- `compiled` is the calendar as the poller reads it (tickwork.calendars.rules.Calendar.to_json): the iCalendar
-- text is parsed once, when the calendar is written, never per tick.
CREATE TABLE calendars (
    tenant_id   uuid NOT NULL REFERENCES tenants(id),
    name        text NOT NULL CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$'),
    dates       date[] NOT NULL DEFAULT '{}',
    ical        text,
    compiled    jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);

-- {"exclude": [names], "on_excluded": "skip" | "next_day"}; null: no calendar. Nullable, no default: adding
-- it rewrites nothing.
ALTER TABLE jobs ADD COLUMN calendar jsonb;
-- DELETE /calendars/{name}: the live jobs that still use it.
CREATE INDEX jobs_tenant_calendar ON jobs USING gin ((calendar -> 'exclude')) WHERE calendar IS NOT NULL AND status <> 'deleted';
