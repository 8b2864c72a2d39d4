-- Tickwork schema, version 15: a job's spread (docs/schedules.md, "Spread"). Every run of the job is moved
-- later by a fixed offset in [0, spread_seconds] derived from its id, so jobs written for the same instant
-- do not all fire at its first second. 0, the default, is the schedule as written: existing jobs keep their
-- times. A constant default adds the column without rewriting the table; the check reads it once.
ALTER TABLE jobs
    ADD COLUMN spread_seconds integer NOT NULL DEFAULT 0 CHECK (spread_seconds BETWEEN 0 AND 3600);
