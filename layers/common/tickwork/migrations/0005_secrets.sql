-- Secrets, signing secrets and the data keys that encrypt them (tickwork.crypto). Values are stored only
-- sealed (AES-256-GCM, `v<key version>:<base64>`); sensitive job header values are sealed in place in
-- jobs.request, so no jobs column is added.

-- Data keys, wrapped by KMS (or the local master key file); the plaintext is never stored.
CREATE TABLE encryption_keys (
    version     serial PRIMARY KEY,
    wrapped     bytea NOT NULL,
    wrapper     text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE secrets (
    -- Only for list pagination (keyset on created_at, id, as the other lists); the API names a secret by name.
    id           uuid NOT NULL UNIQUE,
    tenant_id    uuid NOT NULL REFERENCES tenants(id),
    name         text NOT NULL CHECK (name ~ '^[A-Za-z_][A-Za-z0-9_]{0,63}$'),
    sealed       text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, name)
);
CREATE INDEX secrets_tenant_created ON secrets (tenant_id, created_at DESC, id DESC);

-- A tenant's Standard Webhooks secrets: the newest signs; one rotated out keeps signing until expires_at.
CREATE TABLE signing_secrets (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants(id),
    sealed      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz
);
CREATE INDEX signing_secrets_tenant ON signing_secrets (tenant_id, created_at DESC);
-- At most one current secret per tenant, so two first uses at once cannot both create one.
CREATE UNIQUE INDEX signing_secrets_one_current ON signing_secrets (tenant_id) WHERE expires_at IS NULL;
