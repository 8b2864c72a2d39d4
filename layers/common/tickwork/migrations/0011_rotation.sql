-- Re-encryption onto a new data key goes in batches (tickwork.secrets.vault): the API call does what fits
-- and the maintenance pass the rest, until no value is sealed under an older key. This marks the key whose
-- re-encryption is finished, so the pass does not look for stale values every minute. Keys already there
-- are looked at once more (NULL) and then marked.
ALTER TABLE encryption_keys ADD COLUMN resealed_at timestamptz;
